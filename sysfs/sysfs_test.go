package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
)

// hca is a node with an mlx5 RoCE port (mlx5_0), a RoCE port that is down
// (mlx5_1), an InfiniBand HDR port (mlx5_2) and a device that was removed
// after being listed (mlx5_3); see testdata/README.md.
const hcaRoot = "testdata/hca"

func mustFS(t testing.TB, root string) FS {
	t.Helper()
	f, err := NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewFS(t *testing.T) {
	f, err := NewFS("")
	if err != nil {
		t.Fatal(err)
	}
	if f.Root() != "/" {
		t.Errorf("NewFS(\"\").Root() = %q, want /", f.Root())
	}
	if _, err := NewFS(filepath.Join(hcaRoot, "sys/class/infiniband_verbs/abi_version")); err == nil {
		t.Error("NewFS(a regular file) succeeded, want an error")
	}
	if _, err := NewFS(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NewFS(missing) = %v, want ErrNotExist", err)
	}
}

func TestFSIsAnIOFS(t *testing.T) {
	f := mustFS(t, hcaRoot)
	// The whole tree has a dangling link (mlx5_3), which TestFS rejects.
	ports, err := fs.Sub(f, "sys/devices/pci0000:3a/0000:3a:00.0/0000:5e:00.0/infiniband/mlx5_2/ports")
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(ports, "1/rate", "1/gids/0", "1/pkeys/7"); err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(f, "sys/class/infiniband/mlx5_2/ports/1/rate")
	if err != nil || string(data) != "200 Gb/sec (4X HDR)\n" {
		t.Errorf("fs.ReadFile(rate) = %q, %v", data, err)
	}
	if _, err := f.Open("/sys"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open(\"/sys\") = %v, want ErrInvalid (io/fs names are relative)", err)
	}
	if _, err := fs.ReadFile(f, "proc/kallsyms"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	} else if !strings.HasPrefix(err.Error(), "open proc/kallsyms:") {
		t.Errorf("error %q names the host path, want the FS name", err)
	}
}

func TestReadFileReadsPastOnePage(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("ffffffffc0000000 T some_kernel_symbol\n", 1000)
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/kallsyms"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := mustFS(t, root).ReadFile("proc/kallsyms")
	if err != nil || len(data) != len(big) {
		t.Errorf("ReadFile = %d bytes, %v; want %d", len(data), err, len(big))
	}
}

func TestReadAttrIsOneBoundedRead(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/big"), []byte(strings.Repeat("x", 3*maxAttrSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := mustFS(t, root).ReadAttr("big")
	if err != nil || len(s) != maxAttrSize {
		t.Errorf("ReadAttr = %d bytes, %v; want one read of %d", len(s), err, maxAttrSize)
	}
}

func TestDevices(t *testing.T) {
	f := mustFS(t, hcaRoot)
	names, err := f.DeviceNames()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}; !cmp.Equal(names, want) {
		t.Errorf("DeviceNames() = %v, want %v", names, want)
	}
	devices, err := f.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{
		Name: "mlx5_0", NodeType: ib.NodeCA, NodeGUID: 0x0c42a10300123456, SysImageGUID: 0x0c42a10300123456,
		FWVersion: "22.39.1002", NodeDesc: "node01 mlx5_0", HCAType: "MT4125", BoardID: "MT_0000000359",
		Driver: "mlx5_core", Ports: []uint32{1},
	}, {
		Name: "mlx5_1", NodeType: ib.NodeCA, NodeGUID: 0x0c42a10300123457, SysImageGUID: 0x0c42a10300123456,
		FWVersion: "22.39.1002", NodeDesc: "node01 mlx5_1", HCAType: "MT4125", BoardID: "MT_0000000359",
		Driver: "mlx5_core", Ports: []uint32{1},
	}, {
		Name: "mlx5_2", NodeType: ib.NodeCA, NodeGUID: 0x0c42a10300abcdef, SysImageGUID: 0x0c42a10300abcdef,
		FWVersion: "20.39.1002", NodeDesc: "node01 mlx5_2", HCAType: "MT4123", BoardID: "MT_0000000223",
		Driver: "mlx5_core", Ports: []uint32{1},
	}} // mlx5_3 vanished after being listed
	if diff := cmp.Diff(want, devices); diff != "" {
		t.Errorf("Devices() mismatch (-want +got):\n%s", diff)
	}
	if _, err := f.Device("mlx5_3"); !IsGone(err) {
		t.Errorf("Device(mlx5_3) = %v, want an error for which IsGone is true", err)
	}
}

