package nldev

import "github.com/grdma/grdma/ib"

// DevicePort is one port of a listed device, as a DEV[/PORT] argument
// (an ib.PortRef) selects it (SelectPorts).
type DevicePort struct {
	Device Device
	Port   uint32
	// Named: the device was named, so its vanishing or lacking something
	// is an error rather than a port to skip.
	Named bool
}

// SelectPorts lists the ports of devs that dev and port name: one port
// (dev and port), every port of one device (dev, port 0), or every port of
// every device (dev ""). A device that is not there, or has no such port,
// is an *ib.NotFoundError naming what there is.
func SelectPorts(devs []Device, dev string, port uint32) ([]DevicePort, error) {
	if dev != "" {
		d, err := FindDevice(devs, dev)
		if err != nil {
			return nil, err
		}
		if port > d.NumPorts {
			return nil, &ib.NotFoundError{Device: d.Name, Port: port, NumPorts: d.NumPorts}
		}
		devs = []Device{d}
	}
	var refs []DevicePort
	for _, d := range devs {
		for p := uint32(1); p <= d.NumPorts; p++ {
			if port == 0 || port == p {
				refs = append(refs, DevicePort{Device: d, Port: p, Named: dev != ""})
			}
		}
	}
	return refs, nil
}

// PortCountersOf reads the hardware counters of each port, as `rdma
// statistic show` over several ports: a port that was not named is left
// out when its device vanished since it was listed (Gone) or when it has
// no counters at all (NoCounters; noCounters, when set, is told, and rdma
// would stop the whole listing there); a named one fails. On an error the
// counters read so far are returned with it.
func (c *Client) PortCountersOf(refs []DevicePort, noCounters func(DevicePort)) ([]PortCounters, error) {
	out := make([]PortCounters, 0, len(refs))
	for _, r := range refs {
		pc, err := c.PortCounters(r.Device.Index, r.Port)
		if err != nil {
			if !r.Named && c.Gone(r.Device.Index, err) {
				continue
			}
			if !r.Named && NoCounters(err) {
				if noCounters != nil {
					noCounters(r)
				}
				continue
			}
			return out, err
		}
		out = append(out, pc)
	}
	return out, nil
}
