package devinfo_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/internal/ibvdevinfo"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

var kernels = []string{"6.1", "6.12"}

// recordedVerbs answers the uverbs commands with what verbscapture
// recorded for one device (testdata/K/verbs/DEV).
type recordedVerbs struct {
	t   *testing.T
	dir string
}

func (v recordedVerbs) decode(name string, into any) error {
	b, err := os.ReadFile(filepath.Join(v.dir, name))
	if err != nil {
		return err
	}
	if _, err := binary.Decode(b, binary.NativeEndian, into); err != nil {
		v.t.Fatalf("%s: %v", name, err)
	}
	return nil
}

func (v recordedVerbs) QueryDeviceEx() (uverbs.DeviceAttrEx, uverbs.DriverDeviceAttr, error) {
	var a uverbs.DeviceAttrEx
	return a, uverbs.DriverDeviceAttr{}, v.decode("query_device_ex.bin", &a)
}

func (v recordedVerbs) QueryPortEx(driverID uint32, port uint8) (uverbs.PortAttrEx, error) {
	var a uverbs.PortAttrEx
	if driverID != uverbs.DriverIDRXE {
		v.t.Errorf("QueryPortEx with driver id %d, want rxe's %d", driverID, uverbs.DriverIDRXE)
	}
	return a, v.decode("query_port_"+string(rune('0'+port))+".bin", &a)
}

func (v recordedVerbs) QueryPort(port uint8) (uverbs.PortAttr, error) {
	a, err := v.QueryPortEx(uverbs.DriverIDRXE, port)
	return a.PortAttr, err
}

func (v recordedVerbs) QueryGIDTable(driverID uint32, maxEntries int) ([]uverbs.GIDEntry, error) {
	b, err := os.ReadFile(filepath.Join(v.dir, "gid_table.bin"))
	if err != nil {
		return nil, err
	}
	entries := make([]uverbs.GIDEntry, len(b)/32)
	if len(entries) > maxEntries {
		v.t.Errorf("%d GID entries recorded, room asked for %d", len(entries), maxEntries)
	}
	_, err = binary.Decode(b, binary.NativeEndian, entries)
	return entries, err
}

func (v recordedVerbs) CompVectors() int {
	b, err := os.ReadFile(filepath.Join(v.dir, "num_comp_vectors.txt"))
	if err != nil {
		v.t.Fatal(err)
	}
	var n int
	for _, c := range strings.TrimSpace(string(b)) {
		n = n*10 + int(c-'0')
	}
	return n
}

func (recordedVerbs) Close() error { return nil }

// recordedKernel serves the netlink replies of testdata/K/nl.
func recordedKernel(dir string) *nlfixture.Kernel {
	k := nlfixture.NewKernel(dir)
	k.On(nlfixture.Request{Cmd: nldev.CmdGet, Dump: true, Dev: -1, Port: -1}, "get_dump.bin")
	k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: -1, Port: -1, ChardevType: "rdma_cm"}, "chardev_rdma_cm.bin")
	for _, dev := range []string{"0", "1"} {
		n := int64(dev[0] - '0')
		k.On(nlfixture.Request{Cmd: nldev.CmdPortGet, Dump: true, Dev: n, Port: -1}, "port_dump_dev"+dev+".bin")
		k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: n, Port: -1, ChardevType: "uverbs"}, "chardev_uverbs_dev"+dev+".bin")
		for _, typ := range []string{"umad", "issm"} {
			k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: n, Port: 1, ChardevType: typ}, "chardev_"+typ+"_dev"+dev+"_port1.bin")
		}
	}
	return k
}