func TestPort(t *testing.T) {
	f := mustFS(t, hcaRoot)
	tests := []struct {
		dev  string
		want Port
	}{{
		dev: "mlx5_0",
		want: Port{Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
			Rate: Rate{DeciGbps: 1000, Lanes: 4, Speed: "EDR"}, LinkLayer: ib.LinkLayerEthernet, CapMask: 0x04010000},
	}, {
		dev: "mlx5_1",
		want: Port{Port: 1, State: ib.PortDown, PhysState: ib.PhysDisabled,
			Rate: Rate{DeciGbps: 400, Lanes: 4, Speed: "QDR"}, LinkLayer: ib.LinkLayerEthernet, CapMask: 0x04010000},
	}, {
		dev: "mlx5_2",
		want: Port{Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
			Rate: Rate{DeciGbps: 2000, Lanes: 4, Speed: "HDR"}, LinkLayer: ib.LinkLayerInfiniBand,
			LID: 5, SMLID: 1, CapMask: 0xa651e848},
	}}
	for _, tt := range tests {
		t.Run(tt.dev, func(t *testing.T) {
			got, err := f.Port(tt.dev, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Port(%s, 1) mismatch (-want +got):\n%s", tt.dev, diff)
			}
		})
	}
	if _, err := f.Port("mlx5_0", 2); !IsGone(err) {
		t.Errorf("Port(mlx5_0, 2) = %v, want an error for which IsGone is true", err)
	}
}

func TestPortRateEINVAL(t *testing.T) {
	f := mustFS(t, hcaRoot)
	f.readHook = failOn(unix.EINVAL, "/ports/1/rate")
	p, err := f.Port("mlx5_0", 1)
	if err != nil {
		t.Fatalf("Port with an unprintable rate: %v, want the other attributes", err)
	}
	if p.Rate != (Rate{}) || p.State != ib.PortActive {
		t.Errorf("Port = %+v, want a zero Rate and the rest read", p)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
	}{
		{"100 Gb/sec (4X EDR)", Rate{1000, 4, "EDR"}},
		{"2.5 Gb/sec (1X SDR)", Rate{25, 1, "SDR"}},
		{"10 Gb/sec (4X)", Rate{100, 4, ""}}, // SDR before the speed name was printed
		{"40 Gb/sec (4X FDR10)", Rate{400, 4, "FDR10"}},
		{"56 Gb/sec (4X FDR)", Rate{560, 4, "FDR"}},
		{"400 Gb/sec (4X NDR)", Rate{4000, 4, "NDR"}},
		{"800 Gb/sec (4X XDR)", Rate{8000, 4, "XDR"}},
		{"1600 Gb/sec (8X XDR)", Rate{16000, 8, "XDR"}},
		{"50 Gb/sec (2X EDR)", Rate{500, 2, "EDR"}},
		{"120 Gb/sec (12X QDR)", Rate{1200, 12, "QDR"}},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("ParseRate(%q).String() = %q", tt.in, got.String())
		}
	}
	for _, bad := range []string{"", "100", "100 Gb/sec", "100 Gb/sec (4 EDR)", "x Gb/sec (4X EDR)",
		"2.7 Gb/sec (1X SDR)", "100 Gb/sec (0X EDR)", "100 Gb/sec (4X EDR"} {
		if r, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) = %+v, want an error", bad, r)
		}
	}
}

func TestGUID(t *testing.T) {
	guid, err := ParseGUID("0c42:a103:0012:3456")
	if err != nil || guid != 0x0c42a10300123456 {
		t.Errorf("ParseGUID = %#x, %v", guid, err)
	}
	if s := nldev.FormatGUID(guid); s != "0c42:a103:0012:3456" {
		t.Errorf("nldev.FormatGUID(ParseGUID(s)) = %q, want s", s)
	}
	for _, bad := range []string{"", "0c42:a103:0012", "0c42:a103:0012:34567", "0c42:a103:0012:345g", "0c42a10300123456"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded, want an error", bad)
		}
	}
}

