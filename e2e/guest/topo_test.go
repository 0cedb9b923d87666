//go:build e2eguest

package guest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The topology scenarios (TestTopo*) run in a guest booted with the
// "switch" PCIe layout of e2e.Topologies (e2e/topology.go): two e1000e
// NICs and a virtio-vga display under one switch, a virtio-net NIC under a
// second switch below it, an e1000e alone on a root port, a VGA display on
// another, and an e1000e under each of two more host bridges (one of them
// on NUMA node 1). The single guest, booted without it, skips them.

// topoGPUs are the display functions standing in for GPUs.
var topoGPUs = []string{"0000:05:00.0", "0000:0a:00.0"}

// topoWant is the class nvidia-smi would print between each stand-in GPU
// and the NIC at each function, from the layout: same switch PIX, through
// the nested switch PXB, other root port PHB, other host bridge with no
// NUMA node NODE, NUMA node 1 SYS.
var topoWant = map[string]map[string]string{
	"0000:05:00.0": {"0000:03:00.0": "PIX", "0000:04:00.0": "PIX", "0000:08:00.0": "PXB", "0000:09:00.0": "PHB",
		"0000:41:00.0": "NODE", "0000:81:00.0": "SYS"},
	"0000:0a:00.0": {"0000:03:00.0": "PHB", "0000:04:00.0": "PHB", "0000:08:00.0": "PHB", "0000:09:00.0": "PHB",
		"0000:41:00.0": "NODE", "0000:81:00.0": "SYS"},
}

// topoJSON is the part of grdma -j topo the scenario reads.
type topoJSON struct {
	GPUs []struct {
		Name     string
		Function struct{ Address string }
		Hops     []topoHop
	}
	NICs []struct {
		Name, Device string
		Netdevs      []string
		Soft         bool
		Function     *struct {
			Address string
			Config  *struct {
				Express *struct {
					PortType string `json:"port_type"`
				}
			}
		}
		Hops []topoHop
	}
	Matrix  [][]string
	Choices []struct {
		GPU, NIC, Path string
		GDR            struct {
			PathAllows bool  `json:"path_allows"`
			Used       *bool `json:"used"`
		}
	}
	Virtual struct{ Likely bool }
}

type topoHop struct {
	Function, State string
	Width           int
}

// pciNICs loads the NIC drivers and puts an rxe device on every netdev on
// a PCI function; it returns the function of each rxe device, found with
// readlink, apart from grdma.
func pciNICs(t *testing.T) map[string]string {
	t.Helper()
	if _, err := os.Stat("/sys/bus/pci/devices/0000:05:00.0"); err != nil {
		t.Skip("not booted with the switch PCIe layout (e2e TestTopology boots it)")
	}
	cleanRDMA(t)
	loadModules(t, "e1000e", "virtio_net")
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	functions := map[string]string{}
	for _, e := range ents {
		dev, err := filepath.EvalSymlinks("/sys/class/net/" + e.Name() + "/device")
		if err != nil {
			continue // virtual
		}
		fn := filepath.Base(dev)
		if strings.HasPrefix(fn, "virtio") { // virtio-net: virtioN below its PCI function
			fn = filepath.Base(filepath.Dir(dev))
		}
		ip(t, "link", "set", e.Name(), "up")
		name := "rxe" + strings.ReplaceAll(fn[5:], ":", "")[:2] // rxe03, rxe04, ...
		addRxe(t, name, e.Name())
		functions[name] = fn
	}
	if len(functions) != 6 {
		t.Fatalf("%d NICs on PCI (%v), want the layout's 6", len(functions), functions)
	}
	return functions
}

func topoArgs(extra ...string) []string {
	return append(append([]string{"-j", "topo", "gpu"}, topoGPUs...), extra...)
}

