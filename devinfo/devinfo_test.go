package devinfo_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/devinfofixture"
	"github.com/grdma/grdma/internal/ibvdevinfo"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

var kernels = []string{"6.1", "6.12"}

// recordedKernel serves the netlink replies of a recording's nl dir.
func recordedKernel(dir string) *nlfixture.Kernel {
	return devinfofixture.Dir(filepath.Dir(dir)).Kernel()
}

func recordedReader(t *testing.T, kernel string) (*devinfo.Reader, *nlfixture.Kernel) {
	rec := devinfofixture.Dir(filepath.Join("testdata", kernel))
	k := rec.Kernel()
	nl := nldev.NewClient(k.Conn())
	t.Cleanup(func() { nl.Close() })
	fsys, err := rec.Sysfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &devinfo.Reader{Sysfs: fsys, Netlink: nl,
		OpenVerbs: func(dev string, node uverbs.Node) (devinfo.Verbs, error) { return rec.Verbs(dev), nil }}
	return r, k
}

// readRecorded reads every device of a kernel's recording.
func readRecorded(t *testing.T, kernel string) []devinfo.Device {
	t.Helper()
	r, _ := recordedReader(t, kernel)
	devs, err := r.Read("")
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

// TestAgreesWithIbvDevinfo reads the recorded devices (rxe0 on veth0 at MTU
// 9000 with an IPv4 and an IPv6 address; rxe1 on veth2, which is down) and
// compares every field, port and GID with what ibv_devinfo -v printed for
// the same state.
func TestAgreesWithIbvDevinfo(t *testing.T) {
	for _, kernel := range kernels {
		t.Run(kernel, func(t *testing.T) {
			devs := readRecorded(t, kernel)
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
			devs := readRecorded(t, kernel)
			want := []struct {
				name, uverbs, netdev, state, umad string
				mtu                               int
			}{
				{"rxe0", "/dev/infiniband/uverbs0", "veth0", "up", "/dev/infiniband/umad0", 4096},
				{"rxe1", "/dev/infiniband/uverbs1", "veth2", "down", "/dev/infiniband/umad1", 1024},
			}
			for i, w := range want {
				d := devs[i]
				p := d.Ports[0]
				if d.Name != w.name || d.Driver != "rxe" || d.BusDevice != nil || d.Uverbs != w.uverbs ||
					d.RDMACM != "/dev/infiniband/rdma_cm" || d.Source != devinfo.SourceVerbs || d.Note != "" {
					t.Errorf("device %d: %s driver %q parent %v uverbs %q rdma_cm %q source %s note %q", i, d.Name,
						d.Driver, d.BusDevice, d.Uverbs, d.RDMACM, d.Source, d.Note)
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
	var nf *ib.NotFoundError
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
	d.Ports[0].MTUSource = ports.MTUUnknown
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

// portsVerbs answers for a device with 255 ports (the kernel's clamp of
// phys_port_cnt) what the recording answered for port 1.
type portsVerbs struct {
	devinfo.Verbs
	asked int
}

func (v *portsVerbs) QueryDeviceEx() (uverbs.DeviceAttrEx, uverbs.DriverDeviceAttr, error) {
	a, d, err := v.Verbs.QueryDeviceEx()
	a.Base.PhysPortCnt = 255
	return a, d, err
}

func (v *portsVerbs) QueryPortEx(driverID uint32, port uint8) (uverbs.PortAttrEx, error) {
	if v.asked++; port == 0 || v.asked > 255 {
		return uverbs.PortAttrEx{}, fmt.Errorf("asked for port %d (call %d)", port, v.asked)
	}
	return v.Verbs.QueryPortEx(driverID, 1)
}

// TestManyPorts: a device of 255 ports is read port by port, 1 to 255 (a
// uint8 counter once wrapped to port 0 and never ended).
func TestManyPorts(t *testing.T) {
	r, _ := recordedReader(t, "6.12")
	rec := devinfofixture.Dir(filepath.Join("testdata", "6.12"))
	pv := &portsVerbs{Verbs: rec.Verbs("rxe0")}
	r.OpenVerbs = func(string, uverbs.Node) (devinfo.Verbs, error) { return pv, nil }
	devs, err := r.Read("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(devs[0].Ports); n != 255 || pv.asked != 255 || devs[0].Ports[254].Port != 255 {
		t.Fatalf("%d ports read in %d QUERY_PORTs", n, pv.asked)
	}
}

// removedVerbs fails as uverbs does on a device being removed (EIO).
type removedVerbs struct{ devinfo.Verbs }

func (removedVerbs) QueryDeviceEx() (uverbs.DeviceAttrEx, uverbs.DriverDeviceAttr, error) {
	return uverbs.DeviceAttrEx{}, uverbs.DriverDeviceAttr{}, &uverbs.CommandError{Command: "QUERY_DEVICE_EX", Err: unix.EIO}
}

// TestDeviceRemovedWhileRead: a device removed after the listing (uverbs
// answers EIO, netlink no longer knows its index) is left out of the list
// of every device; asked for by name, the failure is reported.
func TestDeviceRemovedWhileRead(t *testing.T) {
	r, k := recordedReader(t, "6.12")
	rec := devinfofixture.Dir(filepath.Join("testdata", "6.12"))
	r.OpenVerbs = func(dev string, node uverbs.Node) (devinfo.Verbs, error) {
		if dev == "rxe1" {
			return removedVerbs{rec.Verbs(dev)}, nil
		}
		return rec.Verbs(dev), nil
	}
	k.On(nlfixture.Request{Cmd: nldev.CmdGet, Dev: 1, Port: -1}, "get_doit_bad_index.bin")
	devs, err := r.Read("")
	if err != nil || len(devs) != 1 || devs[0].Name != "rxe0" {
		t.Fatalf("%d devices, %v; want rxe0 alone", len(devs), err)
	}
	if _, err := r.Read("rxe1"); !errors.Is(err, unix.EIO) {
		t.Errorf("rxe1 by name: %v, want the EIO", err)
	}
}