func TestGIDAttrs(t *testing.T) {
	f := mustFS(t, hcaRoot)
	const ll = "fe80:0000:0000:0000:0e42:a1ff:fe12:3456"
	const v4 = "0000:0000:0000:0000:0000:ffff:c0a8:0a01"
	const v6 = "2001:0db8:0010:0000:0000:0000:0000:0001"
	const vlan4 = "0000:0000:0000:0000:0000:ffff:0a64:0001"
	want := []GIDAttr{
		{0, ll, GIDTypeIBRoCEv1, "ens1f0np0"},
		{1, ll, GIDTypeRoCEv2, "ens1f0np0"},
		{2, v4, GIDTypeIBRoCEv1, "ens1f0np0"},
		{3, v4, GIDTypeRoCEv2, "ens1f0np0"},
		{4, ZeroGID, "", ""},
		{5, ZeroGID, "", ""},
		{6, v6, GIDTypeIBRoCEv1, "ens1f0np0"},
		{7, v6, GIDTypeRoCEv2, "ens1f0np0"},
		{8, ll, GIDTypeIBRoCEv1, "ens1f0np0.100"},
		{9, ll, GIDTypeRoCEv2, "ens1f0np0.100"},
		{10, vlan4, GIDTypeIBRoCEv1, "ens1f0np0.100"},
		{11, vlan4, GIDTypeRoCEv2, "ens1f0np0.100"},
		{12, ZeroGID, "", ""},
		{13, ZeroGID, "", ""},
		{14, ZeroGID, "", ""},
		{15, ZeroGID, "", ""},
	}
	got, err := f.GIDAttrs("mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GIDAttrs(mlx5_0, 1) mismatch (-want +got):\n%s", diff)
	}

	// InfiniBand: ndevs/N fails for every GID.
	ib, err := f.GIDAttrs("mlx5_2", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ib) != 8 || ib[0] != (GIDAttr{0, "fe80:0000:0000:0000:0c42:a103:00ab:cdef", GIDTypeIBRoCEv1, ""}) {
		t.Errorf("GIDAttrs(mlx5_2, 1) = %v", ib)
	}

	one, err := f.GIDAttr("mlx5_0", 1, 11)
	if err != nil || one != want[11] {
		t.Errorf("GIDAttr(mlx5_0, 1, 11) = %+v, %v; want %+v", one, err, want[11])
	}
}

// failOn returns a read hook failing reads of names containing any of
// substrings with errno.
func failOn(errno unix.Errno, substrings ...string) func(string) error {
	return func(name string) error {
		for _, s := range substrings {
			if strings.Contains(name, s) {
				return errno
			}
		}
		return nil
	}
}

func TestGIDAttrsKernelErrors(t *testing.T) {
	f := mustFS(t, hcaRoot)

	// EINVAL from gid_attrs: the entry has no attributes (e.g. it belongs
	// to another network namespace) - not an error.
	f.readHook = failOn(unix.EINVAL, "gid_attrs/types/3", "gid_attrs/ndevs/1")
	got, err := f.GIDAttrs("mlx5_0", 1)
	if err != nil {
		t.Fatalf("GIDAttrs with EINVAL entries: %v", err)
	}
	if got[3].Type != "" || got[3].Netdev != "" || got[3].GID == ZeroGID {
		t.Errorf("slot 3 = %+v, want its GID without type or netdev", got[3])
	}
	if got[1].Type != GIDTypeRoCEv2 || got[1].Netdev != "" {
		t.Errorf("slot 1 = %+v, want a type and no netdev", got[1])
	}

	// ENODEV or ENOENT midway: the device is being removed.
	for _, errno := range []unix.Errno{unix.ENODEV, unix.ENOENT} {
		f.readHook = failOn(errno, "gids/7")
		if got, err := f.GIDAttrs("mlx5_0", 1); !IsGone(err) || got != nil {
			t.Errorf("GIDAttrs with %v at slot 7 = %v, %v; want nil and an error for which IsGone is true", errno, got, err)
		}
	}
	// Any other error is reported, not skipped.
	f.readHook = failOn(unix.EIO, "gid_attrs/types/2")
	if _, err := f.GIDAttrs("mlx5_0", 1); !errors.Is(err, unix.EIO) || IsGone(err) {
		t.Errorf("GIDAttrs with EIO = %v, want EIO", err)
	}
}

