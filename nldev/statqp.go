package nldev

import (
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// QPCounter is a counter that QPs are bound to (automatically or by
// `rdma statistic qp bind`): its hardware counters summed over its QPs.
type QPCounter struct {
	Resource           // device, port, owner (PID or kernel module)
	ID       uint32    // STAT_COUNTER_ID, rdma's cntn
	Mode     uint32    // CounterModeAuto or CounterModeManual
	AutoMask uint32    // in auto mode, what the QPs were grouped by
	QPType   ib.QPType // with CounterMaskQPType: the QPs' type
	Counters []Counter
	LQPNs    []uint32 // the bound QPs
}

func (q *QPCounter) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrPortIndex:
			q.Port = ad.Uint32()
		case AttrResPID:
			q.PID = ad.Uint32()
		case AttrResKernName:
			q.KernName = ad.String()
		case AttrStatCounterID:
			q.ID = ad.Uint32()
		case AttrStatMode:
			q.Mode = ad.Uint32()
		case AttrStatAutoModeMask:
			q.AutoMask = ad.Uint32()
		case AttrResType:
			q.QPType = ib.QPType(ad.Uint8())
		case AttrStatHWCounters:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeCounters(nad, &q.Counters) })
		case AttrResQP:
			ad.Nested(q.decodeQPs)
		default:
			continue
		}
		q.add(a)
	}
	return ad.Err()
}

// decodeQPs reads the RES_QP table of a counter: entries holding RES_LQPN.
func (q *QPCounter) decodeQPs(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		if Attr(ad.Type()) != AttrResQPEntry {
			continue
		}
		ad.Nested(func(nad *netlink.AttributeDecoder) error {
			for nad.Next() {
				if Attr(nad.Type()) == AttrResLQPN {
					q.LQPNs = append(q.LQPNs, nad.Uint32())
				}
			}
			return nad.Err()
		})
	}
	return ad.Err()
}

// QPCounters streams the QP counters of one port of a device (port 0: of
// every port). Equivalent to `rdma statistic qp show link DEV/PORT`.
func (c *Client) QPCounters(devIndex, port uint32, fn func(*QPCounter) error) error {
	err := c.dump(CmdStatGet, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
		if port != 0 {
			ae.Uint32(uint16(AttrPortIndex), port)
		}
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
	}, func() {}, func(b []byte) error {
		var dev Resource
		return decodeMessage(b, func(ad *netlink.AttributeDecoder) error {
			for ad.Next() {
				switch Attr(ad.Type()) {
				case AttrDevIndex:
					dev.DevIndex = ad.Uint32()
					dev.add(AttrDevIndex)
				case AttrDevName:
					dev.Device = ad.String()
					dev.add(AttrDevName)
				case AttrStatCounter:
					ad.Nested(func(table *netlink.AttributeDecoder) error {
						for table.Next() {
							if Attr(table.Type()) != AttrStatCounterEntry {
								continue
							}
							q := QPCounter{Resource: dev}
							table.Nested(q.decode)
							if err := fn(&q); err != nil {
								return callbackError{err}
							}
						}
						return table.Err()
					})
				}
			}
			return ad.Err()
		})
	})
	if ce, ok := err.(callbackError); ok {
		return ce.err
	}
	return wrap(fmt.Sprintf("list QP counters of RDMA device %d", devIndex), err, func(errno unix.Errno) string {
		if errno == unix.EOPNOTSUPP || errno == unix.EINVAL {
			return "the device has no QP counters"
		}
		return ""
	})
}

// QPCounterFilter selects the counters `rdma statistic qp show` prints:
// its filters cntn, lqpn, pid and qp-type. A nil list does not filter.
type QPCounterFilter struct {
	CounterIDs NumList  // cntn
	LQPNs      NumList  // lqpn
	PIDs       NumList  // pid
	QPTypes    []string // qp-type names, any case
}

// Match reports whether rdma would print counter q (res_counter_line in
// rdma/stat.c): its number, type and owner must match, and with an lqpn
// filter every QP bound to it (a counter with one QP outside the list is
// dropped; one with no QPs is kept). A counter without a type compares
// type 0's name (SMI), as rdma does; one without a pid never matches a
// pid filter.
func (f *QPCounterFilter) Match(q *QPCounter) bool {
	switch {
	case f.CounterIDs != nil && !f.CounterIDs.Contains(uint64(q.ID)):
		return false
	case f.PIDs != nil && (!q.Has(AttrResPID) || !f.PIDs.Contains(uint64(q.PID))):
		return false
	case f.QPTypes != nil && !containsFold(f.QPTypes, q.QPType.String()):
		return false
	}
	if f.LQPNs != nil {
		for _, n := range q.LQPNs {
			if !f.LQPNs.Contains(uint64(n)) {
				return false
			}
		}
	}
	return true
}

// QPCounterOf returns counter counterID of a port with the QPs bound to
// it (STAT_GET with STAT_COUNTER_ID).
func (c *Client) QPCounterOf(devIndex, port, counterID uint32) (QPCounter, error) {
	q := QPCounter{}
	err := c.get(CmdStatGet, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
		ae.Uint32(uint16(AttrPortIndex), port)
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResQP))
		ae.Uint32(uint16(AttrStatCounterID), counterID)
	}, q.decode)
	return q, wrap(fmt.Sprintf("read counter %d of port %d of RDMA device %d", counterID, port, devIndex), err, func(errno unix.Errno) string {
		switch errno {
		case unix.ENOENT:
			return fmt.Sprintf("no counter %d on this port", counterID)
		case unix.EOPNOTSUPP, unix.EINVAL:
			return "the device has no QP counters"
		}
		return ""
	})
}

// UnbindQPCounterAll unbinds every QP bound to counter counterID, one
// STAT_DEL each, and returns the QPs unbound. Equivalent to `rdma
// statistic qp unbind link DEV/PORT cntn C` (no lqpn).
func (c *Client) UnbindQPCounterAll(devIndex, port, counterID uint32) ([]uint32, error) {
	q, err := c.QPCounterOf(devIndex, port, counterID)
	if err != nil {
		return nil, err
	}
	for i, n := range q.LQPNs {
		if err := c.UnbindQPCounter(devIndex, port, n, counterID); err != nil {
			return q.LQPNs[:i], err
		}
	}
	return q.LQPNs, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
