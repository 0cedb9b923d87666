package nldev

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Counter is one hardware counter of a port.
type Counter struct {
	Name  string
	Value uint64
	// Index identifies the counter in STAT_SET requests (STAT_GET_STATUS only).
	Index uint32
	// Optional is true for counters that can be turned on and off
	// (rdma's "optional-counters"); Enabled says whether this one is on.
	Optional bool
	Enabled  bool
}

func (c *Counter) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		switch Attr(ad.Type()) {
		case AttrStatHWCounterEntryName:
			c.Name = ad.String()
		case AttrStatHWCounterEntryValue:
			c.Value = ad.Uint64()
		case AttrStatHWCounterIndex:
			c.Index = ad.Uint32()
		case AttrStatHWCounterDynamic:
			c.Optional = true
			c.Enabled = ad.Uint8() != 0
		}
	}
	return ad.Err()
}

// decodeCounters decodes a STAT_HWCOUNTERS table.
func decodeCounters(ad *netlink.AttributeDecoder, out *[]Counter) error {
	for ad.Next() {
		if Attr(ad.Type()) != AttrStatHWCounterEntry {
			continue
		}
		var c Counter
		ad.Nested(c.decode)
		*out = append(*out, c)
	}
	return ad.Err()
}

// PortCounters is the counter set of one port.
type PortCounters struct {
	DevIndex uint32
	Device   string
	Port     uint32
	Counters []Counter

	attrSet
}

func (pc *PortCounters) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrDevIndex:
			pc.DevIndex = ad.Uint32()
		case AttrDevName:
			pc.Device = ad.String()
		case AttrPortIndex:
			pc.Port = ad.Uint32()
		case AttrStatHWCounters:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeCounters(nad, &pc.Counters) })
		default:
			continue
		}
		pc.add(a)
	}
	return ad.Err()
}

func devPortAttrs(devIndex, port uint32) func(ae *netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
		ae.Uint32(uint16(AttrPortIndex), port)
	}
}

// NoCounters reports whether err, from PortCounters, says the port has no
// hardware counters at all (siw answers EINVAL, other drivers EOPNOTSUPP):
// a listing of every port skips such a port rather than fail (grdma stat
// show notes it, the exporter exports no counters for it).
func NoCounters(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)
}

// statReason explains STAT_* errnos.
func statReason(errno unix.Errno) string {
	switch errno {
	case unix.EINVAL, unix.EOPNOTSUPP:
		return "the device reports no hardware counters here"
	}
	return ""
}

// PortCounters returns the hardware counters of a port, every counter the
// driver reports, by name. Equivalent to `rdma statistic show link DEV/PORT`.
// Reading needs no privilege.
func (c *Client) PortCounters(devIndex, port uint32) (PortCounters, error) {
	var pc PortCounters
	err := c.get(CmdStatGet, devPortAttrs(devIndex, port), pc.decode)
	return pc, wrap(fmt.Sprintf("read counters of port %d of RDMA device %d", port, devIndex), err, statReason)
}

// CounterStatus lists a port's counters with their index and, for optional
// counters, whether they are on (STAT_GET_STATUS, Linux 5.16+). Equivalent
// to `rdma statistic mode supported link DEV/PORT`.
func (c *Client) CounterStatus(devIndex, port uint32) (PortCounters, error) {
	var pc PortCounters
	err := c.get(CmdStatGetStatus, devPortAttrs(devIndex, port), pc.decode)
	return pc, wrap(fmt.Sprintf("read counter status of port %d of RDMA device %d", port, devIndex), err, func(errno unix.Errno) string {
		if errno == unix.EINVAL || errno == unix.EOPNOTSUPP {
			return "the kernel or device has no optional counters (Linux 5.16 or newer, and a driver that has them)"
		}
		return ""
	})
}

