package health

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/topo"
)

// gdrNode is the node report of a node that can do GPUDirect RDMA by
// dma-buf (the open-dmabuf fixture of package gpudirect, memory aside).
func gdrNode(t *testing.T) gpudirect.Report {
	unlimited := gpudirect.MemlockUnlimited
	rep := gpudirect.Check(os.DirFS(filepath.Join("..", "gpudirect", "testdata", "open-dmabuf")), gpudirect.Options{MemlockLimit: &unlimited})
	rep.Memory.Warnings = nil
	if r := CheckGDR(rep); r.Status != Pass {
		t.Fatalf("node result %s %q, want PASS", r.Status, r.Message)
	}
	return rep
}

// readTopology reads a captured tree of ../pci/testdata with the named
// functions as GPUs.
func readTopology(t *testing.T, name string, opts topo.Options, gpus ...string) *topo.Topology {
	t.Helper()
	fsys, err := sysfs.NewFS(filepath.Join("..", "pci", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		a, err := pci.ParseAddress(g)
		if err != nil {
			t.Fatal(err)
		}
		opts.GPUs = append(opts.GPUs, a)
	}
	top, err := topo.Read(fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func bySubject(results []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range results {
		s := r.Subject
		if i := strings.IndexByte(s, ' '); i > 0 {
			s = s[:i] // "GPU0 rxeN": the NIC's name is the capture's
		}
		m[s] = r
	}
	return m
}

// TestCheckGDRTopologySwitch: in the QEMU switch layout (a VM), GPU0's
// NIC is PIX: PASS; GPU1's best is PHB: WARN, GPUDirect off by NCCL's
// default, naming the virtual topology's remedies.
func TestCheckGDRTopologySwitch(t *testing.T) {
	top := readTopology(t, "switch-6.12", topo.Options{NodeGDR: new(true)}, "0000:05:00.0", "0000:0a:00.0")
	res := CheckGDRTopology(gdrNode(t), top)
	if len(res) != 3 {
		t.Fatalf("%d results: %+v", len(res), res)
	}
	m := bySubject(res)
	if r := m["node"]; r.Status != Pass || !hasFact(r, "gpu", "GPU0 0000:05:00.0 0x1af4:0x1050") || !hasFact(r, "rdma_devices_on_pci", "6") {
		t.Errorf("node: %+v", r)
	}
	if r := m["GPU0"]; r.Status != Pass || !strings.HasPrefix(r.Message, "PIX to rxe") || !hasFact(r, "gdr", "yes") {
		t.Errorf("GPU0: %s %q %v", r.Status, r.Message, r.Facts)
	}
	if r := m["GPU1"]; r.Status != Warn || !strings.HasPrefix(r.Message, "PHB to rxe") || !strings.Contains(r.Message, "NCCL_TOPO_FILE") ||
		!strings.Contains(r.Message, "beyond NCCL_NET_GDR_LEVEL PXB") {
		t.Errorf("GPU1: %s %q", r.Status, r.Message)
	}
}

// TestCheckGDRTopologyACS: the switch layout with the IOMMU on, judged as
// bare metal: GPU1's pair passes root ports whose ACS redirects peer
// traffic, and every group translates: WARN naming both. As a VM the
// same is only mentioned.
func TestCheckGDRTopologyACS(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			top := readTopology(t, "switch-iommu-"+k, topo.Options{NodeGDR: new(true), Platform: topo.PlatformBareMetal}, "0000:05:00.0", "0000:0a:00.0")
			m := bySubject(CheckGDRTopology(gdrNode(t), top))
			r := m["GPU1"]
			if r.Status != Warn || !strings.Contains(r.Message, "ACS redirects peer-to-peer traffic to the root complex at 0000:00:04.0 0000:00:0") ||
				!strings.Contains(r.Message, "translates DMA (DMA-FQ)") || strings.Contains(r.Message, "NCCL_TOPO_FILE") {
				t.Errorf("GPU1 on bare metal: %s %q", r.Status, r.Message)
			}
			if r := m["GPU0"]; r.Status != Warn || strings.Contains(r.Message, "ACS") || !strings.Contains(r.Message, "translates DMA") {
				t.Errorf("GPU0 (PIX, no ACS on the switch ports) on bare metal: %s %q", r.Status, r.Message)
			}
			top = readTopology(t, "switch-iommu-"+k, topo.Options{NodeGDR: new(true)}, "0000:05:00.0")
			if r := bySubject(CheckGDRTopology(gdrNode(t), top))["GPU0"]; r.Status != Pass || !strings.Contains(r.Message, "(IOMMU group") {
				t.Errorf("GPU0 in the VM: %s %q, want PASS mentioning the IOMMU", r.Status, r.Message)
			}
		})
	}
}

