package nldev

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// PortState is the logical port state (enum ib_port_state).
type PortState uint8

// Logical port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String returns the name rdma prints ("ACTIVE", ...; "UNKNOWN" otherwise).
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "UNKNOWN"
}

// PhysState is the physical port state (enum ib_port_phys_state).
type PhysState uint8

// Physical port states.
const (
	PhysSleep    PhysState = 1
	PhysPolling  PhysState = 2
	PhysDisabled PhysState = 3
	// PhysTraining is PortConfigurationTraining; rdma prints it "ARMED".
	PhysTraining    PhysState = 4
	PhysLinkUp      PhysState = 5
	PhysLinkErrRec  PhysState = 6
	PhysPHYTest     PhysState = 7
	PhysOPAOffline  PhysState = 9
	PhysOPAPortTest PhysState = 11
)

var physStateNames = [...]string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE", "UNKNOWN", "OPA_TEST"}

// String returns the name rdma prints ("LINK_UP", ...; "UNKNOWN" otherwise).
func (s PhysState) String() string {
	if int(s) < len(physStateNames) {
		return physStateNames[s]
	}
	return "UNKNOWN"
}

// Port is one port of an RDMA device as RDMA_NLDEV_CMD_PORT_GET reports it.
// Equivalent to one line of `rdma link show`. CapFlags, SubnetPrefix, LID,
// SMLID and LMC are sent for InfiniBand ports only; the netdev only when one
// is attached and lives in the caller's network namespace.
type Port struct {
	DevIndex     uint32
	DevName      string
	Index        uint32
	CapFlags     uint64 // CapabilityMask | CapabilityMask2<<32
	SubnetPrefix uint64
	LID          uint32
	SMLID        uint32
	LMC          uint8
	State        PortState
	PhysState    PhysState
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
			p.DevName = ad.String()
		case AttrPortIndex:
			p.Index = ad.Uint32()
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
			p.State = PortState(ad.Uint8())
		case AttrPortPhysState:
			p.PhysState = PhysState(ad.Uint8())
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
