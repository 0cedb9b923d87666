package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"

	"github.com/grdma/grdma/pci"
)

// Options adjust Read. The zero value reads the node as it is.
type Options struct {
	// GPUs are functions to treat as GPUs besides those found by ID
	// (`grdma topo gpu BDF...`): a GPU the tables do not know, or a
	// stand-in in a test.
	GPUs []pci.Address
	// GDRLevel is NCCL_NET_GDR_LEVEL; PathUnknown means NCCL's default,
	// DefaultGDRLevel.
	GDRLevel PathType
	// NodeGDR says whether the node can register GPU memory with its
	// RDMA devices at all (peer_mem or dma-buf, gpudirect.Check's
	// verdicts): nil when not checked. NCCL uses GDR for a pair only when
	// the node can.
	NodeGDR *bool
	// Platform overrides the detection of a virtual machine.
	Platform Platform
}

// Topology is the GPUs and RDMA NICs of a node and how they connect.
type Topology struct {
	GPUs []GPU `json:"gpus"`
	NICs []NIC `json:"nics"`
	// Matrix holds the path type between every two devices, GPUs first
	// then NICs, in the order of GPUs and NICs (Devices names them).
	Matrix [][]PathType `json:"matrix"`
	// Pairs are every GPU with every NIC on PCI, GPU by GPU.
	Pairs []Pair `json:"pairs"`
	// Choices are, per GPU, the NIC NCCL would use.
	Choices []Choice `json:"choices"`
	// GDRLevel is the NCCL_NET_GDR_LEVEL the GDR decisions use, and
	// NCCLVersions the NCCL releases whose rules they follow.
	GDRLevel     PathType `json:"gdr_level"`
	NCCLVersions string   `json:"nccl_versions"`
	Virtual      Virtual  `json:"virtual"`
	// Functions are every PCI function read, by address: the devices and
	// the bridges between them.
	Functions map[pci.Address]*pci.Function `json:"-"`
}

// NIC is an RDMA device and the PCI function it uses.
type NIC struct {
	// Name is "NIC<n>", n counting RDMA devices in name order.
	Name   string `json:"name"`
	Device string `json:"device"` // the RDMA device, "mlx5_0"
	// Attachment is where the device sits (pci.RDMADevice).
	Attachment pci.Attachment `json:"attachment"`
	// Function is its PCI function; nil when it has none (rxe on a veth).
	Function *pci.Function `json:"function"`
	// Netdevs are the function's network devices (for a software device,
	// the one it runs on).
	Netdevs []string `json:"netdevs"`
	// Soft is true for a software device (rxe, siw): NCCL finds no PCI
	// path for it (it has no device link) and attaches it to a CPU.
	Soft bool  `json:"soft"`
	Hops []Hop `json:"hops"`

	place place
}

// Pair is a GPU and a NIC.
type Pair struct {
	GPU string `json:"gpu"` // GPU<n>
	NIC string `json:"nic"` // NIC<n>
	// Path is nvidia-smi's class, NCCLPath the class NCCL gives it.
	Path     PathType `json:"path"`
	NCCLPath string   `json:"nccl_path"`
	// BandwidthGBps is the bandwidth NCCL's model gives the path (from
	// the links' maximum speeds and widths).
	BandwidthGBps float64 `json:"bandwidth_gbps"`
	// GDR is whether NCCL would use GPUDirect RDMA between them.
	GDR GDR `json:"gdr"`
	// Between are the bridges the traffic passes below the point where
	// the two ways up meet (a common switch, or both root ports): where
	// ACS redirection matters.
	Between []pci.Address `json:"between"`
	// ACSRedirect are those of Between whose ACS control redirects
	// peer-to-peer requests or completions to the root complex;
	// ACSUnknown those whose config space could not be read.
	ACSRedirect []pci.Address `json:"acs_redirect"`
	ACSUnknown  []pci.Address `json:"acs_unknown"`
}

