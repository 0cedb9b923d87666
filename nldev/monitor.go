package nldev

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// EventType is the kind of an RDMA monitor event (enum rdma_nl_notify_event_type).
type EventType uint8

// Monitor event types.
const (
	EventRegister      EventType = 0
	EventUnregister    EventType = 1
	EventNetdevAttach  EventType = 2
	EventNetdevDetach  EventType = 3
	EventRename        EventType = 4
	EventNetdevRename  EventType = 5
	groupNotify                  = 4 // RDMA_NL_GROUP_NOTIFY
	groupNotifyBitmask           = 1 << (groupNotify - 1)
)

var eventNames = [...]string{"REGISTER", "UNREGISTER", "NETDEV_ATTACH", "NETDEV_DETACH", "RENAME", "NETDEV_RENAME"}

// String returns the event name as rdma prints it, without brackets
// ("REGISTER"; "UNKNOWN 0x07" for types this package does not know).
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("UNKNOWN 0x%02x", uint8(t))
}

// Event is one RDMA netlink notification: a device registered,
// unregistered or renamed, or a netdev attached to, detached from or
// renamed under a port. Which fields are set depends on the type; Has tells.
type Event struct {
	Type        EventType
	DevIndex    uint32
	Device      string
	Port        uint32
	NetdevIndex uint32
	Netdev      string

	attrSet
}

func (e *Event) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrEventType:
			e.Type = EventType(ad.Uint8())
		case AttrDevIndex:
			e.DevIndex = ad.Uint32()
		case AttrDevName:
			e.Device = ad.String()
		case AttrPortIndex:
			e.Port = ad.Uint32()
		case AttrNetdevIndex:
			e.NetdevIndex = ad.Uint32()
		case AttrNetdevName:
			e.Netdev = ad.String()
		default:
			continue
		}
		e.add(a)
	}
	return ad.Err()
}

// ErrMonitorUnsupported means the kernel sends no RDMA monitor events: it
// reports no monitor mode in RDMA_NLDEV_CMD_SYS_GET (Linux 6.13 added it;
// some distribution kernels carry it earlier).
var ErrMonitorUnsupported = errors.New("this kernel sends no RDMA netlink events: monitor needs Linux 6.13 or newer (or a kernel with the monitor backport)")

// Monitor receives RDMA netlink notifications. Equivalent to `rdma monitor`.
type Monitor struct {
	c *netlink.Conn
}

// Monitor checks that the kernel sends events (SYS_GET reports a monitor
// mode) and subscribes a new socket, configured by cfg, to them.
// Unprivileged users may listen. It returns ErrMonitorUnsupported on a
// kernel without monitoring.
func (c *Client) Monitor(cfg *Config) (*Monitor, error) {
	s, err := c.System()
	if err != nil {
		return nil, err
	}
	if !s.Monitor {
		return nil, ErrMonitorUnsupported
	}
	ncfg := netlink.Config{Groups: groupNotifyBitmask}
	if cfg != nil {
		ncfg.NetNS = cfg.NetNS
	}
	nc, err := netlink.Dial(unix.NETLINK_RDMA, &ncfg)
	if err != nil {
		return nil, fmt.Errorf("subscribe to RDMA netlink events: %w", err)
	}
	return NewMonitor(nc), nil
}

// NewMonitor wraps a netlink connection already subscribed to the
// notification group (e.g. from nltest.Dial).
func NewMonitor(c *netlink.Conn) *Monitor { return &Monitor{c: c} }

// Receive blocks until the kernel sends events and returns them.
func (m *Monitor) Receive() ([]Event, error) {
	msgs, err := m.c.Receive()
	if err != nil {
		return nil, err
	}
	return DecodeEvents(msgs)
}

// DecodeEvents decodes the MONITOR messages among msgs.
func DecodeEvents(msgs []netlink.Message) ([]Event, error) {
	var events []Event
	for _, msg := range msgs {
		if msg.Header.Type != MessageType(CmdMonitor) {
			continue
		}
		var e Event
		if err := decodeMessage(msg.Data, e.decode); err != nil {
			return events, err
		}
		if e.Has(AttrEventType) {
			events = append(events, e)
		}
	}
	return events, nil
}

// Close stops receiving.
func (m *Monitor) Close() error { return m.c.Close() }