// SetOptionalCountersByName turns on exactly the optional counters named
// (from CounterStatus's names) on port of d and turns the others off; no
// names turns them all off. Equivalent to `rdma statistic set link
// DEV/PORT optional-counters A,B` (and unset). A name that is not an
// optional counter of the port is an error listing those it has, and
// nothing is changed.
func (c *Client) SetOptionalCountersByName(d Device, port uint32, names []string) error {
	var indexes []uint32
	if len(names) > 0 {
		st, err := c.CounterStatus(d.Index, port)
		if err != nil {
			return err
		}
		var optional []string
		byName := map[string]uint32{}
		for _, ctr := range st.Counters {
			if ctr.Optional {
				byName[ctr.Name] = ctr.Index
				optional = append(optional, ctr.Name)
			}
		}
		for _, n := range names {
			i, ok := byName[n]
			if !ok {
				if len(optional) == 0 {
					return fmt.Errorf("%s/%d has no optional counters", d.Name, port)
				}
				return fmt.Errorf("%s is not an optional counter of %s/%d (optional counters: %s)", n, d.Name, port, strings.Join(optional, ", "))
			}
			indexes = append(indexes, i)
		}
	}
	return c.SetOptionalCounters(d.Index, port, indexes)
}

// SetOptionalCounters turns on exactly the optional counters with the given
// indexes (from CounterStatus) and turns the others off; no indexes turns
// them all off. Equivalent to `rdma statistic set link DEV/PORT
// optional-counters A,B` and `rdma statistic unset link DEV/PORT optional-counters`.
func (c *Client) SetOptionalCounters(devIndex, port uint32, indexes []uint32) error {
	_, err := c.execute(CmdStatSet, statSetAck, func(ae *netlink.AttributeEncoder) {
		devPortAttrs(devIndex, port)(ae)
		ae.Nested(uint16(AttrStatHWCounters), func(nae *netlink.AttributeEncoder) error {
			for _, i := range indexes {
				nae.Uint32(uint16(AttrStatHWCounterIndex), i)
			}
			return nil
		})
	})
	return wrap(fmt.Sprintf("set optional counters of port %d of RDMA device %d", port, devIndex), err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return "the kernel refused: a counter is not optional, or this kernel has no optional counters (Linux 5.16+)"
		}
		return ""
	})
}

// statSetAck is false: STAT_SET and STAT_DEL always answer with a STAT_SET
// message, so an ACK requested too would be left for the next request.
const statSetAck = false

// Counter modes of QP counters (enum rdma_nl_counter_mode).
const (
	CounterModeNone   = 0
	CounterModeAuto   = 1
	CounterModeManual = 2
)

// Auto mode criteria (enum rdma_nl_counter_mask).
const (
	CounterMaskQPType = 1
	CounterMaskPID    = 2
)

// QPCounterMode is how a port binds QPs to counters.
type QPCounterMode struct {
	DevIndex uint32
	Device   string
	Port     uint32
	Mode     uint32 // CounterModeNone, CounterModeAuto or CounterModeManual
	AutoMask uint32 // CounterMaskQPType | CounterMaskPID, in auto mode
	// OptionalCounters: auto-bound counters include optional counters.
	OptionalCounters bool

	attrSet
}

func (m *QPCounterMode) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrDevIndex:
			m.DevIndex = ad.Uint32()
		case AttrDevName:
			m.Device = ad.String()
		case AttrPortIndex:
			m.Port = ad.Uint32()
		case AttrStatMode:
			m.Mode = ad.Uint32()
		case AttrStatAutoModeMask:
			m.AutoMask = ad.Uint32()
		case AttrStatOpcounterEnabled:
			m.OptionalCounters = ad.Uint8() != 0
		default:
			continue
		}
		m.add(a)
	}
	return ad.Err()
}

// QPCounterMode returns how a port binds QPs to counters. Equivalent to
// `rdma statistic qp mode link DEV/PORT`.
func (c *Client) QPCounterMode(devIndex, port uint32) (QPCounterMode, error) {
	var m QPCounterMode
	err := c.get(CmdStatGet, func(ae *netlink.AttributeEncoder) {
		devPortAttrs(devIndex, port)(ae)
		// Any STAT_MODE asks for the mode instead of the counters.
		ae.Uint32(uint16(AttrStatMode), CounterModeManual)
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
	}, m.decode)
	return m, wrap(fmt.Sprintf("read QP counter mode of port %d of RDMA device %d", port, devIndex), err, statReason)
}