// TestCheckGDRTopologyUnprivileged: ACS that cannot be read is said, not
// judged.
func TestCheckGDRTopologyUnprivileged(t *testing.T) {
	top := readTopology(t, "switch-unprivileged-6.12", topo.Options{NodeGDR: new(true)}, "0000:05:00.0")
	if r := bySubject(CheckGDRTopology(gdrNode(t), top))["GPU0"]; r.Status != Pass || !strings.Contains(r.Message, "ACS not read (config space needs root)") {
		t.Errorf("GPU0: %s %q", r.Status, r.Message)
	}
}

// TestCheckGDRTopologyGPUOnly: a GPU and no RDMA device (the H100 VM of
// issue 28: CUDA exports dma-buf, nothing can import it): the node's
// PASS becomes WARN, saying why and keeping the GPU and kernel readiness.
func TestCheckGDRTopologyGPUOnly(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		top := readTopology(t, "gpu-only-"+k, topo.Options{NodeGDR: new(true)}, "0000:00:06.0")
		res := CheckGDRTopology(gdrNode(t), top)
		if len(res) != 1 {
			t.Fatalf("%s: %+v, want the node result only", k, res)
		}
		r := res[0]
		if r.Status != Warn || !strings.HasPrefix(r.Message, "no RDMA device: nothing to do GPUDirect RDMA with (GPU and kernel ready: GPUDirect RDMA via dma-buf") ||
			!hasFact(r, "rdma_devices_on_pci", "0") || !hasFact(r, "gpu", "GPU0 0000:00:06.0 0x1af4:0x1050") || r.Detail == nil {
			t.Errorf("%s: %s %q %v", k, r.Status, r.Message, r.Facts)
		}
		// A node result that warns already (no NVIDIA driver) says it too.
		noDriver := gpudirect.Check(os.DirFS(filepath.Join("..", "gpudirect", "testdata", "no-gpu")), gpudirect.Options{})
		r = CheckGDRTopology(noDriver, top)[0]
		if r.Status != Warn || !strings.HasPrefix(r.Message, "no NVIDIA driver") || !strings.HasSuffix(r.Message, "; no RDMA device: nothing to do GPUDirect RDMA with") {
			t.Errorf("%s without the driver: %s %q", k, r.Status, r.Message)
		}
	}
}

// TestCheckGDRTopologyNICOnly: no GPU, one NIC: the node result alone.
func TestCheckGDRTopologyNICOnly(t *testing.T) {
	top := readTopology(t, "nic-only-6.12", topo.Options{NodeGDR: new(true)})
	res := CheckGDRTopology(gdrNode(t), top)
	if len(res) != 1 || res[0].Status != Pass || !hasFact(res[0], "rdma_devices_on_pci", "1") {
		t.Errorf("%+v", res)
	}
}

