package ports

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

const (
	hcaRoot = "../sysfs/testdata/hca"
	rxeRoot = "../sysfs/testdata/rxe-6.12"
)

func mustFS(t testing.TB, root string) sysfs.FS {
	t.Helper()
	f, err := sysfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ignoreNote leaves the wording of uverbs errors to the uverbs tests.
var ignoreNote = cmpopts.IgnoreFields(Port{}, "MTUNote")

// Without netlink and uverbs (the fixtures have no /dev), everything comes
// from sysfs and the RoCE MTUs are derived.
func TestReadSysfsOnly(t *testing.T) {
	r := &Reader{Sysfs: mustFS(t, hcaRoot)}
	got, err := r.Read("", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{{
		Device: "mlx5_0", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp, LinkLayer: ib.LinkLayerEthernet,
		Width: ib.Width4X, Speed: ib.SpeedEDR, RateDeciGbps: 1000,
		ActiveMTU: ib.MTU4096, MaxMTU: ib.MTU4096, MTUSource: MTUDerived, // 9000 - 96
		Netdev: "ens1f0np0", NetdevMTU: 9000, CapFlags: 0x04010000,
	}, {
		Device: "mlx5_1", Port: 1, State: ib.PortDown, PhysState: ib.PhysDisabled, LinkLayer: ib.LinkLayerEthernet,
		Width: ib.Width4X, Speed: ib.SpeedQDR, RateDeciGbps: 400,
		ActiveMTU: ib.MTU1024, MaxMTU: ib.MTU4096, MTUSource: MTUDerived, // 1500 - 96
		Netdev: "ens1f1np1", NetdevMTU: 1500, CapFlags: 0x04010000,
	}, {
		Device: "mlx5_2", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp, LinkLayer: ib.LinkLayerInfiniBand,
		Width: ib.Width4X, Speed: ib.SpeedHDR, RateDeciGbps: 2000,
		MTUSource: MTUUnknown, // IB: only verbs know the negotiated MTU
		LID:       5, SMLID: 1, CapFlags: 0xa651e848,
	}} // mlx5_3 vanished after being listed
	if diff := cmp.Diff(want, got, ignoreNote); diff != "" {
		t.Errorf("Read mismatch (-want +got):\n%s", diff)
	}
	for _, p := range got {
		// The fixture has no /dev: the note says which uverbs device failed.
		if !strings.Contains(p.MTUNote, "/dev/infiniband/uverbs") {
			t.Errorf("%s MTUNote = %q, want the uverbs error", p.Device, p.MTUNote)
		}
	}
	if got[2].RateGbps() != 200 {
		t.Errorf("RateGbps() = %v, want 200", got[2].RateGbps())
	}
}

// The captured rxe tree, read without verbs, agrees with the ibv_devinfo -v
// captured in the same guest: the derived MTU is the kernel's.
func TestReadCapturedRxeAgreesWithIbvDevinfo(t *testing.T) {
	for _, kernel := range []string{"6.1", "6.12"} {
		t.Run(kernel, func(t *testing.T) {
			root := "../sysfs/testdata/rxe-" + kernel
			got, err := (&Reader{Sysfs: mustFS(t, root)}).Read("rxe0", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("Read(rxe0, 1) = %d ports", len(got))
			}
			p := got[0]
			dev := parseIbvDevinfo(t, root+"/tools/ibv_devinfo-v.txt", "rxe0")
			want := map[string]string{
				"state":        fmt.Sprintf("PORT_%s (%d)", p.State, p.State),
				"max_mtu":      fmt.Sprintf("%s (%d)", p.MaxMTU, p.MaxMTU),
				"active_mtu":   fmt.Sprintf("%s (%d)", p.ActiveMTU, p.ActiveMTU),
				"link_layer":   p.LinkLayer.String(),
				"active_width": fmt.Sprintf("%s (%d)", p.Width, p.Width),
				"active_speed": fmt.Sprintf("%.1f Gbps (%d)", float64(p.Speed.LaneDeciGbps())/10, p.Speed),
				"phys_state":   fmt.Sprintf("%s (%d)", p.PhysState, p.PhysState),
			}
			for key, w := range want {
				if dev[key] != w {
					t.Errorf("%s: ibv_devinfo %q, grdma %q", key, dev[key], w)
				}
			}
			if p.MTUSource != MTUDerived || p.Netdev != "veth0" || p.NetdevMTU != 1500 {
				t.Errorf("port = %+v, want derived from veth0's MTU 1500", p)
			}
		})
	}
}

// parseIbvDevinfo reads the "key: value" lines of the (first) port of
// device dev in an ibv_devinfo -v output.
func parseIbvDevinfo(t *testing.T, name, dev string) map[string]string {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields := map[string]string{}
	line := regexp.MustCompile(`^\t\t\t(\w+):\t+(.*)$`)
	s := bufio.NewScanner(f)
	inDev := false
	for s.Scan() {
		if hca, ok := strings.CutPrefix(s.Text(), "hca_id:\t"); ok {
			inDev = hca == dev
		}
		if m := line.FindStringSubmatch(s.Text()); inDev && m != nil {
			fields[m[1]] = m[2]
		}
	}
	if len(fields) == 0 {
		t.Fatalf("%s: no port of %s", name, dev)
	}
	return fields
}

type fakeNetlink struct {
	devices []nldev.Device
	ports   map[uint32][]nldev.Port
}

func (f *fakeNetlink) Devices() ([]nldev.Device, error) { return f.devices, nil }

func (f *fakeNetlink) Device(index uint32) (nldev.Device, error) { return deviceIn(f.devices, index) }

// deviceIn answers a look-up as the kernel does: EINVAL for an index no
// device has.
func deviceIn(devices []nldev.Device, index uint32) (nldev.Device, error) {
	for _, d := range devices {
		if d.Index == index {
			return d, nil
		}
	}
	return nldev.Device{}, &nldev.Error{Op: "get RDMA device", Err: unix.EINVAL}
}

func (f *fakeNetlink) PortsOf(d nldev.Device) ([]nldev.Port, error) {
	index := d.Index
	if ports, ok := f.ports[index]; ok {
		return ports, nil
	}
	return nil, errors.New("no such device index")
}

// hcaNetlink is what netlink would say on the hca node; mlx5_3 is still
// listed, but gone from sysfs by the time it is read.
var hcaNetlink = &fakeNetlink{
	devices: []nldev.Device{{Index: 1, Name: "mlx5_0"}, {Index: 3, Name: "mlx5_2"}, {Index: 4, Name: "mlx5_3"}},
	ports: map[uint32][]nldev.Port{
		1: {{DevIndex: 1, Device: "mlx5_0", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
			NetdevIndex: 4, Netdev: "ens1f0np0"}},
		3: {{DevIndex: 3, Device: "mlx5_2", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
			LID: 5, SMLID: 1, SubnetPrefix: 0xfe80000000000000, CapFlags: 0xa651e848}},
		4: {{DevIndex: 4, Device: "mlx5_3", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp}},
	},
}

type fakeVerbs struct {
	ports  map[uint8]uverbs.PortAttr
	closed bool
}

func (f *fakeVerbs) QueryPort(port uint8) (uverbs.PortAttr, error) {
	if attr, ok := f.ports[port]; ok {
		return attr, nil
	}
	return uverbs.PortAttr{}, &uverbs.CommandError{Device: "uverbs9", Command: "QUERY_PORT", Err: unix.EINVAL}
}

func (f *fakeVerbs) Close() error { f.closed = true; return nil }

func TestReadNetlinkAndVerbs(t *testing.T) {
	opened := map[string]*fakeVerbs{}
	r := &Reader{
		Sysfs:   mustFS(t, hcaRoot),
		Netlink: hcaNetlink,
		OpenVerbs: func(dev string) (PortQuerier, error) {
			// QUERY_PORT says what the captured tree's sysfs says; a
			// vanished device cannot be opened.
			attr := map[string]uverbs.PortAttr{
				"mlx5_0": {ActiveMTU: ib.MTU2048, MaxMTU: ib.MTU4096, ActiveWidth: 2, ActiveSpeed: 32, LinkLayer: ib.LinkLayerEthernet},
				"mlx5_2": {ActiveMTU: ib.MTU2048, MaxMTU: ib.MTU4096, ActiveWidth: 2, ActiveSpeed: 64, LinkLayer: ib.LinkLayerInfiniBand},
			}
			a, ok := attr[dev]
			if !ok {
				return nil, &os.PathError{Op: "open", Path: "/dev/infiniband/uverbs3", Err: unix.ENODEV}
			}
			v := &fakeVerbs{ports: map[uint8]uverbs.PortAttr{1: a}}
			opened[dev] = v
			return v, nil
		},
	}
	got, err := r.Read("", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{{
		Device: "mlx5_0", DevIndex: 1, Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp, LinkLayer: ib.LinkLayerEthernet,
		Width: ib.Width4X, Speed: ib.SpeedEDR, RateDeciGbps: 1000,
		ActiveMTU: ib.MTU2048, MaxMTU: ib.MTU4096, MTUSource: MTUFromVerbs,
		Netdev: "ens1f0np0", NetdevIndex: 4, NetdevMTU: 9000,
	}, {
		Device: "mlx5_2", DevIndex: 3, Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp, LinkLayer: ib.LinkLayerInfiniBand,
		Width: ib.Width4X, Speed: ib.SpeedHDR, RateDeciGbps: 2000,
		ActiveMTU: ib.MTU2048, MaxMTU: ib.MTU4096, MTUSource: MTUFromVerbs,
		LID: 5, SMLID: 1, SubnetPrefix: 0xfe80000000000000, CapFlags: 0xa651e848,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read mismatch (-want +got):\n%s", diff)
	}
	for dev, v := range opened {
		if !v.closed {
			t.Errorf("uverbs of %s left open", dev)
		}
	}
	if _, ok := opened["mlx5_3"]; ok {
		t.Error("uverbs of the vanished mlx5_3 was opened")
	}
}

// Width and speed come from verbs when sysfs cannot print the rate, and a
// port whose QUERY_PORT fails falls back alone.
func TestReadVerbsFallbacks(t *testing.T) {
	r := &Reader{
		Sysfs: mustFS(t, rxeRoot),
		OpenVerbs: func(dev string) (PortQuerier, error) {
			return &fakeVerbs{}, nil // every QUERY_PORT fails
		},
	}
	got, err := r.Read("rxe0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0]; p.MTUSource != MTUDerived || p.ActiveMTU != ib.MTU1024 || !strings.Contains(p.MTUNote, "QUERY_PORT") {
		t.Errorf("port = %+v, want an MTU derived after QUERY_PORT failed", p)
	}

	r.OpenVerbs = func(string) (PortQuerier, error) {
		return nil, &os.PathError{Op: "open", Path: "/dev/infiniband/uverbs0", Err: unix.EACCES}
	}
	got, err = r.Read("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0]; p.MTUNote != "open /dev/infiniband/uverbs0: permission denied" || p.MTUSource != MTUDerived {
		t.Errorf("port = %+v, want derived with the permission error as note", p)
	}
}

func TestReadNotFound(t *testing.T) {
	r := &Reader{Sysfs: mustFS(t, hcaRoot)}
	var nf *ib.NotFoundError
	if _, err := r.Read("mlx5_9", 0); !errors.As(err, &nf) || err.Error() != "RDMA device mlx5_9 not found" {
		t.Errorf("Read(mlx5_9) = %v", err)
	}
	if _, err := r.Read("mlx5_0", 2); !errors.As(err, &nf) || err.Error() != "RDMA device mlx5_0 has no port 2" {
		t.Errorf("Read(mlx5_0/2) = %v", err)
	}
	// Asked for by name, a device that vanished is an error, not silence.
	if _, err := r.Read("mlx5_3", 0); !sysfs.IsGone(err) {
		t.Errorf("Read(mlx5_3) = %v, want an error for which sysfs.IsGone is true", err)
	}
	got, err := r.Read("mlx5_2", 1)
	if err != nil || len(got) != 1 || got[0].Device != "mlx5_2" {
		t.Errorf("Read(mlx5_2, 1) = %v, %v", got, err)
	}
}

func TestDeriveRoCEActiveMTU(t *testing.T) {
	tests := []struct {
		driver    string
		netdevMTU int
		want      ib.MTU
	}{
		{"rxe", 1500, ib.MTU1024}, // captured: ibv_devinfo active_mtu 1024
		{"rxe", 9000, ib.MTU4096}, // captured
		{"rxe", 4200, ib.MTU4096}, // captured
		{"rxe", 4176, ib.MTU4096},
		{"rxe", 4175, ib.MTU2048},
		{"rxe", 300, ib.MTU256}, // rxe_set_mtu's floor
		{"mlx5_core", 1500, ib.MTU1024},
		{"mlx5_core", 4192, ib.MTU4096},
		{"mlx5_core", 4191, ib.MTU2048},
		{"mlx5_core", 9000, ib.MTU4096},
		{"mlx5_core", 352, ib.MTU256},
		{"mlx5_core", 351, 0},
	}
	for _, tt := range tests {
		if got := DeriveRoCEActiveMTU(tt.driver, tt.netdevMTU); got != tt.want {
			t.Errorf("DeriveRoCEActiveMTU(%s, %d) = %v, want %v", tt.driver, tt.netdevMTU, got, tt.want)
		}
	}
}

// The captured MTU sweep: ibv_devinfo at netdev MTU 1500, 4200 and 9000
// against the rule.
func TestDeriveMatchesCapturedSweep(t *testing.T) {
	for _, mtu := range []int{1500, 4200, 9000} {
		dev := parseIbvDevinfo(t, rxeRoot+"/tools/ibv_devinfo-v-mtu"+strconv.Itoa(mtu)+".txt", "rxe0")
		m := DeriveRoCEActiveMTU("rxe", mtu)
		if want := fmt.Sprintf("%s (%d)", m, m); dev["active_mtu"] != want {
			t.Errorf("netdev MTU %d: ibv_devinfo active_mtu %q, derived %q", mtu, dev["active_mtu"], want)
		}
	}
}

func Example() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		panic(err)
	}
	r := &Reader{Sysfs: fsys} // and Netlink: an *nldev.Client on a live system
	ports, err := r.Read("", 0)
	if err != nil {
		panic(err)
	}
	for _, p := range ports {
		fmt.Printf("%s/%d %s %s %s %s %g Gb/s, MTU %s (%s from %s %d)\n", p.Device, p.Port, p.State, p.PhysState,
			p.Width, p.Speed, p.RateGbps(), p.ActiveMTU, p.MTUSource, p.Netdev, p.NetdevMTU)
	}
	// Output:
	// rxe0/1 ACTIVE LINK_UP 1X FDR10 10 Gb/s, MTU 1024 (derived from veth0 1500)
	// rxe1/1 ACTIVE LINK_UP 1X FDR10 10 Gb/s, MTU 1024 (derived from veth1 1500)
}
