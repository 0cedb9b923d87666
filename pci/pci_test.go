package pci_test

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
)

// kernels are the captured trees of the "switch" layout (testdata/README.md).
var kernels = []string{"6.1", "6.12"}

func switchTree(t *testing.T, kernel string) sysfs.FS {
	t.Helper()
	fsys, err := sysfs.NewFS("testdata/switch-" + kernel)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

func addr(t *testing.T, s string) pci.Address {
	t.Helper()
	a, err := pci.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addrs(t *testing.T, ss ...string) []pci.Address {
	out := []pci.Address{}
	for _, s := range ss {
		out = append(out, addr(t, s))
	}
	return out
}

func TestParseAddress(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want pci.Address
		err  bool
	}{
		{in: "0000:3b:00.0", want: pci.Address{Bus: 0x3b}},
		{in: "0001:c1:1f.7", want: pci.Address{Domain: 1, Bus: 0xc1, Device: 0x1f, Function: 7}},
		{in: "10000:e1:00.1", want: pci.Address{Domain: 0x10000, Bus: 0xe1, Function: 1}}, // VMD domain
		{in: "3b:00.0", want: pci.Address{Bus: 0x3b}},                                     // lspci's short form
		{in: "0000:3b:20.0", err: true},                                                   // device > 31
		{in: "0000:3b:00.8", err: true},
		{in: "000:3b:00.0", err: true},
		{in: "0000:3b:00", err: true},
		{in: "pci0000:00", err: true},
		{in: "", err: true},
	} {
		got, err := pci.ParseAddress(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseAddress(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err == nil && tt.in != "3b:00.0" && got.String() != tt.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tt.in)
		}
	}
}

func TestParseSpeed(t *testing.T) {
	for in, want := range map[string]pci.Speed{
		"2.5 GT/s PCIe": pci.Gen1, "5.0 GT/s PCIe": pci.Gen2, "8.0 GT/s PCIe": pci.Gen3, "16.0 GT/s PCIe": pci.Gen4,
		"32.0 GT/s PCIe": pci.Gen5, "64.0 GT/s PCIe": pci.Gen6,
		"5 GT/s": pci.Gen2, "16 GT/s": pci.Gen4, "2.5 GT/s": pci.Gen1, // kernels up to 5.6
		"Unknown": 0, "Unknown speed": 0, "": 0, "-1 GT/s": 0,
	} {
		if got := pci.ParseSpeed(in); got != want {
			t.Errorf("ParseSpeed(%q) = %v, want %v", in, got, want)
		}
	}
	if s := pci.Gen4.String(); s != "16.0 GT/s" || pci.Gen4.Gen() != 4 || pci.Speed(0).String() != "unknown" {
		t.Errorf("Gen4: %q gen %d", s, pci.Gen4.Gen())
	}
}

// TestFunctions reads the switch layout (testdata/README.md) as the
// kernel showed it: the tree of bridges, what each function is, its link
// and, read as root, its PCI Express capability.
func TestFunctions(t *testing.T) {
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			fns, err := pci.Functions(switchTree(t, k))
			if err != nil {
				t.Fatal(err)
			}
			byAddr := map[pci.Address]pci.Function{}
			var order []pci.Address
			for _, f := range fns {
				byAddr[f.Address] = f
				order = append(order, f.Address)
			}
			if !slices.IsSortedFunc(order, pci.Address.Compare) {
				t.Errorf("not in address order: %v", order)
			}
			type want struct {
				class      pci.Class
				vendor     pci.ID
				host       string
				upstream   []pci.Address
				numa       int
				driver     string
				link       *pci.Link
				portType   pci.PortType
				noExpress  bool
				netdevs    int
				aer        bool
				configSize int
			}
			x1 := &pci.Link{Speed: pci.Gen1, Width: 1, MaxSpeed: pci.Gen1, MaxWidth: 1}
			for a, w := range map[string]want{
				// root port (QEMU's default capability 16 GT/s x32) above the
				// switch's upstream port, which trained the link at 2.5 x1
				"0000:00:02.0": {class: pci.ClassPCIBridge, vendor: 0x1b36, host: "pci0000:00", upstream: addrs(t), numa: -1, driver: "pcieport",
					link: &pci.Link{Speed: pci.Gen1, Width: 1, MaxSpeed: pci.Gen4, MaxWidth: 32}, portType: pci.PortRoot, aer: true, configSize: 4096},
				"0000:01:00.0": {class: pci.ClassPCIBridge, vendor: 0x104c, host: "pci0000:00", upstream: addrs(t, "0000:00:02.0"), numa: -1, driver: "pcieport",
					link: x1, portType: pci.PortUpstream, aer: true, configSize: 4096},
				// xio3130 downstream ports report no link capability
				"0000:02:00.0": {class: pci.ClassPCIBridge, vendor: 0x104c, host: "pci0000:00", upstream: addrs(t, "0000:01:00.0", "0000:00:02.0"), numa: -1, driver: "pcieport",
					link: &pci.Link{Speed: pci.Gen1, Width: 1}, portType: pci.PortDownstream, aer: true, configSize: 4096},
				"0000:03:00.0": {class: pci.ClassEthernet, vendor: 0x8086, host: "pci0000:00", upstream: addrs(t, "0000:02:00.0", "0000:01:00.0", "0000:00:02.0"), numa: -1, driver: "e1000e",
					link: x1, portType: pci.PortEndpoint, netdevs: 1, aer: true, configSize: 4096},
				"0000:05:00.0": {class: pci.ClassVGA, vendor: 0x1af4, host: "pci0000:00", upstream: addrs(t, "0000:02:02.0", "0000:01:00.0", "0000:00:02.0"), numa: -1, driver: "virtio-pci",
					link: x1, portType: pci.PortEndpoint, configSize: 4096},
				// virtio-net: its netdev is below virtioN, not in net/
				"0000:08:00.0": {class: pci.ClassEthernet, vendor: 0x1af4, host: "pci0000:00",
					upstream: addrs(t, "0000:07:00.0", "0000:06:00.0", "0000:02:03.0", "0000:01:00.0", "0000:00:02.0"), numa: -1, driver: "virtio-pci",
					link: x1, portType: pci.PortEndpoint, configSize: 4096},
				"0000:09:00.0": {class: pci.ClassEthernet, vendor: 0x8086, host: "pci0000:00", upstream: addrs(t, "0000:00:03.0"), numa: -1, driver: "e1000e",
					link: x1, portType: pci.PortEndpoint, netdevs: 1, aer: true, configSize: 4096},
				// conventional PCI: no link files, no PCI Express capability,
				// 256 bytes of config space
				"0000:0a:00.0": {class: pci.ClassVGA, vendor: 0x1234, host: "pci0000:00", upstream: addrs(t, "0000:00:04.0"), numa: -1,
					noExpress: true, configSize: 256},
				"0000:41:00.0": {class: pci.ClassEthernet, vendor: 0x8086, host: "pci0000:40", upstream: addrs(t, "0000:40:00.0"), numa: -1, driver: "e1000e",
					link: x1, portType: pci.PortEndpoint, netdevs: 1, aer: true, configSize: 4096},
				"0000:81:00.0": {class: pci.ClassEthernet, vendor: 0x8086, host: "pci0000:80", upstream: addrs(t, "0000:80:00.0"), numa: 1, driver: "e1000e",
					link: x1, portType: pci.PortEndpoint, netdevs: 1, aer: true, configSize: 4096},
				"0000:00:00.0": {class: pci.ClassHostBridge, vendor: 0x8086, host: "pci0000:00", upstream: addrs(t), numa: -1, noExpress: true, configSize: 256},
			} {
				f, ok := byAddr[addr(t, a)]
				if !ok {
					t.Errorf("%s missing", a)
					continue
				}
				if f.Class != w.class || f.Vendor != w.vendor || f.HostBridge != w.host || f.NUMANode != w.numa || f.Driver != w.driver {
					t.Errorf("%s: class %v vendor %v host %q numa %d driver %q; want %v %v %q %d %q", a, f.Class, f.Vendor, f.HostBridge, f.NUMANode, f.Driver,
						w.class, w.vendor, w.host, w.numa, w.driver)
				}
				if diff := cmp.Diff(w.upstream, append([]pci.Address{}, f.Upstream...)); diff != "" {
					t.Errorf("%s upstream (-want +got):\n%s", a, diff)
				}
				if diff := cmp.Diff(w.link, f.Link); diff != "" {
					t.Errorf("%s link (-want +got):\n%s", a, diff)
				}
				if f.Config == nil || f.Config.Size != w.configSize {
					t.Errorf("%s: config %+v, want %d bytes (captured as root)", a, f.Config, w.configSize)
					continue
				}
				switch ex := f.Config.Express; {
				case w.noExpress && ex != nil:
					t.Errorf("%s: PCI Express capability %+v on a conventional PCI function", a, ex)
				case !w.noExpress && ex == nil:
					t.Errorf("%s: no PCI Express capability", a)
				case ex != nil && (ex.PortType != w.portType || ex.MaxPayload != 128 || ex.MaxReadRequest != 128 || ex.RelaxedOrdering):
					// QEMU: MPS and MRRS 128 everywhere, Relaxed Ordering not emulated
					t.Errorf("%s: express %+v, want %v, MPS 128, MRRS 128, no RO", a, ex, w.portType)
				}
				if len(f.Netdevs) != w.netdevs {
					t.Errorf("%s: netdevs %v, want %d", a, f.Netdevs, w.netdevs)
				}
				if (f.AER != nil) != w.aer || (f.AER != nil && f.AER.Total() != 0) {
					t.Errorf("%s: AER %+v, want present %v and zero", a, f.AER, w.aer)
				}
				if f.IOMMUGroup != "" || f.Config.ACS != nil && f.Config.ACS.Control != 0 {
					t.Errorf("%s: IOMMU group %q, ACS %+v without an IOMMU", a, f.IOMMUGroup, f.Config.ACS)
				}
			}
			if vn := byAddr[addr(t, "0000:08:00.0")]; vn.Config == nil || vn.Config.ATS == nil || vn.Config.ATS.Enabled {
				t.Errorf("virtio-net with ats=on: config %+v, want an ATS capability, not enabled", vn.Config)
			}
			if rp := byAddr[addr(t, "0000:00:02.0")]; rp.Config == nil || rp.Config.ACS == nil ||
				rp.Config.ACS.Capability != pci.ACSSourceValidation|pci.ACSTranslationBlocking|pci.ACSRequestRedirect|pci.ACSCompletionRedirect|pci.ACSUpstreamForwarding|pci.ACSDirectTranslated {
				t.Errorf("root port ACS %+v, want QEMU's capability 0x5f", rp.Config)
			}
		})
	}
}