// TestCheckGDRTopologyDegraded: a degraded link FAILs the pair, the
// GPU's own speed alone does not. QEMU cannot train a link down, so the
// captured layout gets the link states of real machines' messages
// (topo's TestJudgeLink) written into its hops.
func TestCheckGDRTopologyDegraded(t *testing.T) {
	top := readTopology(t, "switch-6.12", topo.Options{NodeGDR: new(true)}, "0000:05:00.0")
	c := top.Choices[0]
	var nic *topo.NIC
	for i := range top.NICs {
		if top.NICs[i].Name == c.NIC {
			nic = &top.NICs[i]
		}
	}
	nic.Hops[0] = topo.Hop{Function: nic.Hops[0].Function, Port: nic.Hops[0].Port, Speed: pci.Gen3, Width: 8,
		CapableSpeed: pci.Gen3, CapableWidth: 16, State: topo.LinkDegraded, WidthBelow: true}
	top.GPUs[0].Hops[0] = topo.Hop{Function: top.GPUs[0].Hops[0].Function, Port: top.GPUs[0].Hops[0].Port, Speed: pci.Gen1, Width: 16,
		CapableSpeed: pci.Gen5, CapableWidth: 16, State: topo.LinkDegraded, SpeedBelow: true}
	r := bySubject(CheckGDRTopology(gdrNode(t), top))["GPU0"]
	if r.Status != Fail || !strings.Contains(r.Message, "PCIe link degraded: "+nic.Function.Address.String()) ||
		!strings.Contains(r.Message, "at 8.0 GT/s x8, capable of 8.0 GT/s x16") || !strings.Contains(r.Message, "idle GPUs drop to Gen1") {
		t.Errorf("%s %q", r.Status, r.Message)
	}
	// A NIC no GPU uses, degraded: a result of its own.
	top = readTopology(t, "switch-6.12", topo.Options{NodeGDR: new(true)})
	top.NICs[2].Hops[0].State, top.NICs[2].Hops[0].WidthBelow = topo.LinkDegraded, true
	res := CheckGDRTopology(gdrNode(t), top)
	if len(res) != 2 || res[1].Status != Fail || res[1].Subject != top.NICs[2].Device {
		t.Errorf("%+v", res)
	}
}

func hasFact(r Result, name, prefix string) bool {
	for _, s := range r.Facts {
		if s.Name == name && strings.HasPrefix(s.Value, prefix) {
			return true
		}
	}
	return false
}

// TestCheckGDRTopologySharedAER: a GPU that shares its NIC while closer
// NICs idle warns, and so do AER errors at the GPU, the NIC or a bridge
// between them. QEMU gives every NIC the same path bandwidth (NCCL then
// never prefers a farther NIC: topo's TestCloserIdle makes one faster in
// memory) and raises no AER error, so the captured switch layout gets the
// choice's sharing and a counter of its root port written in.
func TestCheckGDRTopologySharedAER(t *testing.T) {
	top := readTopology(t, "switch-6.12", topo.Options{NodeGDR: new(true)}, "0000:05:00.0", "0000:0a:00.0")
	c := &top.Choices[1] // GPU1, PHB from every NIC but NODE and SYS ones
	c.SharedWith, c.Closer = []string{"GPU0"}, []string{top.NICs[2].Name}
	p := top.Pairs[slices.IndexFunc(top.Pairs, func(p topo.Pair) bool { return p.GPU == c.GPU && p.NIC == c.NIC })]
	if len(p.Between) == 0 {
		t.Fatalf("%s-%s: no bridge between", p.GPU, p.NIC)
	}
	bridge := p.Between[len(p.Between)-1]
	top.Functions[bridge].AER = &pci.AER{Correctable: 3}
	r := bySubject(CheckGDRTopology(gdrNode(t), top))["GPU1"]
	for _, want := range []string{
		"shares " + nicDevices(top, []string{c.NIC}) + " with GPU0 while closer NICs idle: " + top.NICs[2].Device,
		"AER errors at " + bridge.String() + " since boot: 3 correctable, 0 non-fatal, 0 fatal",
		"beyond NCCL_NET_GDR_LEVEL PXB",
	} {
		if r.Status != Warn || !strings.Contains(r.Message, want) {
			t.Errorf("%s %q, want WARN with %q", r.Status, r.Message, want)
		}
	}
	// Sharing alone, with no closer NIC idle, is NCCL's plan: no warning.
	c.Closer = nil
	top.Functions[bridge].AER = &pci.AER{}
	if r := bySubject(CheckGDRTopology(gdrNode(t), top))["GPU1"]; strings.Contains(r.Message, "shares") || strings.Contains(r.Message, "AER") {
		t.Errorf("%s %q", r.Status, r.Message)
	}
}