// GDR is NCCL's GPUDirect RDMA decision for a pair (ncclTopoCheckGdr).
type GDR struct {
	// PathAllows is true when the path is at most the GDR level.
	PathAllows bool `json:"path_allows"`
	// Used is PathAllows and the node's ability (Options.NodeGDR): nil
	// when the path allows it but the node was not checked.
	Used *bool `json:"used"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// Word is Used as a word: "yes", "no" or "unknown".
func (g GDR) Word() string {
	switch {
	case g.Used == nil:
		return "unknown"
	case *g.Used:
		return "yes"
	}
	return "no"
}

// Choice is the NIC NCCL would give a GPU for its first channel
// (ncclTopoGetLocalNet): among the NICs with the highest path bandwidth
// the closest, spread over the GPUs that share them.
type Choice struct {
	GPU string `json:"gpu"`
	// NIC is "" when there is no NIC on PCI.
	NIC string `json:"nic"`
	// Local are all the NICs NCCL considers local to the GPU (the
	// closest of the fastest).
	Local []string `json:"local"`
	Path  PathType `json:"path"`
	GDR   GDR      `json:"gdr"`
	// SharedWith are the other GPUs that get the same NIC.
	SharedWith []string `json:"shared_with"`
	// Closer are NICs closer to this GPU than its choice that no GPU
	// uses (it shares one while a closer one idles).
	Closer []string `json:"closer"`
}

// NotFoundError is a function named in Options.GPUs that does not exist.
type NotFoundError struct{ Address pci.Address }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("PCI function %s not found", e.Address)
}

// Read reads the GPUs and RDMA devices of the node whose root (where sys/
// and proc/ are) is fsys, and relates them. It reads whole only the
// functions that matter: the GPUs, the NICs and the bridges above them.
func Read(fsys fs.ReadLinkFS, opts Options) (*Topology, error) {
	addrs, err := pci.List(fsys)
	if err != nil {
		return nil, err
	}
	t := &Topology{Functions: map[pci.Address]*pci.Function{}, GDRLevel: opts.GDRLevel, NCCLVersions: NCCLVersions}
	if t.GDRLevel == PathUnknown {
		t.GDRLevel = DefaultGDRLevel
	}
	for _, a := range opts.GPUs {
		if !slices.Contains(addrs, a) {
			return nil, &NotFoundError{Address: a}
		}
	}
	var gpus []pci.Address
	for _, a := range addrs {
		id, err := pci.ReadIdentity(fsys, a)
		if err != nil {
			continue // vanished
		}
		if _, ok := isGPU(id); ok || slices.Contains(opts.GPUs, a) {
			gpus = append(gpus, a)
		}
	}
	for _, a := range gpus {
		f, err := t.function(fsys, a)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		vendor, _ := isGPU(pci.Identity{Class: f.Class, Vendor: f.Vendor})
		g := GPU{Name: "GPU" + strconv.Itoa(len(t.GPUs)), Function: *f, Vendor: vendor, Named: slices.Contains(opts.GPUs, a),
			DMABuf: dmabufCapable(*f)}
		if f.Vendor == VendorNVIDIA {
			g.Driver = readNVIDIAInfo(fsys, f.Address)
		}
		t.GPUs = append(t.GPUs, g)
	}
	if err := t.readNICs(fsys); err != nil {
		return nil, err
	}
	for i := range t.GPUs {
		t.GPUs[i].Hops = hops(t.GPUs[i].Function, t.Functions)
	}
	for i := range t.NICs {
		if n := &t.NICs[i]; n.Function != nil {
			n.Hops = hops(*n.Function, t.Functions)
		}
	}
	t.relate(opts)
	t.Virtual = detectVirtual(fsys, t, opts.Platform)
	return t, nil
}

// function reads the function at a and the bridges above it, once.
func (t *Topology) function(fsys fs.ReadLinkFS, a pci.Address) (*pci.Function, error) {
	if f, ok := t.Functions[a]; ok {
		return f, nil
	}
	f, err := pci.ReadFunction(fsys, a)
	if err != nil {
		return nil, err
	}
	t.Functions[a] = &f
	for _, up := range f.Upstream {
		if _, ok := t.Functions[up]; ok {
			continue
		}
		if uf, err := pci.ReadFunction(fsys, up); err == nil {
			t.Functions[up] = &uf
		}
	}
	return &f, nil
}

// readNICs reads every RDMA device in class/infiniband, in name order.
func (t *Topology) readNICs(fsys fs.ReadLinkFS) error {
	entries, err := fs.ReadDir(fsys, "sys/class/infiniband")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		a, err := pci.RDMADevice(fsys, e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // unregistered since the listing
		}
		if err != nil {
			return err
		}
		n := NIC{Name: "NIC" + strconv.Itoa(len(t.NICs)), Device: e.Name(), Attachment: a, Soft: a.Netdev != ""}
		if a.Function != nil {
			f, err := t.function(fsys, *a.Function)
			switch {
			case err == nil:
				n.Function = f
			case !errors.Is(err, fs.ErrNotExist):
				return err
			}
		}
		switch {
		case n.Soft:
			n.Netdevs = []string{a.Netdev}
		case n.Function != nil:
			n.Netdevs = n.Function.Netdevs
		}
		t.NICs = append(t.NICs, n)
	}
	return nil
}

// Devices names the matrix's rows and columns: the GPUs then the NICs.
func (t *Topology) Devices() []string {
	var names []string
	for _, g := range t.GPUs {
		names = append(names, g.Name)
	}
	for _, n := range t.NICs {
		names = append(names, n.Name)
	}
	return names
}

// relate fills in the matrix, the pairs and the choices.
func (t *Topology) relate(opts Options) {
	var places []*place
	for i := range t.GPUs {
		p := placeOf(&t.GPUs[i].Function, t.Functions)
		places = append(places, &p)
	}
	for i := range t.NICs {
		n := &t.NICs[i]
		if n.Function != nil {
			n.place = placeOf(n.Function, t.Functions)
			places = append(places, &n.place)
		} else {
			places = append(places, nil)
		}
	}
	t.Matrix = make([][]PathType, len(places))
	for i := range places {
		t.Matrix[i] = make([]PathType, len(places))
		for j := range places {
			switch {
			case places[i] == nil || places[j] == nil:
				t.Matrix[i][j] = PathUnknown
			case i == j:
				t.Matrix[i][j] = PathSelf
			default:
				t.Matrix[i][j] = classify(*places[i], *places[j])
			}
		}
	}
	type pairBW struct {
		path PathType
		bw   float64
	}
	bw := map[[2]int]pairBW{}
	for gi, g := range t.GPUs {
		for ni, n := range t.NICs {
			if n.Function == nil {
				continue
			}
			path := t.Matrix[gi][len(t.GPUs)+ni]
			p := Pair{GPU: g.Name, NIC: n.Name, Path: path, NCCLPath: path.NCCLName(),
				BandwidthGBps: pathBW(*places[gi], n.place)}
			p.GDR = t.gdr(path, opts.NodeGDR)
			p.Between = between(g.Function, *n.Function)
			for _, a := range p.Between {
				f := t.Functions[a]
				switch {
				case f == nil || f.Config == nil:
					p.ACSUnknown = append(p.ACSUnknown, a)
				case f.Config.ACS != nil && f.Config.ACS.Control.Redirects():
					p.ACSRedirect = append(p.ACSRedirect, a)
				}
			}
			t.Pairs = append(t.Pairs, p)
			bw[[2]int{gi, ni}] = pairBW{path.NCCL(), p.BandwidthGBps}
		}
	}
	// ncclTopoGetLocal: the fastest paths, of those the closest.
	local := func(from int, count int, key func(i int) (pairBW, bool)) []int {
		var best []int
		var bp pairBW
		for i := range count {
			p, ok := key(i)
			if !ok {
				continue
			}
			if len(best) == 0 || p.bw > bp.bw || (p.bw == bp.bw && p.path < bp.path) {
				best, bp = nil, p
			}
			if p.bw == bp.bw && p.path == bp.path {
				best = append(best, i)
			}
		}
		return best
	}
	used := map[int][]int{}
	for gi, g := range t.GPUs {
		c := Choice{GPU: g.Name}
		nets := local(gi, len(t.NICs), func(ni int) (pairBW, bool) { p, ok := bw[[2]int{gi, ni}]; return p, ok })
		if len(nets) == 0 {
			c.GDR = GDR{Reason: "no RDMA device on PCI"}
			t.Choices = append(t.Choices, c)
			continue
		}
		gpus := local(nets[0], len(t.GPUs), func(gj int) (pairBW, bool) { p, ok := bw[[2]int{gj, nets[0]}]; return p, ok })
		idx := gi % max(len(gpus), 1) // the GPU's CUDA index, taken as its PCI order

		if isPow2(len(nets)) {
			idx = mirrorBits(idx, len(nets))
		}
		ni := nets[idx%len(nets)]
		c.NIC = t.NICs[ni].Name
		for _, x := range nets {
			c.Local = append(c.Local, t.NICs[x].Name)
		}
		c.Path = t.Matrix[gi][len(t.GPUs)+ni]
		c.GDR = t.gdr(c.Path, opts.NodeGDR)
		used[ni] = append(used[ni], gi)
		t.Choices = append(t.Choices, c)
	}
	for i := range t.Choices {
		c := &t.Choices[i]
		if c.NIC == "" {
			continue
		}
		ni := slices.IndexFunc(t.NICs, func(n NIC) bool { return n.Name == c.NIC })
		for _, gj := range used[ni] {
			if t.GPUs[gj].Name != c.GPU {
				c.SharedWith = append(c.SharedWith, t.GPUs[gj].Name)
			}
		}
		if len(c.SharedWith) == 0 {
			continue
		}
		for nj, n := range t.NICs {
			if len(used[nj]) > 0 || n.Function == nil {
				continue
			}
			if t.Matrix[i][len(t.GPUs)+nj] < c.Path {
				c.Closer = append(c.Closer, n.Name)
			}
		}
	}
}

// gdr decides GPUDirect RDMA for a pair of path type path.
func (t *Topology) gdr(path PathType, node *bool) GDR {
	level := t.GDRLevel
	nccl := path.NCCL()
	g := GDR{PathAllows: nccl <= level}
	switch {
	case !g.PathAllows:
		g.Used = new(false)
		g.Reason = fmt.Sprintf("%s is beyond NCCL_NET_GDR_LEVEL %s: NCCL stages through host memory", nccl.NCCLName(), level.NCCLName())
	case node == nil:
		g.Reason = fmt.Sprintf("%s is within NCCL_NET_GDR_LEVEL %s; whether the node can register GPU memory is unknown (grdma check gdr)", nccl.NCCLName(), level.NCCLName())
	case !*node:
		g.Used = new(false)
		g.Reason = fmt.Sprintf("%s is within NCCL_NET_GDR_LEVEL %s, but the node cannot register GPU memory (neither peer_mem nor dma-buf)", nccl.NCCLName(), level.NCCLName())
	default:
		g.Used = new(true)
		g.Reason = fmt.Sprintf("%s is within NCCL_NET_GDR_LEVEL %s", nccl.NCCLName(), level.NCCLName())
	}
	return g
}

// between lists the bridges on the two functions' ways up below the
// function where they meet (all of them when they meet only at a host
// bridge or CPU).
func between(a, b pci.Function) []pci.Address {
	var out []pci.Address
	common := func(x pci.Address, other []pci.Address) bool { return slices.Contains(other, x) }
	for _, x := range a.Upstream {
		if common(x, b.Upstream) {
			break
		}
		out = append(out, x)
	}
	for _, x := range b.Upstream {
		if common(x, a.Upstream) {
			break
		}
		out = append(out, x)
	}
	return out
}
