package nldev

import (
	"fmt"

	"github.com/grdma/grdma/ib"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Port is one port of an RDMA device as RDMA_NLDEV_CMD_PORT_GET reports it.
// Equivalent to one line of `rdma link show`. CapFlags, SubnetPrefix, LID,
// SMLID and LMC are sent for InfiniBand ports only; the netdev only when one
// is attached and lives in the caller's network namespace.
type Port struct {
	DevIndex     uint32
	Device       string
	Port         uint32 // the port number, as in ports.Port and sysfs.Port
	CapFlags     uint64 // CapabilityMask | CapabilityMask2<<32
	SubnetPrefix uint64
	LID          uint32
	SMLID        uint32
	LMC          uint8
	State        ib.PortState
	PhysState    ib.PhysState
	NetdevIndex  uint32
	Netdev       string

	attrSet
}

func (p *Port) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrDevIndex:
			p.DevIndex = ad.Uint32()
		case AttrDevName:
			p.Device = ad.String()
		case AttrPortIndex:
			p.Port = ad.Uint32()
		case AttrCapFlags:
			p.CapFlags = ad.Uint64()
		case AttrSubnetPrefix:
			p.SubnetPrefix = ad.Uint64()
		case AttrLID:
			p.LID = ad.Uint32()
		case AttrSMLID:
			p.SMLID = ad.Uint32()
		case AttrLMC:
			p.LMC = ad.Uint8()
		case AttrPortState:
			p.State = ib.PortState(ad.Uint8())
		case AttrPortPhysState:
			p.PhysState = ib.PhysState(ad.Uint8())
		case AttrNetdevIndex:
			p.NetdevIndex = ad.Uint32()
		case AttrNetdevName:
			p.Netdev = ad.String()
		default:
			continue
		}
		p.add(a)
	}
	return ad.Err()
}

// Ports lists the ports of the device with kernel index devIndex.
// Equivalent to `rdma link show DEV` (which rdma itself rejects without /PORT).
func (c *Client) Ports(devIndex uint32) ([]Port, error) {
	var ports []Port
	err := c.dump(CmdPortGet, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
	}, func() { ports = ports[:0] }, func(b []byte) error {
		var p Port
		if err := decodeMessage(b, p.decode); err != nil {
			return err
		}
		ports = append(ports, p)
		return nil
	})
	return ports, wrap(fmt.Sprintf("list ports of RDMA device %d", devIndex), err, nil)
}

// PortsOf returns the ports of device d, as Ports does. A device with one
// or two ports has each asked for by number: one reply each, where a dump
// takes a second read for its end (at 64 devices in the emulated guest, 11
// ms of dumps against 5 ms of single requests); others are dumped.
func (c *Client) PortsOf(d Device) ([]Port, error) {
	if d.NumPorts == 0 || d.NumPorts > 2 {
		return c.Ports(d.Index)
	}
	ports := make([]Port, 0, d.NumPorts)
	for n := uint32(1); n <= d.NumPorts; n++ {
		p, err := c.Port(d.Index, n)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// Port returns one port. Equivalent to `rdma link show DEV/PORT`.
func (c *Client) Port(devIndex, port uint32) (Port, error) {
	var p Port
	err := c.get(CmdPortGet, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
		ae.Uint32(uint16(AttrPortIndex), port)
	}, p.decode)
	return p, wrap(fmt.Sprintf("get port %d of RDMA device %d", port, devIndex), err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return "no such device or port"
		}
		return ""
	})
}
