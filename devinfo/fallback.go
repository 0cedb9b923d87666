package devinfo

import (
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
)

// fromSysfs fills in a device whose uverbs device cannot be used from
// sysfs: the device attributes netlink and sysfs show, and for each port
// what ports/N shows, its GIDs, and for RoCE the MTUs derived from the
// netdev's MTU the way the kernel derives them (ports.MTUDerived).
func (r *Reader) fromSysfs(d *Device, nlPorts []nldev.Port) error {
	sd, err := r.Sysfs.Device(d.Name)
	if err != nil {
		return err
	}
	if d.FWVer == "" {
		d.FWVer = sd.FWVersion
	}
	if d.Driver == "" {
		d.Driver = sd.Driver
	}
	for _, n := range sd.Ports {
		sp, err := r.Sysfs.Port(d.Name, n)
		if err != nil {
			return err
		}
		p := Port{Port: n, Source: SourceSysfs, MTUSource: ports.MTUUnknown}
		a := &p.Attr
		a.State, a.PhysState = sp.State, sp.PhysState
		a.LID, a.SMLID, a.LMC, a.SMSL = uint16(sp.LID), uint16(sp.SMLID), sp.LMC, sp.SMSL
		a.PortCapFlags = sp.CapMask
		a.LinkLayer = sp.LinkLayer
		if sp.Rate.Lanes != 0 {
			a.ActiveWidth = ib.WidthFromLanes(sp.Rate.Lanes)
			speed, _ := ib.ParseSpeed(sp.Rate.Speed)
			a.ActiveSpeedEx = uint32(speed)
			a.ActiveSpeed = uint8(min(speed, ib.SpeedNDR))
		}
		if p.GIDs, err = gid.ReadTable(r.Sysfs, d.Name, n); err != nil {
			return err
		}
		d.Ports = append(d.Ports, p)
	}
	if err := r.addPortExtras(d, nlPorts); err != nil {
		return err
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		if p.Attr.LinkLayer != ib.LinkLayerEthernet || p.Netdev == "" {
			continue
		}
		mtu, err := r.Sysfs.NetdevMTU(p.Netdev)
		if err != nil {
			continue
		}
		p.Attr.ActiveMTU = ports.DeriveRoCEActiveMTU(d.Driver, mtu)
		p.Attr.MaxMTU, p.MTUSource = ports.RoCEMaxMTU, ports.MTUDerived
	}
	return nil
}
