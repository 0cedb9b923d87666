package nldev

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// MRCounters is the counter set of one memory region (on-demand paging
// counters on mlx5, say). Equivalent to a line of `rdma statistic mr`.
type MRCounters struct {
	DevIndex uint32
	Device   string
	MRN      uint32 // Has(AttrResMRN)
	Counters []Counter

	attrSet
}

func (m *MRCounters) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrDevIndex:
			m.DevIndex = ad.Uint32()
		case AttrDevName:
			m.Device = ad.String()
		case AttrResMRN:
			m.MRN = ad.Uint32()
		case AttrStatHWCounters:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeCounters(nad, &m.Counters) })
		default:
			continue
		}
		m.add(a)
	}
	return ad.Err()
}

// statMRAttrs encodes an MR counter request in rdma's order
// (_res_send_msg, _res_send_idx_msg in rdma/res.c).
func statMRAttrs(q ResQuery, id *uint32) func(ae *netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		if id != nil {
			ae.Uint32(uint16(AttrDevIndex), q.DevIndex)
			ae.Uint32(uint16(AttrResMRN), *id)
			ae.Uint8(uint16(AttrDriverDetails), boolByte(q.DriverDetails))
		} else {
			ae.Uint8(uint16(AttrDriverDetails), boolByte(q.DriverDetails))
			ae.Uint32(uint16(AttrDevIndex), q.DevIndex)
		}
		ae.Uint32(uint16(AttrStatRes), uint32(AttrResMR))
	}
}

func statMRExplain(errno unix.Errno) string {
	switch errno {
	case unix.EINVAL, unix.EOPNOTSUPP:
		return "the device has no MR counters (only drivers that count per MR, such as mlx5, have them)"
	case unix.ENOENT:
		return "no such MR"
	}
	return ""
}

// MRCounterList streams the counters of every MR of device q.DevIndex.
// Equivalent to one device of `rdma statistic mr`.
func (c *Client) MRCounterList(q ResQuery, fn func(*MRCounters) error) error {
	err := c.dumpTable(CmdStatGet, statMRAttrs(q, nil), ResMR.kind(), func(dev uint32, name string, entry []byte, _ *interner) error {
		m := MRCounters{DevIndex: dev, Device: name}
		m.add(AttrDevIndex)
		m.add(AttrDevName)
		if err := decodeMessage(entry, m.decode); err != nil {
			return err
		}
		return fn(&m)
	})
	return wrap(fmt.Sprintf("list MR counters of RDMA device %d", q.DevIndex), err, statMRExplain)
}

// MRCountersOf returns the counters of MR mrn of device q.DevIndex with one
// request. Equivalent to `rdma statistic mr mrn N` on one device.
func (c *Client) MRCountersOf(q ResQuery, mrn uint32) (MRCounters, error) {
	var m MRCounters
	err := c.get(CmdStatGet, statMRAttrs(q, &mrn), m.decode)
	return m, wrap(fmt.Sprintf("get counters of MR %d of RDMA device %d", mrn, q.DevIndex), err, statMRExplain)
}

// MRCounterFilter is `rdma statistic mr`'s one filter, mrn; a nil list
// does not filter.
type MRCounterFilter struct{ MRNs NumList }

// Match reports whether rdma prints m: an MR without a number never
// matches an mrn filter.
func (f *MRCounterFilter) Match(m *MRCounters) bool {
	return f.MRNs == nil || m.Has(AttrResMRN) && f.MRNs.Contains(uint64(m.MRN))
}

// MRCounterLists lists the MR counters of the devices named (all when
// dev is ""), as `rdma statistic mr [dev DEV] [mrn N]` does: one plain
// mrn is looked up directly (dumping on kernels without the lookup, as
// rdma does), anything else dumped per device; a device that vanishes
// while every device is listed is skipped.
func (c *Client) MRCounterLists(dev string, f MRCounterFilter, fn func(*MRCounters) error) error {
	devs, err := c.devicesNamed(dev)
	if err != nil {
		return err
	}
	for _, d := range devs {
		q := ResQuery{DevIndex: d.Index}
		err := c.mrCounterDevice(q, f, fn)
		if err != nil && !(dev == "" && c.Gone(d.Index, err)) {
			return err
		}
	}
	return nil
}

func (c *Client) mrCounterDevice(q ResQuery, f MRCounterFilter, fn func(*MRCounters) error) error {
	if n, ok := f.MRNs.single(); ok {
		m, err := c.MRCountersOf(q, n)
		if err == nil {
			return fn(&m)
		}
		if err = ignoreMissing(err); err == nil {
			return nil
		}
	}
	return c.MRCounterList(q, func(m *MRCounters) error {
		if f.Match(m) {
			return fn(m)
		}
		return nil
	})
}