// TestIOMMU reads the switch layout with QEMU's IOMMU on: the kernel put
// every function in a translating group and turned on ACS Source
// Validation, Request and Completion Redirect and Upstream Forwarding in
// the root ports (QEMU's switch ports have no ACS).
func TestIOMMU(t *testing.T) {
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			fsys, err := sysfs.NewFS("testdata/switch-iommu-" + k)
			if err != nil {
				t.Fatal(err)
			}
			fns, err := pci.Functions(fsys)
			if err != nil {
				t.Fatal(err)
			}
			roots := 0
			for _, f := range fns {
				if f.IOMMUGroup == "" || (f.IOMMUType != "DMA-FQ" && f.IOMMUType != "DMA") {
					t.Errorf("%s: IOMMU group %q type %q, want a translating group", f.Address, f.IOMMUGroup, f.IOMMUType)
				}
				if f.Config == nil || f.Config.Express == nil || f.Config.Express.PortType != pci.PortRoot {
					continue
				}
				roots++
				const kernelDefault = pci.ACSSourceValidation | pci.ACSRequestRedirect | pci.ACSCompletionRedirect | pci.ACSUpstreamForwarding
				if f.Config.ACS == nil || f.Config.ACS.Control != kernelDefault || !f.Config.ACS.Control.Redirects() {
					t.Errorf("root port %s: ACS %+v, want control %v", f.Address, f.Config.ACS, kernelDefault)
				}
			}
			if roots != 5 {
				t.Errorf("%d root ports, want 5", roots)
			}
		})
	}
}

