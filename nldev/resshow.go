package nldev

import (
	"errors"

	"github.com/grdma/grdma/ib"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ResSelect is what a `res show OBJECT ...` command line asks for: which
// devices and ports, which objects (package grammar reads one from the
// words of a command line); Client.ResList runs it.
type ResSelect struct {
	Type   ResType
	Device string // "" for every device
	Port   uint32 // 0 for every port
	// Portless (link DEV/-) keeps the QPs and CM IDs bound to no port yet.
	Portless bool
	// Filters must all pass (ResFilter.Match).
	Filters []ResFilter
	// DriverDetails asks for driver-internal objects and the driver's
	// attributes (rdma -dd).
	DriverDetails bool
	// Raw asks for the driver's binary description of each object
	// (rdma -r); only filters on the object number apply.
	Raw bool
}

// QPList returns the SRQ lqpn filter, which picks the QPs shown inside
// each SRQ, or nil.
func (sel *ResSelect) QPList() *ResFilter {
	if sel.Type != ResSRQ {
		return nil
	}
	for i := range sel.Filters {
		if sel.Filters[i].Field == FieldLQPN {
			return &sel.Filters[i]
		}
	}
	return nil
}

// lookup returns the object number to ask for with a single request
// rather than a dump: a filter on the object's number naming exactly one.
// QPs and CM IDs are looked up on a port, and the kernel numbers the
// special QPs 0 and 1 (SMI, GSI) differently from their QPN, so those
// are dumped.
func (sel *ResSelect) lookup(port uint32) (uint32, bool) {
	for i := range sel.Filters {
		f := &sel.Filters[i]
		if f.Field != sel.Type.idField() {
			continue
		}
		n, ok := f.Numbers.single()
		if !ok || sel.Type.PerPort() && port == 0 || sel.Type == ResQP && n <= 1 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// ResList lists the objects sel selects, device by device in index
// order, as `rdma res show OBJECT ...` does: a filter naming one object
// number is a single lookup (dumping instead on kernels without lookups,
// as rdma does), anything else one dump per device (QPs and CM IDs in
// rdma's port order). A device that vanishes while a listing of every
// device runs is skipped. fn sees each matching object (reused: copy what
// must outlive the call); with sel.Raw, raw sees each raw entry instead.
// comm resolves process names for the comm filter; it may be nil.
func (c *Client) ResList(sel ResSelect, comm CommFunc, fn func(ResObject) error, raw func(*RawEntry) error) error {
	devs, err := c.devicesNamed(sel.Device)
	if err != nil {
		return err
	}
	if d := devs; sel.Device != "" && sel.Port > d[0].NumPorts {
		return &ib.NotFoundError{Device: d[0].Name, Port: sel.Port, NumPorts: d[0].NumPorts}
	}
	if sel.Raw && !sel.Type.HasRaw() {
		sel.Raw = false
	}
	for _, d := range devs {
		q := ResQuery{DevIndex: d.Index, Port: sel.Port, DriverDetails: sel.DriverDetails}
		if err := c.resListDevice(sel, q, comm, fn, raw); err != nil {
			if sel.Device == "" && c.Gone(d.Index, err) {
				continue
			}
			return err
		}
	}
	return nil
}

// resListDevice lists the objects of one device.
func (c *Client) resListDevice(sel ResSelect, q ResQuery, comm CommFunc, fn func(ResObject) error, raw func(*RawEntry) error) error {
	n, single := sel.lookup(q.Port)
	if sel.Raw {
		if single {
			e, err := c.ResGetRaw(sel.Type, q, n)
			if err == nil {
				return raw(&e)
			}
			return ignoreMissing(err)
		}
		return c.ResDumpRaw(sel.Type, q, func(e *RawEntry) error {
			if sel.Portless && e.Has(AttrPortIndex) {
				return nil
			}
			return raw(e)
		})
	}
	obj := NewResObject(sel.Type)
	emit := func() error {
		if sel.Portless && obj.Res().Has(AttrPortIndex) {
			return nil
		}
		for i := range sel.Filters {
			if !sel.Filters[i].Match(obj, comm) {
				return nil
			}
		}
		return fn(obj)
	}
	if single {
		err := c.ResGet(q, n, obj)
		if err == nil {
			return emit()
		}
		if err = ignoreMissing(err); err == nil {
			return nil
		}
		// Older kernels have no lookup by number: dump instead, as rdma
		// does.
	}
	if sel.Portless {
		return c.ResDump(q, obj, emit)
	}
	return c.ResDumpPortOrder(q, obj, emit)
}

// devicesNamed returns every device (name "") or the one named.
func (c *Client) devicesNamed(name string) ([]Device, error) {
	devs, err := c.Devices()
	if err != nil || name == "" {
		return devs, err
	}
	d, err := FindDevice(devs, name)
	if err != nil {
		return nil, err
	}
	return []Device{d}, nil
}

// dumpTable streams a per-device dump of cmd whose objects sit in a
// nested table (k.table of k.entry), calling fn with each object's
// attributes; an error of fn comes back untouched.
func (c *Client) dumpTable(cmd Command, encode func(ae *netlink.AttributeEncoder), k *resKind, fn func(dev uint32, name string, entry []byte, in *interner) error) error {
	var in interner
	err := c.dumpOnce(cmd, encode, func(data []byte) error {
		return resTable(data, k, &in, func(dev uint32, name string, entry []byte) error {
			if err := fn(dev, name, entry, &in); err != nil {
				return callbackError{err}
			}
			return nil
		})
	})
	var ce callbackError
	if errors.As(err, &ce) {
		return ce.err
	}
	return err
}

// ignoreMissing drops the errors of a lookup by number that mean "no such
// object here": ENOENT, or EAGAIN for a QP on another port.
func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAGAIN) {
		return nil
	}
	return err
}

// NewResObject returns an empty object of type t for ResDump and ResGet:
// *QP, *CMID, *CQ, *MR, *PD, *Ctx or *SRQ.
func NewResObject(t ResType) ResObject {
	switch t {
	case ResQP:
		return new(QP)
	case ResCMID:
		return new(CMID)
	case ResCQ:
		return new(CQ)
	case ResMR:
		return new(MR)
	case ResPD:
		return new(PD)
	case ResCtx:
		return new(Ctx)
	case ResSRQ:
		return new(SRQ)
	}
	return nil
}