// SetQPCounterAuto turns automatic QP counter binding on with the given
// criteria mask (CounterMaskQPType, CounterMaskPID), or off with mask 0.
// optional includes optional counters (Linux 6.15+; sent only when true).
// Equivalent to `rdma statistic qp set link DEV/PORT auto type on`.
func (c *Client) SetQPCounterAuto(devIndex, port, mask uint32, optional bool) error {
	_, err := c.execute(CmdStatSet, statSetAck, func(ae *netlink.AttributeEncoder) {
		devPortAttrs(devIndex, port)(ae)
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
		ae.Uint32(uint16(AttrStatMode), CounterModeAuto)
		ae.Uint32(uint16(AttrStatAutoModeMask), mask)
		if optional {
			ae.Uint8(uint16(AttrStatOpcounterEnabled), 1)
		}
	})
	return wrap(fmt.Sprintf("set QP counter mode of port %d of RDMA device %d", port, devIndex), err, func(errno unix.Errno) string {
		switch errno {
		case unix.EOPNOTSUPP:
			return "the device cannot bind QPs to counters"
		case unix.EBUSY:
			return "QPs are bound to counters manually; unbind them first"
		}
		return ""
	})
}

// BindQPCounter binds QP lqpn to counter counterID (0: the kernel
// allocates one) and returns the counter used. Equivalent to
// `rdma statistic qp bind link DEV/PORT lqpn Q [cntn C]`.
func (c *Client) BindQPCounter(devIndex, port, lqpn, counterID uint32) (uint32, error) {
	msgs, err := c.execute(CmdStatSet, statSetAck, func(ae *netlink.AttributeEncoder) {
		devPortAttrs(devIndex, port)(ae)
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
		ae.Uint32(uint16(AttrStatMode), CounterModeManual)
		ae.Uint32(uint16(AttrResLQPN), lqpn)
		if counterID != 0 {
			ae.Uint32(uint16(AttrStatCounterID), counterID)
		}
	})
	if err != nil {
		return 0, wrap(fmt.Sprintf("bind QP %d to a counter", lqpn), err, func(errno unix.Errno) string {
			switch errno {
			case unix.ENOENT:
				return fmt.Sprintf("no QP %d on this port", lqpn)
			case unix.EOPNOTSUPP, unix.EINVAL:
				// rxe answers EINVAL: it has no counter operations.
				return fmt.Sprintf("the device cannot bind QPs to counters, or QP %d is not on this port", lqpn)
			}
			return ""
		})
	}
	id := counterID
	for _, m := range msgs {
		if m.Header.Type != MessageType(CmdStatSet) {
			continue
		}
		_ = decodeMessage(m.Data, func(ad *netlink.AttributeDecoder) error {
			for ad.Next() {
				if Attr(ad.Type()) == AttrStatCounterID {
					id = ad.Uint32()
				}
			}
			return ad.Err()
		})
	}
	return id, nil
}

// UnbindQPCounter unbinds QP lqpn from counter counterID. Equivalent to
// `rdma statistic qp unbind link DEV/PORT cntn C lqpn Q`.
func (c *Client) UnbindQPCounter(devIndex, port, lqpn, counterID uint32) error {
	_, err := c.execute(CmdStatDel, statSetAck, func(ae *netlink.AttributeEncoder) {
		devPortAttrs(devIndex, port)(ae)
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
		ae.Uint32(uint16(AttrStatMode), CounterModeManual)
		ae.Uint32(uint16(AttrStatCounterID), counterID)
		ae.Uint32(uint16(AttrResLQPN), lqpn)
	})
	return wrap(fmt.Sprintf("unbind QP %d from counter %d", lqpn, counterID), err, func(errno unix.Errno) string {
		if errno == unix.ENOENT {
			return fmt.Sprintf("QP %d is not bound to counter %d", lqpn, counterID)
		}
		return ""
	})
}