func TestDevicesSkipADeviceThatVanishesMidRead(t *testing.T) {
	f := mustFS(t, hcaRoot)
	for _, file := range []string{"node_type", "fw_ver", "hca_type"} {
		f.readHook = failOn(unix.ENODEV, "mlx5_1/"+file)
		devices, err := f.Devices()
		if err != nil {
			t.Fatalf("%s fails: Devices() = %v", file, err)
		}
		var names []string
		for _, d := range devices {
			names = append(names, d.Name)
		}
		if want := []string{"mlx5_0", "mlx5_2"}; !cmp.Equal(names, want) {
			t.Errorf("%s fails: Devices() = %v, want %v", file, names, want)
		}
	}
	f.readHook = failOn(unix.EACCES, "mlx5_1/node_type")
	if _, err := f.Devices(); !errors.Is(err, unix.EACCES) {
		t.Errorf("Devices() with EACCES = %v, want the error", err)
	}
}

func TestPKeys(t *testing.T) {
	f := mustFS(t, hcaRoot)
	got, err := f.PKeys("mlx5_2", 1)
	if want := []uint16{0xffff, 0x7fff, 0, 0, 0, 0, 0, 0}; err != nil || !cmp.Equal(got, want) {
		t.Errorf("PKeys(mlx5_2, 1) = %#x, %v; want %#x", got, err, want)
	}
}

func TestVerbsDevices(t *testing.T) {
	f := mustFS(t, hcaRoot)
	abi, err := f.VerbsABIVersion()
	if err != nil || abi != 6 {
		t.Errorf("VerbsABIVersion() = %d, %v; want 6", abi, err)
	}
	got, err := f.VerbsDevices()
	if err != nil {
		t.Fatal(err)
	}
	want := []VerbsDevice{
		{Name: "uverbs0", Device: "mlx5_0", ABIVersion: 1, Major: 231, Minor: 192},
		{Name: "uverbs1", Device: "mlx5_1", ABIVersion: 1, Major: 231, Minor: 193},
		{Name: "uverbs2", Device: "mlx5_2", ABIVersion: 1, Major: 231, Minor: 194},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VerbsDevices() mismatch (-want +got):\n%s", diff)
	}
	d, err := f.VerbsDeviceFor("mlx5_2")
	if err != nil || d != want[2] {
		t.Errorf("VerbsDeviceFor(mlx5_2) = %+v, %v", d, err)
	}
	if _, err := f.VerbsDeviceFor("mlx5_3"); !errors.Is(err, ErrNoVerbsDevice) {
		t.Errorf("VerbsDeviceFor(mlx5_3) = %v, want ErrNoVerbsDevice", err)
	}
	f.readHook = failOn(unix.ENODEV, "uverbs1/ibdev") // disassociated by hot unplug
	if got, err := f.VerbsDevices(); err != nil || len(got) != 2 {
		t.Errorf("VerbsDevices() with uverbs1 disassociated = %v, %v; want the other two", got, err)
	}
}

func TestVerbsClassAbsent(t *testing.T) {
	f := mustFS(t, t.TempDir())
	if got, err := f.VerbsDevices(); err != nil || len(got) != 0 {
		t.Errorf("VerbsDevices() without ib_uverbs = %v, %v; want none", got, err)
	}
	if got, err := f.DeviceNames(); err != nil || len(got) != 0 {
		t.Errorf("DeviceNames() without ib_core = %v, %v; want none", got, err)
	}
}