// netdevRoot makes a sysfs root with the netdevs' operstate as recorded
// (tools/netdevs.txt: "NAME IFINDEX OPERSTATE").
func netdevRoot(t *testing.T, kernel string) sysfs.FS {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", kernel, "tools", "netdevs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		dir := filepath.Join(root, "sys", "class", "net", f[0])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "operstate"), []byte(f[2]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := sysfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

func recordedReader(t *testing.T, kernel string) (*devinfo.Reader, *nlfixture.Kernel) {
	k := recordedKernel(filepath.Join("testdata", kernel, "nl"))
	nl := nldev.NewClient(k.Conn())
	t.Cleanup(func() { nl.Close() })
	r := &devinfo.Reader{Sysfs: netdevRoot(t, kernel), Netlink: nl,
		OpenVerbs: func(dev string, node uverbs.Node) (devinfo.Verbs, error) {
			return recordedVerbs{t, filepath.Join("testdata", kernel, "verbs", dev)}, nil
		}}
	return r, k
}

// TestAgreesWithIbvDevinfo reads the recorded devices (rxe0 on veth0 at MTU
// 9000 with an IPv4 and an IPv6 address; rxe1 on veth2, which is down) and
// compares every field, port and GID with what ibv_devinfo -v printed for
// the same state.
func TestAgreesWithIbvDevinfo(t *testing.T) {
	for _, kernel := range kernels {
		t.Run(kernel, func(t *testing.T) {
			r, _ := recordedReader(t, kernel)
			devs, err := r.Read("")
			if err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(filepath.Join("testdata", kernel, "tools", "ibv_devinfo-v.txt"))
			if err != nil {
				t.Fatal(err)
			}
			ibv, err := ibvdevinfo.Parse(string(text))
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != 2 || len(ibv) != 2 {
				t.Fatalf("%d devices, ibv_devinfo %d; want 2", len(devs), len(ibv))
			}
			for i := range devs {
				for _, diff := range ibvdevinfo.Compare(ibv[i], &devs[i]) {
					t.Error(diff)
				}
			}
		})
	}
}

// TestExtras checks what ibv_devinfo does not show against the recording:
// driver, parent, character devices, netdevs and their state.
func TestExtras(t *testing.T) {
	for _, kernel := range kernels {
		t.Run(kernel, func(t *testing.T) {
			r, _ := recordedReader(t, kernel)
			devs, err := r.Read("")
			if err != nil {
				t.Fatal(err)
			}
			want := []struct {
				name, uverbs, netdev, state, umad string
				mtu                                int
			}{
				{"rxe0", "/dev/infiniband/uverbs0", "veth0", "up", "/dev/infiniband/umad0", 4096},
				{"rxe1", "/dev/infiniband/uverbs1", "veth2", "down", "/dev/infiniband/umad1", 1024},
			}
			for i, w := range want {
				d := devs[i]
				p := d.Ports[0]
				if d.Name != w.name || d.Driver != "rxe" || d.Parent != nil || d.Uverbs != w.uverbs ||
					d.RDMACM != "/dev/infiniband/rdma_cm" || d.Source != devinfo.SourceVerbs || d.Note != "" {
					t.Errorf("device %d: %s driver %q parent %v uverbs %q rdma_cm %q source %s note %q", i, d.Name,
						d.Driver, d.Parent, d.Uverbs, d.RDMACM, d.Source, d.Note)
				}
				// ib_umad serves RoCE ports; issm only InfiniBand ones (EOPNOTSUPP).
				if p.Netdev != w.netdev || p.NetdevOperState != w.state || p.Umad != w.umad || p.Issm != "" ||
					p.Attr.ActiveMTU.Bytes() != w.mtu {
					t.Errorf("%s/1: netdev %q %q umad %q issm %q active MTU %d", d.Name, p.Netdev,
						p.NetdevOperState, p.Umad, p.Issm, p.Attr.ActiveMTU.Bytes())
				}
			}
		})
	}
}

func TestUnknownDevice(t *testing.T) {
	r, _ := recordedReader(t, "6.12")
	_, err := r.Read("mlx5_9")
	var nf *nldev.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Read(mlx5_9) = %v, want an *nldev.NotFoundError", err)
	}
}

// TestSysfsFallback: where the uverbs device cannot be opened, the device
// comes from the captured sysfs tree (sysfs/testdata/rxe-6.12, whose
// ibv_devinfo -v output was recorded with it), with the reason as a note,
// and what sysfs shows agrees with ibv_devinfo.
func TestSysfsFallback(t *testing.T) {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := recordedReader(t, "6.12")
	r.Sysfs = fsys
	r.OpenVerbs = func(dev string, node uverbs.Node) (devinfo.Verbs, error) {
		return nil, &os.PathError{Op: "open", Path: "/dev/infiniband/" + node.Name, Err: unix.EACCES}
	}
	devs, err := r.Read("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	d := devs[0]
	if d.Source != devinfo.SourceSysfs || d.Note != "open /dev/infiniband/uverbs0: permission denied" || d.Attr != nil {
		t.Fatalf("source %s note %q attr %v", d.Source, d.Note, d.Attr)
	}
	text, err := os.ReadFile("../sysfs/testdata/rxe-6.12/tools/ibv_devinfo-v.txt")
	if err != nil {
		t.Fatal(err)
	}
	ibv, err := ibvdevinfo.Parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	// The netlink recording is of another boot than the sysfs tree: compare
	// the port, whose every field must be one ibv_devinfo shows, except the
	// MTUs derived from that boot's netdev MTU.
	if len(d.Ports) != 1 || len(ibv[0].Ports) != 1 {
		t.Fatalf("%d ports, ibv_devinfo %d", len(d.Ports), len(ibv[0].Ports))
	}
	d.Ports[0].MTUSource = "unknown"
	n := 0
	for _, diff := range ibvdevinfo.Compare(ibv[0], &d) {
		if strings.HasPrefix(diff, "rxe0/1: ") && !strings.Contains(diff, "grdma has no such field") {
			t.Error(diff)
		}
	}
	for _, f := range d.Ports[0].Fields() {
		if _, ok := ibv[0].Ports[0].Values[f.Key]; ok {
			n++
		}
	}
	if n < 10 {
		t.Errorf("%d port fields from sysfs compared, want the 10 sysfs has", n)
	}
}
