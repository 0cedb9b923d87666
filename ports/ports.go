// Package ports answers "is every port up, at the right width, speed and
// MTU?": it merges what RDMA netlink says about a port (state, physical
// state, netdev, LIDs — `rdma link`) with what sysfs says (rate, hence width
// and speed, and link layer — `ibstatus`) and what the uverbs QUERY_PORT
// command says (active and max MTU — `ibv_devinfo`), in one Port.
package ports

import (
	"errors"
	"math"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Port is one port of an RDMA device.
type Port struct {
	Device    string // the RDMA device, e.g. "mlx5_0" (rdma's ifname)
	DevIndex  uint32 // the device's netlink index; 0 without netlink
	Port      uint32
	State     ib.PortState
	PhysState ib.PhysState
	LinkLayer ib.LinkLayer

	Width ib.Width
	Speed ib.Speed
	// RateDeciGbps is the nominal rate (lanes × per-lane rate) in tenths of
	// Gb/s, as sysfs rate gives it: 1000 for 4X EDR.
	RateDeciGbps int

	ActiveMTU ib.MTU
	MaxMTU    ib.MTU
	MTUSource MTUSource
	// MTUNote says why the MTU is not from verbs (the uverbs error).
	MTUNote string

	Netdev      string // the netdev of a RoCE port (or IPoIB, if netlink names one)
	NetdevIndex uint32 // from netlink; 0 without
	NetdevMTU   int    // 0 when the netdev is not visible in /sys/class/net

	// InfiniBand addressing; zero on RoCE.
	LID          uint32
	SMLID        uint32
	LMC          uint8
	SubnetPrefix uint64 // from netlink
	CapFlags     uint64
}

// RateGbps returns the nominal rate in Gb/s.
func (p Port) RateGbps() float64 { return float64(p.RateDeciGbps) / 10 }

// Netlink is what this package needs of RDMA netlink; *nldev.Client has it.
type Netlink interface {
	// Devices lists the devices (RDMA_NLDEV_CMD_GET dump).
	Devices() ([]nldev.Device, error)
	// PortsOf lists the ports of a device (RDMA_NLDEV_CMD_PORT_GET).
	PortsOf(d nldev.Device) ([]nldev.Port, error)
	// Device looks a device up by index, to tell a vanished device.
	Device(devIndex uint32) (nldev.Device, error)
}

var _ Netlink = (*nldev.Client)(nil)

// PortQuerier answers QUERY_PORT for one device; *uverbs.Context is one.
type PortQuerier interface {
	QueryPort(port uint8) (uverbs.PortAttr, error)
	Close() error
}

var _ PortQuerier = (*uverbs.Context)(nil)

// Reader reads ports.
type Reader struct {
	Sysfs sysfs.FS
	// Netlink, when set, lists the devices and ports and gives their
	// state and netdev: it sees what the caller's network namespace may
	// see. Without it, sysfs alone is read.
	Netlink Netlink
	// OpenVerbs opens the uverbs device of an RDMA device; nil opens the
	// one netlink or else sysfs names (locator.Open).
	OpenVerbs func(dev string) (PortQuerier, error)
}

// Read returns the ports of device dev ("" for all devices), or only port
// port of it (0 for all ports), ordered by device name and port number.
// Equivalent to `grdma port show [DEV[/PORT]]`. A device that vanishes while
// being read is left out, unless it is the one asked for; a device or port
// that does not exist is a *ib.NotFoundError.
func (r *Reader) Read(dev string, port uint32) ([]Port, error) {
	devices, err := r.listDevices()
	if err != nil {
		return nil, err
	}
	var result []Port
	found := false
	for _, d := range devices {
		if dev != "" && d.name != dev {
			continue
		}
		found = true
		ports, err := r.readDevice(d, port)
		if dev == "" && (sysfs.IsGone(err) || r.vanished(d, err)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		result = append(result, ports...)
	}
	if dev != "" && !found {
		return nil, &ib.NotFoundError{Device: dev}
	}
	return result, nil
}

// vanished reports whether err is netlink's answer about a device that
// went away after it was listed (nldev.Client.Gone).
func (r *Reader) vanished(d device, err error) bool {
	return r.Netlink != nil && nldev.DeviceGone(r.Netlink, d.index, err)
}

// device is a device to read: its name, and with netlink its index.
type device struct {
	name  string
	index uint32
	nl    nldev.Device // with netlink
}

func (r *Reader) listDevices() ([]device, error) {
	var devices []device
	if r.Netlink == nil {
		names, err := r.Sysfs.DeviceNames()
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			devices = append(devices, device{name: name})
		}
		return devices, nil
	}
	nl, err := r.Netlink.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range nl {
		devices = append(devices, device{name: d.Name, index: d.Index, nl: d})
	}
	return devices, nil
}

// readDevice reads the ports of one device (only number want, unless 0).
// With netlink and a usable uverbs device, QUERY_PORT answers what sysfs
// would (link layer, width, speed, MTUs) and only the netdev's MTU is read
// from sysfs; otherwise sysfs gives the rest and the MTUs are derived.
func (r *Reader) readDevice(d device, want uint32) ([]Port, error) {
	if r.Netlink != nil {
		ports, err := r.basePorts(d, sysfs.Device{})
		if err != nil {
			return nil, err
		}
		if want != 0 {
			if ports = filterPort(ports, want); len(ports) == 0 {
				return nil, &ib.NotFoundError{Device: d.name, Port: want}
			}
		}
		verbs, openErr := r.openVerbs(d)
		if openErr == nil {
			defer verbs.Close()
			if ok, err := r.fromVerbs(ports, verbs); ok || err != nil {
				return ports, err
			}
		}
		return ports, r.fromSysfs(ports, verbs, openErr)
	}
	sysDev, err := r.Sysfs.Device(d.name)
	if err != nil {
		return nil, err
	}
	ports, err := r.basePorts(d, sysDev)
	if err != nil {
		return nil, err
	}
	if want != 0 {
		ports = filterPort(ports, want)
		if len(ports) == 0 {
			return nil, &ib.NotFoundError{Device: d.name, Port: want}
		}
	}
	verbs, openErr := r.openVerbs(d)
	if openErr == nil {
		defer verbs.Close()
	}
	return ports, r.fromSysfs(ports, verbs, openErr)
}

// fromSysfs completes ports from sysfs, and their MTUs from verbs (when
// open) or derived from the netdev's MTU.
func (r *Reader) fromSysfs(ports []Port, verbs PortQuerier, openErr error) error {
	if len(ports) == 0 {
		return nil
	}
	sysDev, err := r.Sysfs.Device(ports[0].Device)
	if err != nil {
		return err
	}
	for i := range ports {
		if err := r.addSysfs(&ports[i], sysDev); err != nil {
			return err
		}
	}
	r.addMTU(ports, sysDev.Driver, verbs, openErr)
	return nil
}

// openVerbs opens the uverbs device of d: with r.OpenVerbs, or as
// locator.Open finds it (the node netlink names, else sysfs's).
func (r *Reader) openVerbs(d device) (PortQuerier, error) {
	if r.OpenVerbs != nil {
		return r.OpenVerbs(d.name)
	}
	nl, _ := r.Netlink.(locator.Chardever)
	return locator.Open(r.Sysfs, nl, d.index, d.name)
}

// errPortBeyondVerbs: the uverbs ABI numbers ports in 8 bits (a switchdev
// device can have more ports); such a port is read from sysfs.
var errPortBeyondVerbs = errors.New("port number beyond the 8 bits of the uverbs ABI")

// fromVerbs fills in the ports from QUERY_PORT and their netdevs' MTUs.
// It reports false, having changed nothing, when a QUERY_PORT fails or a
// RoCE port has no netdev in netlink: then sysfs is read as before.
func (r *Reader) fromVerbs(ports []Port, verbs PortQuerier) (bool, error) {
	attrs := make([]uverbs.PortAttr, len(ports))
	for i, p := range ports {
		if p.Port > math.MaxUint8 { // uverbs numbers ports in 8 bits
			return false, nil
		}
		var err error
		if attrs[i], err = verbs.QueryPort(uint8(p.Port)); err != nil {
			return false, nil
		}
		if attrs[i].LinkLayer == ib.LinkLayerEthernet && p.Netdev == "" {
			return false, nil
		}
	}
	for i := range ports {
		p, attr := &ports[i], attrs[i]
		// As sysfs names it (show_port_link_layer): unspecified is
		// InfiniBand.
		p.LinkLayer = attr.LinkLayer
		if p.LinkLayer == ib.LinkLayerUnspecified {
			p.LinkLayer = ib.LinkLayerInfiniBand
		}
		p.Width, p.Speed = attr.ActiveWidth, ib.Speed(attr.ActiveSpeed)
		if p.Speed >= ib.SpeedNDR {
			// The write ABI clamps XDR and later to NDR: sysfs knows.
			if rate, err := r.Sysfs.PortRate(p.Device, p.Port); err == nil && rate.Lanes != 0 {
				p.Speed, _ = ib.ParseSpeed(rate.Speed)
			}
		}
		p.RateDeciGbps = p.Width.Lanes() * p.Speed.LaneDeciGbps()
		p.ActiveMTU, p.MaxMTU, p.MTUSource = attr.ActiveMTU, attr.MaxMTU, MTUFromVerbs
		if err := r.addNetdevMTU(p); err != nil {
			return true, err
		}
	}
	return true, nil
}

func filterPort(ports []Port, want uint32) []Port {
	for _, p := range ports {
		if p.Port == want {
			return []Port{p}
		}
	}
	return nil
}

// basePorts lists the ports of a device with what netlink says of them,
// or, without netlink, sysfs.
func (r *Reader) basePorts(d device, sysDev sysfs.Device) ([]Port, error) {
	var ports []Port
	if r.Netlink == nil {
		for _, n := range sysDev.Ports {
			sp, err := r.Sysfs.Port(d.name, n)
			if err != nil {
				return nil, err
			}
			ports = append(ports, Port{Device: d.name, Port: n, State: sp.State, PhysState: sp.PhysState,
				LID: sp.LID, SMLID: sp.SMLID, LMC: sp.LMC, CapFlags: uint64(sp.CapMask)})
		}
		return ports, nil
	}
	nlPorts, err := r.Netlink.PortsOf(d.nl)
	if err != nil {
		return nil, err
	}
	for _, np := range nlPorts {
		ports = append(ports, Port{Device: d.name, DevIndex: d.index, Port: np.Port, State: np.State,
			PhysState: np.PhysState, Netdev: np.Netdev, NetdevIndex: np.NetdevIndex,
			LID: np.LID, SMLID: np.SMLID, LMC: np.LMC, SubnetPrefix: np.SubnetPrefix, CapFlags: np.CapFlags})
	}
	return ports, nil
}

// addSysfs fills in the link layer, width, speed and rate, the netdev when
// netlink did not name one, and the netdev's MTU.
func (r *Reader) addSysfs(p *Port, sysDev sysfs.Device) error {
	// Two files, not the port's nine: netlink (or basePorts) has the rest.
	var err error
	if p.LinkLayer, err = r.Sysfs.LinkLayer(p.Device, p.Port); err != nil {
		return err
	}
	rate, err := r.Sysfs.PortRate(p.Device, p.Port)
	if err != nil {
		return err
	}
	if rate.Lanes != 0 {
		p.Width = ib.WidthFromLanes(rate.Lanes)
		p.Speed, _ = ib.ParseSpeed(rate.Speed)
		p.RateDeciGbps = rate.DeciGbps
	}
	if p.Netdev == "" && p.LinkLayer == ib.LinkLayerEthernet {
		if p.Netdev, err = r.roceNetdev(p, sysDev); err != nil {
			return err
		}
	}
	return r.addNetdevMTU(p)
}

// addNetdevMTU reads the MTU of the port's netdev, if it has one (a netdev
// that went away leaves it 0).
func (r *Reader) addNetdevMTU(p *Port) error {
	if p.Netdev == "" {
		return nil
	}
	mtu, err := r.Sysfs.NetdevMTU(p.Netdev)
	switch {
	case err == nil:
		p.NetdevMTU = mtu
	case !sysfs.IsGone(err):
		return err
	}
	return nil
}

// roceNetdev finds a RoCE port's netdev without netlink: the parent of a
// software device, else the netdev of GID 0, the port's default GID.
func (r *Reader) roceNetdev(p *Port, sysDev sysfs.Device) (string, error) {
	if sysDev.Netdev != "" {
		return sysDev.Netdev, nil
	}
	g, err := r.Sysfs.GIDAttr(p.Device, p.Port, 0)
	return g.Netdev, err
}

// addMTU fills in the MTUs of a device's ports from QUERY_PORT on verbs
// (unless opening it failed with openErr), or for
// RoCE ports derives them from the netdev MTU when the uverbs device
// cannot be used (no permission, ib_uverbs not loaded, unsupported driver).
func (r *Reader) addMTU(ports []Port, driver string, verbs PortQuerier, openErr error) {
	for i := range ports {
		p := &ports[i]
		err := openErr
		if err == nil && p.Port > math.MaxUint8 {
			err = errPortBeyondVerbs
		}
		if err == nil {
			var attr uverbs.PortAttr
			if attr, err = verbs.QueryPort(uint8(p.Port)); err == nil {
				p.ActiveMTU, p.MaxMTU, p.MTUSource = attr.ActiveMTU, attr.MaxMTU, MTUFromVerbs
				if p.Width == 0 { // sysfs could not print the rate
					p.Width, p.Speed = attr.ActiveWidth, ib.Speed(attr.ActiveSpeed)
					p.RateDeciGbps = p.Width.Lanes() * p.Speed.LaneDeciGbps()
				}
				continue
			}
		}
		p.MTUNote = err.Error()
		if p.LinkLayer == ib.LinkLayerEthernet && p.NetdevMTU > 0 {
			p.ActiveMTU = DeriveRoCEActiveMTU(driver, p.NetdevMTU)
			p.MaxMTU, p.MTUSource = RoCEMaxMTU, MTUDerived
		} else {
			p.MTUSource = MTUUnknown
		}
	}
}

// PMACounters reads the sysfs PMA counters (sysfs.FS.PMACounters) of each
// port as counter sets, for `grdma stat show --pma`: a port without any is
// left out and missing, when set, is told.
func PMACounters(sys sysfs.FS, refs []nldev.DevicePort, missing func(nldev.DevicePort)) ([]nldev.PortCounters, error) {
	out := make([]nldev.PortCounters, 0, len(refs))
	for _, r := range refs {
		pma, err := sys.PMACounters(r.Device.Name, r.Port)
		if err != nil {
			return out, err
		}
		if len(pma) == 0 {
			if missing != nil {
				missing(r)
			}
			continue
		}
		pc := nldev.PortCounters{DevIndex: r.Device.Index, Device: r.Device.Name, Port: r.Port}
		for _, c := range pma {
			pc.Counters = append(pc.Counters, nldev.Counter{Name: c.Name, Value: c.Value})
		}
		out = append(out, pc)
	}
	return out, nil
}