// TestUnprivileged reads the switch layout as uid 65534 read it: config
// space is the 64-byte header, so the capabilities are unknown, not an
// error, and everything else reads as for root.
func TestUnprivileged(t *testing.T) {
	fsys, err := sysfs.NewFS("testdata/switch-unprivileged-6.12")
	if err != nil {
		t.Fatal(err)
	}
	fns, err := pci.Functions(fsys)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := pci.Functions(switchTree(t, "6.12"))
	if len(fns) != len(root) || len(fns) == 0 {
		t.Fatalf("%d functions unprivileged, %d as root", len(fns), len(root))
	}
	for i, f := range fns {
		if f.Config != nil {
			t.Errorf("%s: config %+v from a 64-byte read", f.Address, f.Config)
		}
		r := root[i]
		r.Config = nil
		if diff := cmp.Diff(r, f); diff != "" {
			t.Errorf("%s differs from root's view beyond config (-root +unprivileged):\n%s", f.Address, diff)
		}
	}
}

func TestACSFlagsString(t *testing.T) {
	f := pci.ACSSourceValidation | pci.ACSRequestRedirect | pci.ACSCompletionRedirect | pci.ACSUpstreamForwarding // 0x1d
	if got, want := f.String(), "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"; got != want {
		t.Errorf("%#x: %q, want lspci's %q", uint16(f), got, want)
	}
	if pci.ACSUpstreamForwarding.Redirects() || !pci.ACSCompletionRedirect.Redirects() {
		t.Error("Redirects")
	}
}