// TestTopo: grdma topo reads the QEMU PCIe layout right: every class
// between the stand-in GPUs and the rxe devices on the NICs, the links
// (all as capable as both ends: QEMU cannot train one down), NCCL's NIC
// per GPU, and that the machine is virtual; as root it reads config space,
// as uid 65534 not, and says so instead of failing.
func TestTopo(t *testing.T) {
	functions := pciNICs(t)
	var top topoJSON
	r := must(t, grdma(), topoArgs()...)
	if err := json.Unmarshal([]byte(r.stdout), &top); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	if len(top.GPUs) != 2 || top.GPUs[0].Function.Address != topoGPUs[0] || top.GPUs[1].Function.Address != topoGPUs[1] {
		t.Fatalf("GPUs %+v, want %v", top.GPUs, topoGPUs)
	}
	nicFn := map[string]string{} // NICn -> function
	for _, n := range top.NICs {
		want, ok := functions[n.Device]
		if !ok || n.Function == nil || n.Function.Address != want || !n.Soft {
			t.Errorf("%s %s: function %+v, want %s (its netdev's, readlink)", n.Name, n.Device, n.Function, want)
			continue
		}
		if n.Function.Config == nil || n.Function.Config.Express == nil || n.Function.Config.Express.PortType != "endpoint" {
			t.Errorf("%s: config %+v, want the PCI Express capability of an endpoint (read as root)", n.Device, n.Function.Config)
		}
		nicFn[n.Name] = want
		for _, h := range n.Hops {
			if h.State != "ok" {
				t.Errorf("%s: hop %+v not ok", n.Device, h)
			}
		}
	}
	if len(nicFn) != 6 || len(top.Matrix) != 8 {
		t.Fatalf("NICs %v, matrix %v", nicFn, top.Matrix)
	}
	for gi, g := range top.GPUs {
		for ni, n := range top.NICs {
			got := top.Matrix[gi][2+ni]
			if want := topoWant[g.Function.Address][nicFn[n.Name]]; got != want {
				t.Errorf("%s (%s) to %s (%s): %s, want %s", g.Name, g.Function.Address, n.Device, nicFn[n.Name], got, want)
			}
			if back := top.Matrix[2+ni][gi]; back != got {
				t.Errorf("matrix not symmetric: %s %s", got, back)
			}
		}
		if top.Matrix[gi][gi] != "X" {
			t.Errorf("%s to itself: %s", g.Name, top.Matrix[gi][gi])
		}
	}
	for _, h := range top.GPUs[0].Hops {
		if h.State != "ok" || h.Width != 1 {
			t.Errorf("GPU0 hop %+v: want ok at x1", h)
		}
	}
	if !top.Virtual.Likely {
		t.Error("a QEMU guest not taken for virtual")
	}
	// NCCL: GPU0 gets one of the two NICs on its switch, with GDR by
	// path (not used: no NVIDIA driver); GPU1 only PHB ones, no GDR.
	if len(top.Choices) != 2 {
		t.Fatalf("choices %+v", top.Choices)
	}
	c0, c1 := top.Choices[0], top.Choices[1]
	if c0.Path != "PIX" || !slices.Contains([]string{"0000:03:00.0", "0000:04:00.0"}, nicFn[c0.NIC]) || !c0.GDR.PathAllows || c0.GDR.Used == nil || *c0.GDR.Used {
		t.Errorf("GPU0's choice %+v: want a PIX NIC, GDR allowed by path, not used (no NVIDIA driver)", c0)
	}
	if c1.Path != "PHB" || c1.GDR.PathAllows {
		t.Errorf("GPU1's choice %+v: want a PHB NIC without GDR", c1)
	}

	text := must(t, grdma(), append([]string{"topo", "gpu"}, topoGPUs...)...).stdout
	for _, want := range []string{"\nGPU0 X ", "NIC Legend:", "This node looks virtual", "NCCL_NET_GDR_LEVEL=PXB"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}

	// As uid 65534: the same classes, config space unknown.
	var unpriv topoJSON
	r = runAs(65534, grdma(), topoArgs()...)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &unpriv) != nil {
		t.Fatalf("as uid 65534:\n%s", r)
	}
	if !slices.EqualFunc(unpriv.Matrix, top.Matrix, slices.Equal) {
		t.Errorf("as uid 65534 the matrix differs: %v", unpriv.Matrix)
	}
	for _, n := range unpriv.NICs {
		if n.Function == nil || n.Function.Config != nil {
			t.Errorf("as uid 65534, %s: config %+v, want none (64-byte header only)", n.Device, n.Function)
		}
	}

	// Bad input: exit 2 naming the problem; a function that does not
	// exist: exit 1.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topo", "gpu"}, 2, "missing PCI address after gpu"},
		{[]string{"topo", "gpu", "05:00"}, 2, "gpu wants PCI addresses"},
		{[]string{"topo", "gdr-level", "FOO"}, 2, "NCCL_NET_GDR_LEVEL"},
		{[]string{"topo", "platform", "cloud"}, 2, "unknown platform"},
		{[]string{"topo", "gpu", "0000:3b:00.0"}, 1, "gpu 0000:3b:00.0: no such PCI function"},
	} {
		r := run(grdma(), tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("want exit %d and %q:\n%s", tt.code, tt.want, r)
		}
	}
}

// TestTopoCheckGDR: grdma check gdr judges each stand-in GPU with the NIC
// NCCL would give it: GPU0's PIX pair passes (the node cannot do
// GPUDirect: no NVIDIA driver, said in the node result, which warns),
// GPU1's PHB pair warns that NCCL turns GPUDirect RDMA off there and names
// the remedies of a virtual topology. Nothing fails: exit 0.
func TestTopoCheckGDR(t *testing.T) {
	functions := pciNICs(t)
	r := run(grdma(), append([]string{"-j", "check", "gdr", "gpu"}, topoGPUs...)...)
	var rep checkReport
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("want exit 0 and a report:\n%s", r)
	}
	bySubject := map[string]string{}
	for _, c := range rep.Checks {
		bySubject[c.Subject] = c.Status + " " + c.Message
	}
	if s := bySubject["node"]; !strings.HasPrefix(s, "WARN no NVIDIA driver") {
		t.Errorf("node: %q, want WARN for the missing NVIDIA driver", s)
	}
	var gpu0, gpu1 string
	for subj, s := range bySubject {
		switch {
		case strings.HasPrefix(subj, "GPU0 "):
			gpu0 = s
			if fn := functions[strings.TrimPrefix(subj, "GPU0 ")]; fn != "0000:03:00.0" && fn != "0000:04:00.0" {
				t.Errorf("GPU0 paired with %s at %s, want a NIC on its switch", subj, fn)
			}
		case strings.HasPrefix(subj, "GPU1 "):
			gpu1 = s
		}
	}
	if !strings.HasPrefix(gpu0, "PASS PIX") {
		t.Errorf("GPU0: %q, want PASS PIX\n%s", gpu0, r)
	}
	if !strings.HasPrefix(gpu1, "WARN PHB") || !strings.Contains(gpu1, "NCCL_TOPO_FILE") {
		t.Errorf("GPU1: %q, want WARN PHB naming the virtual topology's remedies\n%s", gpu1, r)
	}
	if len(rep.Checks) != 3 {
		t.Errorf("%d results, want node, GPU0 and GPU1:\n%s", len(rep.Checks), r)
	}
}