func TestNetdev(t *testing.T) {
	f := mustFS(t, hcaRoot)
	got, err := f.Netdev("ens1f0np0.100")
	want := Netdev{Name: "ens1f0np0.100", Index: 9, MTU: 1500, OperState: "up", Address: "0c:42:a1:12:34:56"}
	if err != nil || got != want {
		t.Errorf("Netdev(ens1f0np0.100) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := f.NetdevMTU("eth9"); !IsGone(err) {
		t.Errorf("NetdevMTU(eth9) = %v, want an error for which IsGone is true", err)
	}
}

// The captured rxe devices: software devices with a parent netdev and no
// device link, an empty fw_ver, 1024 GID slots, only RoCE v2 GIDs.
func TestCapturedRxe(t *testing.T) {
	for _, kernel := range []string{"6.1", "6.12"} {
		t.Run(kernel, func(t *testing.T) {
			f := mustFS(t, "testdata/rxe-"+kernel)
			devices, err := f.Devices()
			if err != nil {
				t.Fatal(err)
			}
			if len(devices) != 2 {
				t.Fatalf("Devices() = %+v, want rxe0 and rxe1", devices)
			}
			for i, d := range devices {
				name, netdev := "rxe"+strconv.Itoa(i), "veth"+strconv.Itoa(i)
				if d.Name != name || d.Driver != "rxe" || d.Netdev != netdev || d.FWVersion != "" || d.NodeDesc != "rxe" ||
					d.NodeType != ib.NodeCA || d.NodeGUID == 0 || !cmp.Equal(d.Ports, []uint32{1}) {
					t.Errorf("Devices()[%d] = %+v", i, d)
				}
				p, err := f.Port(name, 1)
				want := Port{Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
					Rate: Rate{DeciGbps: 100, Lanes: 1, Speed: "FDR10"}, LinkLayer: ib.LinkLayerEthernet, CapMask: 0x10000}
				if err != nil || p != want {
					t.Errorf("Port(%s, 1) = %+v, %v; want %+v", name, p, err, want)
				}
				gids, err := f.GIDAttrs(name, 1)
				if err != nil {
					t.Fatal(err)
				}
				used := 0
				for _, g := range gids {
					if g.GID != ZeroGID {
						used++
						if g.Type != GIDTypeRoCEv2 || g.Netdev != netdev {
							t.Errorf("%s GID %+v, want RoCE v2 on %s", name, g, netdev)
						}
					}
				}
				// rxe0: link-local, 10.9.0.1, fd00:9::1; rxe1: link-local, 10.9.1.1
				if wantUsed := 3 - i; len(gids) != 1024 || used != wantUsed {
					t.Errorf("%s GIDAttrs: %d slots, %d used; want 1024, %d", name, len(gids), used, wantUsed)
				}
				v, err := f.VerbsDeviceFor(name)
				if err != nil || v.ABIVersion != 2 || v.Major != 231 || !strings.HasPrefix(v.Name, "uverbs") {
					t.Errorf("VerbsDeviceFor(%s) = %+v, %v", name, v, err)
				}
				if pk, err := f.PKeys(name, 1); err != nil || !cmp.Equal(pk, []uint16{0xffff}) {
					t.Errorf("PKeys = %#x, %v", pk, err)
				}
			}
		})
	}
}

func ExampleFS_Port() {
	f, err := NewFS("testdata/rxe-6.12") // "/" on a live system
	if err != nil {
		panic(err)
	}
	p, err := f.Port("rxe0", 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.State, p.PhysState, p.LinkLayer, p.Rate, p.Rate.Lanes, p.Rate.Speed)
	// Output: ACTIVE LINK_UP Ethernet 10 Gb/sec (1X FDR10) 1 FDR10
}

func ExampleFS_GIDAttrs() {
	f, err := NewFS("testdata/hca")
	if err != nil {
		panic(err)
	}
	gids, err := f.GIDAttrs("mlx5_0", 1)
	if err != nil {
		panic(err)
	}
	for _, g := range gids[:5] {
		fmt.Printf("%d %s %q %q\n", g.Index, g.GID, g.Type, g.Netdev)
	}
	// Output:
	// 0 fe80:0000:0000:0000:0e42:a1ff:fe12:3456 "IB/RoCE v1" "ens1f0np0"
	// 1 fe80:0000:0000:0000:0e42:a1ff:fe12:3456 "RoCE v2" "ens1f0np0"
	// 2 0000:0000:0000:0000:0000:ffff:c0a8:0a01 "IB/RoCE v1" "ens1f0np0"
	// 3 0000:0000:0000:0000:0000:ffff:c0a8:0a01 "RoCE v2" "ens1f0np0"
	// 4 0000:0000:0000:0000:0000:0000:0000:0000 "" ""
}

func TestListPorts(t *testing.T) {
	f := mustFS(t, hcaRoot)
	all, err := f.ListPorts("", 0)
	want := []ib.PortRef{{Device: "mlx5_0", Port: 1}, {Device: "mlx5_1", Port: 1}, {Device: "mlx5_2", Port: 1}} // not the vanished mlx5_3
	if err != nil || !cmp.Equal(all, want) {
		t.Errorf("ListPorts() = %v, %v; want %v", all, err, want)
	}
	one, err := f.ListPorts("mlx5_2", 1)
	if err != nil || !cmp.Equal(one, want[2:]) {
		t.Errorf("ListPorts(mlx5_2, 1) = %v, %v", one, err)
	}
	var nf *ib.NotFoundError
	for _, tt := range []struct {
		dev  string
		port uint32
		want string
	}{
		{"mlx5_3", 0, "RDMA device mlx5_3 not found"},
		{"mlx5_0", 2, "RDMA device mlx5_0 has no port 2"},
	} {
		if _, err := f.ListPorts(tt.dev, tt.port); !errors.As(err, &nf) || err.Error() != tt.want {
			t.Errorf("ListPorts(%s, %d) = %v, want %q", tt.dev, tt.port, err, tt.want)
		}
	}
}

// TestNamesStayInTheirDirectory: a device, port or netdev name that is not
// one path element is refused by every reader before a path is built (they
// used to join it in: "../../../etc" read outside sysfs).
func TestNamesStayInTheirDirectory(t *testing.T) {
	f, err := NewFS("testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]func(name string) error{
		"Device":         func(n string) error { _, err := f.Device(n); return err },
		"PortNumbers":    func(n string) error { _, err := f.PortNumbers(n); return err },
		"Port":           func(n string) error { _, err := f.Port(n, 1); return err },
		"Ports":          func(n string) error { _, err := f.Ports(n); return err },
		"PKeys":          func(n string) error { _, err := f.PKeys(n, 1); return err },
		"PortRate":       func(n string) error { _, err := f.PortRate(n, 1); return err },
		"LinkLayer":      func(n string) error { _, err := f.LinkLayer(n, 1); return err },
		"ListPorts":      func(n string) error { _, err := f.ListPorts(n, 0); return err },
		"GIDAttrs":       func(n string) error { _, err := f.GIDAttrs(n, 1); return err },
		"GIDAttr":        func(n string) error { _, err := f.GIDAttr(n, 1, 0); return err },
		"PMACounters":    func(n string) error { _, err := f.PMACounters(n, 1); return err },
		"PMACounter":     func(n string) error { _, _, err := f.PMACounter(n, 1, "port_rcv_data"); return err },
		"Netdev":         func(n string) error { _, err := f.Netdev(n); return err },
		"NetdevMTU":      func(n string) error { _, err := f.NetdevMTU(n); return err },
		"VerbsDevice":    func(n string) error { _, err := f.VerbsDevice(n); return err },
		"VerbsDeviceFor": func(n string) error { _, err := f.VerbsDeviceFor(n); return err },
	}
	for reader, read := range readers {
		for _, name := range []string{"..", ".", "rxe0/../rxe1", "../../../sys/class/infiniband/rxe0", "rxe\x000"} {
			var ine *InvalidNameError
			if err := read(name); !errors.As(err, &ine) || ine.Name != name {
				t.Errorf("%s(%q) = %v, want an *InvalidNameError", reader, name, err)
			}
		}
	}
	if _, err := f.Device("rxe0"); err != nil {
		t.Errorf("Device(rxe0) = %v", err)
	}
	var ine *InvalidNameError
	if _, err := f.Port("rxe0/..", 1); !errors.As(err, &ine) || err.Error() != `invalid RDMA device name "rxe0/..": contains '/'` {
		t.Errorf("message: %v", err)
	}
}