// TestRDMADevice maps RDMA devices to their PCI function: rxe through its
// netdev (the switch layout, on e1000e and virtio-net NICs), rxe on a veth
// to no function (the rxe fixture of package sysfs).
func TestRDMADevice(t *testing.T) {
	fsys := switchTree(t, "6.12")
	for dev, fn := range map[string]string{
		"rxe0": "0000:03:00.0", "rxe1": "0000:04:00.0", "rxe2": "0000:09:00.0",
		"rxe3": "0000:81:00.0", "rxe4": "0000:41:00.0", "rxe5": "0000:08:00.0",
	} {
		a, err := pci.RDMADevice(fsys, dev)
		if err != nil {
			t.Fatal(err)
		}
		n, err := pci.Netdev(fsys, a.Netdev)
		if err != nil {
			t.Fatal(err)
		}
		want := addr(t, fn)
		bus, name, driver := "pci", fn, "e1000e"
		if fn == "0000:08:00.0" { // virtio-net: the netdev sits on virtioN below the function
			bus, name, driver = "virtio", n.Name, "virtio_net"
		}
		if a.Function == nil || *a.Function != want || a.Bus != bus || a.Name != name || a.Driver != driver || a.Netdev == "" ||
			n.Function == nil || *n.Function != want || n.Bus != bus || (bus == "virtio") != strings.HasPrefix(n.Name, "virtio") {
			t.Errorf("%s: %+v (netdev %+v), want function %s through its netdev", dev, a, n, fn)
		}
	}
	if _, err := pci.RDMADevice(fsys, "mlx5_0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing device: %v, want fs.ErrNotExist", err)
	}
	var inv *sysfs.InvalidNameError
	if _, err := pci.RDMADevice(fsys, "../net"); !errors.As(err, &inv) {
		t.Errorf("bad name: %v", err)
	}

	veth, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	a, err := pci.RDMADevice(veth, "rxe0")
	if err != nil || a != (pci.Attachment{Netdev: "veth0"}) {
		t.Errorf("rxe0 on veth0: %+v, %v; want only the netdev", a, err)
	}
}

// TestResolve follows links as realpath does and stops at a loop.
func TestResolve(t *testing.T) {
	m := fstest.MapFS{
		"sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/class": {Data: []byte("0x020000\n")},
		"sys/bus/pci/devices/0000:01:00.0":                       {Data: []byte("../../../devices/pci0000:00/0000:00:02.0/0000:01:00.0"), Mode: fs.ModeSymlink},
		"sys/loop/a":                                             {Data: []byte("b"), Mode: fs.ModeSymlink},
		"sys/loop/b":                                             {Data: []byte("a"), Mode: fs.ModeSymlink},
		"sys/up":                                                 {Data: []byte("../../../../sys/devices"), Mode: fs.ModeSymlink},
	}
	got, err := pci.Resolve(m, "sys/bus/pci/devices/0000:01:00.0")
	if want := "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0"; err != nil || got != want {
		t.Errorf("Resolve = %q, %v; want %q", got, err, want)
	}
	if got, err := pci.Resolve(m, "sys/up/pci0000:00"); err != nil || got != "sys/devices/pci0000:00" {
		t.Errorf("a link above the root: %q, %v; want it clamped at the root", got, err)
	}
	if _, err := pci.Resolve(m, "sys/loop/a"); err == nil {
		t.Error("a loop resolved")
	}
	f, err := pci.ReadFunction(m, addr(t, "0000:01:00.0"))
	if err != nil || f.Class != pci.ClassEthernet || f.NUMANode != -1 || f.Link != nil || f.Config != nil || f.AER != nil {
		t.Errorf("a function with nothing but its class: %+v, %v", f, err)
	}
}
