package cminterop

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/rdmacm/rdmacmtest"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
	"github.com/grdma/grdma/verbsprobe"
)

// Hosts of a fake RDMA CM (rdmacmtest) over the fake uverbs fabric: a
// host's CM address is its fake device's IPv4 address; GID 1 is the
// IPv4-mapped GID of it.

type fakeNet struct {
	*rdmacmtest.Network
	fabric *uverbstest.Fabric
}

func newFakeNet() *fakeNet {
	return &fakeNet{Network: rdmacmtest.NewNetwork(), fabric: uverbstest.NewFabric()}
}

type fakeHost struct {
	*rdmacmtest.Host
	net *fakeNet
	ip  netip.Addr
}

func (n *fakeNet) host(name, ip string) *fakeHost {
	a := netip.MustParseAddr(ip)
	dev := n.fabric.NewDevice(uverbstest.Config{Name: name, IPv4: a})
	return &fakeHost{Host: n.NewHost(a, dev), net: n, ip: a}
}

// config is a run's Config on the host.
func (h *fakeHost) config(addr netip.AddrPort, count, size int) Config {
	return Config{Addr: addr, Count: count, Size: size, Timeout: 10 * time.Second, kernel: h.kernel}
}

// kernel is the host's fake CM; its device is the fake device, whose GID 1
// is the IPv4-mapped one (no sysfs).
func (h *fakeHost) kernel() (*kernel, error) {
	cm, err := h.Open()
	if err != nil {
		return nil, err
	}
	return &kernel{CM: cm,
		open: func(p rdmacm.DevicePort) (*uverbs.Context, string, error) {
			if p != h.Port() {
				return nil, "", fmt.Errorf("no device %+v", p)
			}
			c, err := h.Device().Open()
			return c, h.Device().Name(), err
		},
		chose: func(ci *verbsprobe.CMInfo, addr rdmacm.Addr, route rdmacm.Route, dev string) {
			ci.Fill(addr, route, dev, uint32(addr.Device.Port), sysfs.FS{})
			ci.GIDIndex, ci.RoCE = 1, gid.TypeRoCEv2.String()
		}}, nil
}

// clean fails the test if a CM ID or a verbs object is left.
func (h *fakeHost) clean(t *testing.T) {
	t.Helper()
	if n := h.net.Live(); n != 0 {
		t.Errorf("%d CM IDs left", n)
	}
	if r := h.Device().Resources(); r != (uverbstest.Resources{}) {
		t.Errorf("%s: verbs objects left: %+v", h.Device().Name(), r)
	}
}
