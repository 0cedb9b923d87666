package topo_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/topo"
)

// The trees are captured from QEMU guests (../pci/testdata/README.md).
func tree(t testing.TB, name string) sysfs.FS {
	t.Helper()
	fsys, err := sysfs.NewFS("../pci/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

func addr(t testing.TB, s string) pci.Address {
	t.Helper()
	a, err := pci.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// stand-ins for GPUs in the switch layout: virtio-vga under the switch,
// VGA on a root port of its own.
func switchGPUs(t testing.TB) []pci.Address {
	return []pci.Address{addr(t, "0000:05:00.0"), addr(t, "0000:0a:00.0")}
}

// nicAt returns the NIC at function fn.
func nicAt(t *testing.T, top *topo.Topology, fn string) (int, topo.NIC) {
	t.Helper()
	for i, n := range top.NICs {
		if n.Function != nil && n.Function.Address.String() == fn {
			return i, n
		}
	}
	t.Fatalf("no NIC at %s", fn)
	return 0, topo.NIC{}
}

// switchClasses are the classes the layout makes, from each stand-in GPU
// to the NIC at each function.
var switchClasses = map[string]map[string]topo.PathType{
	"0000:05:00.0": {"0000:03:00.0": topo.PathPIX, "0000:04:00.0": topo.PathPIX, "0000:08:00.0": topo.PathPXB,
		"0000:09:00.0": topo.PathPHB, "0000:41:00.0": topo.PathNODE, "0000:81:00.0": topo.PathSYS},
	"0000:0a:00.0": {"0000:03:00.0": topo.PathPHB, "0000:04:00.0": topo.PathPHB, "0000:08:00.0": topo.PathPHB,
		"0000:09:00.0": topo.PathPHB, "0000:41:00.0": topo.PathNODE, "0000:81:00.0": topo.PathSYS},
}

// TestSwitch: every class of nvidia-smi topo -m in one captured layout,
// with NCCL's name for each, its choice of NIC per GPU and GDR decision,
// the links (none degraded: QEMU's endpoints are 2.5 GT/s x1 and train at
// that), and a QEMU guest detected as virtual.
func TestSwitch(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			top, err := topo.Read(tree(t, "switch-"+k), topo.Options{GPUs: switchGPUs(t), NodeGDR: new(true)})
			if err != nil {
				t.Fatal(err)
			}
			if len(top.GPUs) != 2 || len(top.NICs) != 6 || len(top.Pairs) != 12 || len(top.Matrix) != 8 {
				t.Fatalf("%d GPUs, %d NICs, %d pairs, %dx matrix", len(top.GPUs), len(top.NICs), len(top.Pairs), len(top.Matrix))
			}
			for gi, g := range top.GPUs {
				if !g.Named || g.Vendor != "" || g.DMABuf != nil || g.Driver != nil {
					t.Errorf("%s: %+v, want a named stand-in without a vendor", g.Name, g)
				}
				for fn, want := range switchClasses[g.Function.Address.String()] {
					ni, n := nicAt(t, top, fn)
					if got := top.Matrix[gi][len(top.GPUs)+ni]; got != want {
						t.Errorf("%s to %s (%s): %v, want %v", g.Name, n.Device, fn, got, want)
					}
					if !n.Soft || len(n.Netdevs) != 1 {
						t.Errorf("%s: soft %v netdevs %v", n.Device, n.Soft, n.Netdevs)
					}
					p := top.Pairs[slices.IndexFunc(top.Pairs, func(p topo.Pair) bool { return p.GPU == g.Name && p.NIC == n.Name })]
					wantNCCL := want.NCCL().String()
					if p.NCCLPath != wantNCCL || p.GDR.PathAllows != (want <= topo.PathPXB) {
						t.Errorf("%s-%s: NCCL %s GDR %+v, want %s", g.Name, n.Device, p.NCCLPath, p.GDR, wantNCCL)
					}
					// NCCL's model: x1 at 2.5 GT/s everywhere, 1*15/80 GB/s
					if p.BandwidthGBps != 0.1875 {
						t.Errorf("%s-%s: %v GB/s", g.Name, n.Device, p.BandwidthGBps)
					}
					if len(p.ACSRedirect) > 0 || len(p.ACSUnknown) > 0 {
						t.Errorf("%s-%s: ACS %v / unknown %v without an IOMMU, read as root", g.Name, n.Device, p.ACSRedirect, p.ACSUnknown)
					}
				}
			}
			for i := range top.Matrix {
				for j := range top.Matrix {
					if top.Matrix[i][j] != top.Matrix[j][i] || (i == j) != (top.Matrix[i][j] == topo.PathSelf) {
						t.Errorf("matrix[%d][%d] = %v, [%d][%d] = %v", i, j, top.Matrix[i][j], j, i, top.Matrix[j][i])
					}
				}
			}
			// NICs among themselves: the two on the switch are PIX.
			a, _ := nicAt(t, top, "0000:03:00.0")
			b, _ := nicAt(t, top, "0000:04:00.0")
			if got := top.Matrix[2+a][2+b]; got != topo.PathPIX {
				t.Errorf("the two NICs on the switch: %v", got)
			}
			for _, h := range slices.Concat(top.GPUs[0].Hops, top.NICs[0].Hops) {
				if h.State != topo.LinkOK || h.Speed != pci.Gen1 || h.Width != 1 || h.CapableSpeed != pci.Gen1 || h.CapableWidth != 1 {
					t.Errorf("hop %+v, want ok at 2.5 GT/s x1", h)
				}
			}
			if vga := top.GPUs[1].Hops; len(vga) != 1 || vga[0].State != topo.LinkUnknown {
				t.Errorf("conventional PCI VGA hops %+v, want one of unknown state", vga)
			}
			c0, c1 := top.Choices[0], top.Choices[1]
			_, n0 := nicAt(t, top, "0000:03:00.0")
			_, n1 := nicAt(t, top, "0000:04:00.0")
			if c0.Path != topo.PathPIX || (c0.NIC != n0.Name && c0.NIC != n1.Name) || !slices.Equal(c0.Local, sorted(n0.Name, n1.Name)) ||
				c0.GDR.Used == nil || !*c0.GDR.Used {
				t.Errorf("GPU0 choice %+v, want a PIX NIC of %s %s with GDR", c0, n0.Name, n1.Name)
			}
			if c1.Path.NCCL() != topo.PathPHB || len(c1.Local) != 5 || c1.GDR.PathAllows || c1.GDR.Used == nil || *c1.GDR.Used {
				t.Errorf("GPU1 choice %+v, want a PHB NIC among 5 (NODE is PHB to NCCL; SYS is not) without GDR", c1)
			}
			if !top.Virtual.Likely || len(top.Virtual.Remedies) == 0 || !strings.Contains(strings.Join(top.Virtual.Signals, "\n"), "hypervisor flag") {
				t.Errorf("virtual %+v", top.Virtual)
			}
		})
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// TestOptions: the GDR level, the node's ability and the platform change
// the decisions, not the classes.
func TestOptions(t *testing.T) {
	fsys := tree(t, "switch-6.12")
	top, err := topo.Read(fsys, topo.Options{GPUs: switchGPUs(t), GDRLevel: topo.PathSYS, Platform: topo.PlatformBareMetal})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top.Pairs {
		if !p.GDR.PathAllows || p.GDR.Used != nil {
			t.Errorf("level SYS, node unchecked: %s-%s %+v", p.GPU, p.NIC, p.GDR)
		}
	}
	if top.Virtual.Likely || top.Virtual.Remedies != nil {
		t.Errorf("bare metal as asked: %+v", top.Virtual)
	}
	top, err = topo.Read(fsys, topo.Options{GPUs: switchGPUs(t), GDRLevel: topo.PathSelf, NodeGDR: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top.Pairs {
		if p.GDR.PathAllows || p.GDR.Used == nil || *p.GDR.Used {
			t.Errorf("level LOC: %s-%s %+v", p.GPU, p.NIC, p.GDR)
		}
	}
	top, _ = topo.Read(fsys, topo.Options{GPUs: switchGPUs(t)[:1], NodeGDR: new(false)})
	if c := top.Choices[0]; c.GDR.Used == nil || *c.GDR.Used || !strings.Contains(c.GDR.Reason, "cannot register GPU memory") {
		t.Errorf("node without GDR: %+v", c.GDR)
	}
	// No stand-in named: QEMU's displays are neither NVIDIA's nor AMD's.
	top, _ = topo.Read(fsys, topo.Options{})
	if len(top.GPUs) != 0 || len(top.Choices) != 0 || len(top.Pairs) != 0 || len(top.NICs) != 6 {
		t.Errorf("unnamed: %d GPUs %d choices %d pairs %d NICs", len(top.GPUs), len(top.Choices), len(top.Pairs), len(top.NICs))
	}
	var nf *topo.NotFoundError
	if _, err := topo.Read(fsys, topo.Options{GPUs: []pci.Address{addr(t, "0000:3b:00.0")}}); err == nil || !asNotFound(err, &nf) {
		t.Errorf("a missing gpu: %v", err)
	}
}

func asNotFound(err error, nf **topo.NotFoundError) bool {
	e, ok := err.(*topo.NotFoundError)
	*nf = e
	return ok
}

func TestParseGDRLevel(t *testing.T) {
	for in, want := range map[string]topo.PathType{"LOC": topo.PathSelf, "pix": topo.PathPIX, "PXB": topo.PathPXB, "P2C": topo.PathPXB,
		"PHB": topo.PathPHB, "SYS": topo.PathSYS, "0": topo.PathSelf, "2": topo.PathPXB, "4": topo.PathSYS} {
		if got, err := topo.ParseGDRLevel(in); err != nil || got != want {
			t.Errorf("ParseGDRLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "NODE", "5", "x"} {
		if _, err := topo.ParseGDRLevel(bad); err == nil {
			t.Errorf("ParseGDRLevel(%q) accepted", bad)
		}
	}
}

// TestIOMMU: with the kernel's ACS on in the root ports, the pairs whose
// way passes a root port below where they meet are redirected there; the
// pairs under one switch are not (QEMU's switch ports have no ACS).
func TestIOMMU(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			top, err := topo.Read(tree(t, "switch-iommu-"+k), topo.Options{GPUs: switchGPUs(t)})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range top.Pairs {
				g := top.GPUs[slices.IndexFunc(top.GPUs, func(g topo.GPU) bool { return g.Name == p.GPU })]
				want := p.Path.NCCL() >= topo.PathPHB
				if got := len(p.ACSRedirect) > 0; got != want {
					t.Errorf("%s (%s)-%s %v: ACS redirect at %v", p.GPU, g.Function.Address, p.NIC, p.Path, p.ACSRedirect)
				}
				for _, a := range p.ACSRedirect {
					if f := top.Functions[a]; f.Config.Express.PortType != pci.PortRoot {
						t.Errorf("redirect at %s, a %v", a, f.Config.Express.PortType)
					}
				}
			}
			for _, g := range top.GPUs {
				if g.Function.IOMMUType != "DMA-FQ" && g.Function.IOMMUType != "DMA" {
					t.Errorf("%s: IOMMU type %q", g.Name, g.Function.IOMMUType)
				}
			}
		})
	}
}

// TestUnprivileged: without config space ACS is unknown, not clear.
func TestUnprivileged(t *testing.T) {
	top, err := topo.Read(tree(t, "switch-unprivileged-6.12"), topo.Options{GPUs: switchGPUs(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top.Pairs {
		if len(p.ACSRedirect) != 0 || len(p.ACSUnknown) != len(p.Between) || len(p.Between) == 0 {
			t.Errorf("%s-%s: redirect %v unknown %v between %v", p.GPU, p.NIC, p.ACSRedirect, p.ACSUnknown, p.Between)
		}
	}
}

// TestGPUOnly: a display function on the root bus and no NIC, the shape
// of a GPU-only cloud VM: no pairs, no choice of NIC, and the signs of a
// virtual topology.
func TestGPUOnly(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			gpu := addr(t, "0000:00:06.0")
			top, err := topo.Read(tree(t, "gpu-only-"+k), topo.Options{GPUs: []pci.Address{gpu}})
			if err != nil {
				t.Fatal(err)
			}
			if len(top.GPUs) != 1 || len(top.NICs) != 0 || len(top.Pairs) != 0 || len(top.Choices) != 1 || top.Choices[0].NIC != "" {
				t.Fatalf("GPUs %d NICs %d pairs %d choices %+v", len(top.GPUs), len(top.NICs), len(top.Pairs), top.Choices)
			}
			g := top.GPUs[0]
			if len(g.Function.Upstream) != 0 || g.Function.HostBridge != "pci0000:00" {
				t.Errorf("GPU at %v under %q, want the root bus", g.Function.Upstream, g.Function.HostBridge)
			}
			signals := strings.Join(top.Virtual.Signals, "\n")
			if !top.Virtual.Likely || !strings.Contains(signals, "root bus") || !strings.Contains(signals, "numa_node -1") {
				t.Errorf("virtual %+v", top.Virtual)
			}
		})
	}
}

// TestNICOnly: a NIC and no GPU.
func TestNICOnly(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			top, err := topo.Read(tree(t, "nic-only-"+k), topo.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(top.GPUs) != 0 || len(top.NICs) != 1 || len(top.Pairs) != 0 || len(top.Choices) != 0 {
				t.Fatalf("GPUs %d NICs %+v pairs %d choices %d", len(top.GPUs), top.NICs, len(top.Pairs), len(top.Choices))
			}
			n := top.NICs[0]
			if n.Function == nil || n.Function.Address != addr(t, "0000:01:00.0") || len(n.Hops) != 1 || n.Hops[0].State != topo.LinkOK ||
				*n.Hops[0].Port != addr(t, "0000:00:02.0") {
				t.Errorf("NIC %+v", n)
			}
		})
	}
}
