package locator

import (
	"errors"
	"testing"

	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// TestLiveDevices opens every uverbs device of the running kernel and
// checks QUERY_DEVICE and QUERY_PORT against what sysfs shows for the same
// ports. It runs where there is an RDMA device (the e2e guest; run the test
// binary there with -test.run Live) and is skipped elsewhere.
func TestLiveDevices(t *testing.T) {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	verbs, err := fsys.VerbsDevices()
	if err != nil {
		t.Fatal(err)
	}
	if len(verbs) == 0 {
		t.Skip("no uverbs device on this machine")
	}
	for _, vd := range verbs {
		t.Run(vd.Device, func(t *testing.T) {
			c, err := OpenSysfs(fsys, vd.Device)
			var ud *uverbs.UnsupportedDriverError
			if errors.As(err, &ud) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			dev, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			sys, err := fsys.Device(vd.Device)
			if err != nil {
				t.Fatal(err)
			}
			if dev.NodeGUID.Uint64() != sys.NodeGUID || int(dev.PhysPortCnt) != len(sys.Ports) {
				t.Errorf("QUERY_DEVICE node GUID %#x, %d ports; sysfs %#x, %d ports",
					dev.NodeGUID.Uint64(), dev.PhysPortCnt, sys.NodeGUID, len(sys.Ports))
			}
			for _, n := range sys.Ports {
				attr, err := c.QueryPort(uint8(n))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("port %d: %+v", n, attr)
				p, err := fsys.Port(vd.Device, n)
				if err != nil {
					t.Fatal(err)
				}
				gids, err := fsys.GIDAttrs(vd.Device, n)
				if err != nil {
					t.Fatal(err)
				}
				if p.State != attr.State || p.PhysState != attr.PhysState ||
					p.LinkLayer != attr.LinkLayer || p.LID != uint32(attr.LID) ||
					int(attr.GIDTblLen) != len(gids) || attr.ActiveMTU.Bytes() == 0 || attr.MaxMTU < attr.ActiveMTU {
					t.Errorf("port %d: QUERY_PORT %+v disagrees with sysfs %+v (%d GID slots)", n, attr, p, len(gids))
				}
			}
		})
	}
}
