package ports

import (
	"slices"
	"testing"

	"github.com/grdma/grdma/nldev"
	"golang.org/x/sys/unix"
)

// vanishingNetlink is hcaNetlink where device index gone disappears right
// after the first device list (unless stillListed): netlink then answers
// EINVAL for it, as the kernel does for an unknown index.
type vanishingNetlink struct {
	fakeNetlink
	gone        uint32
	stillListed bool
	lists       int
}

func (v *vanishingNetlink) Devices() ([]nldev.Device, error) {
	v.lists++
	if v.lists == 1 || v.stillListed {
		return v.devices, nil
	}
	return slices.DeleteFunc(slices.Clone(v.devices), func(d nldev.Device) bool { return d.Index == v.gone }), nil
}

func (v *vanishingNetlink) Device(index uint32) (nldev.Device, error) {
	if index == v.gone && !v.stillListed && v.lists > 0 {
		return nldev.Device{}, &nldev.Error{Op: "get RDMA device", Err: unix.EINVAL}
	}
	return v.fakeNetlink.Device(index)
}

func (v *vanishingNetlink) PortsOf(d nldev.Device) ([]nldev.Port, error) {
	index := d.Index
	if index == v.gone {
		return nil, &nldev.Error{Op: "list ports", Err: unix.EINVAL}
	}
	return v.fakeNetlink.PortsOf(d)
}

// TestReadSkipsDeviceGoneFromNetlink: found by the e2e churn, where
// `grdma port` failed with "list ports of RDMA device 2: invalid argument"
// when a device was deleted between the device list and its port dump.
func TestReadSkipsDeviceGoneFromNetlink(t *testing.T) {
	nl := &vanishingNetlink{fakeNetlink: *hcaNetlink, gone: 3} // mlx5_2
	r := &Reader{Sysfs: mustFS(t, hcaRoot), Netlink: nl}
	got, err := r.Read("", 0)
	if err != nil {
		t.Fatalf("Read of every device: %v, want the vanished mlx5_2 skipped", err)
	}
	if len(got) != 1 || got[0].Device != "mlx5_0" {
		t.Errorf("Read = %+v, want mlx5_0 alone", got)
	}
	// Asked for by name, it is an error; and an EINVAL for a device that
	// is still listed is not taken for a vanished device.
	nl.lists = 0
	if _, err := r.Read("mlx5_2", 0); err == nil {
		t.Error("Read(mlx5_2) succeeded, want the netlink error")
	}
	nl.stillListed = true
	if _, err := r.Read("", 0); err == nil {
		t.Error("EINVAL for a device still listed was skipped")
	}
}
