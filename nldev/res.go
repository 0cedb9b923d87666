package nldev

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ResType is a kind of object the kernel's resource tracker (restrack)
// lists: the objects of `rdma resource show`.
type ResType uint8

// Resource types.
const (
	ResQP ResType = iota + 1
	ResCMID
	ResCQ
	ResMR
	ResPD
	ResCtx
	ResSRQ
)

// resKind is how one resource type appears on the wire.
type resKind struct {
	name   string  // rdma's object word
	cmd    Command // RES_*_GET
	rawCmd Command // RES_*_GET_RAW, 0 if none
	table  Attr    // the dump's nested table, e.g. RES_QP
	entry  Attr    // one object in it, e.g. RES_QP_ENTRY
	id     Attr    // the object number a doit asks for, e.g. RES_LQPN
	// perPort objects (QPs, CM IDs) may be bound to a port; the kernel
	// filters them by PORT_INDEX and its doit requires one.
	perPort bool
}

var resKinds = [...]resKind{
	ResQP:   {"qp", CmdResQPGet, CmdResQPGetRaw, AttrResQP, AttrResQPEntry, AttrResLQPN, true},
	ResCMID: {"cm_id", CmdResCMIDGet, 0, AttrResCMID, AttrResCMIDEntry, AttrResCMIDN, true},
	ResCQ:   {"cq", CmdResCQGet, CmdResCQGetRaw, AttrResCQ, AttrResCQEntry, AttrResCQN, false},
	ResMR:   {"mr", CmdResMRGet, CmdResMRGetRaw, AttrResMR, AttrResMREntry, AttrResMRN, false},
	ResPD:   {"pd", CmdResPDGet, 0, AttrResPD, AttrResPDEntry, AttrResPDN, false},
	ResCtx:  {"ctx", CmdResCtxGet, 0, AttrResCtx, AttrResCtxEntry, AttrResCtxN, false},
	ResSRQ:  {"srq", CmdResSRQGet, CmdResSRQGetRaw, AttrResSRQ, AttrResSRQEntry, AttrResSRQN, false},
}

func (t ResType) kind() *resKind {
	if int(t) < len(resKinds) && resKinds[t].name != "" {
		return &resKinds[t]
	}
	return &resKind{name: fmt.Sprintf("resource type %d", t)}
}

// String returns rdma's name of the object: qp, cm_id, cq, mr, pd, ctx, srq.
func (t ResType) String() string { return t.kind().name }

// PerPort reports whether objects of this type belong to a port (QPs and
// CM IDs) rather than to the whole device.
func (t ResType) PerPort() bool { return t.kind().perPort }

// HasRaw reports whether the kernel has a _RAW dump of this type, which
// returns the driver's own binary description of each object.
func (t ResType) HasRaw() bool { return t.kind().rawCmd != 0 }

// ResTypes lists every resource type, in rdma's order.
var ResTypes = []ResType{ResQP, ResCMID, ResCQ, ResMR, ResPD, ResCtx, ResSRQ}

// Commands returns the commands that list objects of type t: RES_*_GET
// and RES_*_GET_RAW (0 if the kernel has none).
func (t ResType) Commands() (get, raw Command) { return t.kind().cmd, t.kind().rawCmd }

// IDAttr is the attribute that numbers objects of type t (RES_LQPN,
// RES_CQN, ...), which a lookup by number sends.
func (t ResType) IDAttr() Attr { return t.kind().id }

// ResTypeOf returns the resource type cmd lists (plain or raw), or 0.
func ResTypeOf(cmd Command) ResType {
	for _, t := range ResTypes {
		if get, raw := t.Commands(); cmd == get || cmd == raw && raw != 0 {
			return t
		}
	}
	return 0
}

// ResQuery selects the objects a resource request returns.
type ResQuery struct {
	DevIndex uint32 // the kernel lists one device per request
	// Port limits QPs and CM IDs to those bound to this port; 0 means all,
	// including objects bound to no port yet. Other types have no port.
	Port uint32
	// DriverDetails asks for driver-internal objects and the driver's
	// attributes of each object (rdma -dd).
	DriverDetails bool
}

// encode writes the request attributes in rdma's order.
func (q ResQuery) encode(id Attr, idValue uint32) func(ae *netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		ae.Uint8(uint16(AttrDriverDetails), boolByte(q.DriverDetails))
		ae.Uint32(uint16(AttrDevIndex), q.DevIndex)
		if q.Port != 0 {
			ae.Uint32(uint16(AttrPortIndex), q.Port)
		}
		if id != 0 {
			ae.Uint32(uint16(id), idValue)
		}
	}
}

// Resource is what every tracked object reports besides its own fields:
// its device, its port (QPs and CM IDs), its owner and, with driver
// details, the driver's attributes.
type Resource struct {
	DevIndex uint32
	Device   string
	Port     uint32 // QPs, CM IDs: Has(AttrPortIndex) once bound to a port
	PID      uint32 // user objects: the owner, in the caller's pid namespace
	KernName string // kernel objects: the owning module, e.g. "ib_core"
	// Driver holds the driver's attributes in the kernel's order (only
	// with ResQuery.DriverDetails, and only from drivers that have any).
	Driver []DriverAttr

	attrSet
}

// IsKernel reports whether a kernel module, not a process, owns the object.
func (r *Resource) IsKernel() bool { return r.Has(AttrResKernName) && !r.Has(AttrResPID) }

func (r *Resource) reset() {
	*r = Resource{Driver: r.Driver[:0]}
}

// decodeAttr takes the attributes every object type shares.
func (r *Resource) decodeAttr(typ Attr, v attrValue, in *interner) bool {
	switch typ {
	case AttrDevIndex:
		r.DevIndex = v.u32()
	case AttrDevName:
		r.Device = in.str(v.strz())
	case AttrPortIndex:
		r.Port = v.u32()
	case AttrResPID:
		r.PID = v.u32()
	case AttrResKernName:
		r.KernName = in.str(v.strz())
	case AttrDriver:
		r.Driver = decodeDriverAttrs(r.Driver, v, in)
	default:
		return false
	}
	return true
}

// DriverAttr is one driver attribute: a name and a typed value, printed
// by rdma -dd as drv_NAME.
type DriverAttr struct {
	Key  string
	Kind Attr // AttrDriverString, AttrDriverS32, AttrDriverU32, AttrDriverS64 or AttrDriverU64
	Hex  bool // the driver asks for hexadecimal (RDMA_NLDEV_PRINT_TYPE_HEX)
	Str  string
	Num  uint64 // the value's bits; signed kinds are sign-extended
}

// Int returns a signed value (AttrDriverS32, AttrDriverS64).
func (d DriverAttr) Int() int64 { return int64(d.Num) }

// decodeDriverAttrs reads the flat {key, [print type], value} tuples the
// kernel puts in RDMA_NLDEV_ATTR_DRIVER; it stops at anything else, as
// rdma does.
func decodeDriverAttrs(out []DriverAttr, b []byte, in *interner) []DriverAttr {
	var cur DriverAttr
	haveKey := false
	for a := newAttrs(b); a.next(); {
		switch {
		case !haveKey:
			if a.typ != AttrDriverString {
				return out
			}
			cur = DriverAttr{Key: in.str(a.val.strz())}
			haveKey = true
			continue
		case a.typ == AttrDriverPrintType:
			cur.Hex = a.val.u8() == 1
			continue
		case a.typ == AttrDriverString:
			cur.Str = in.str(a.val.strz())
		case a.typ == AttrDriverS32:
			cur.Num = uint64(int64(int32(a.val.u32())))
		case a.typ == AttrDriverU32:
			cur.Num = uint64(a.val.u32())
		case a.typ == AttrDriverS64, a.typ == AttrDriverU64:
			cur.Num = a.val.u64()
		default:
			return out
		}
		cur.Kind = a.typ
		out = append(out, cur)
		haveKey = false
	}
	return out
}

// ResObject is a tracked object that a resource request decodes into:
// *QP, *CMID, *CQ, *MR, *PD, *Ctx or *SRQ.
type ResObject interface {
	// Res returns the fields every object type has.
	Res() *Resource
	// ResType tells which request lists objects of this kind.
	ResType() ResType

	reset()
	decodeAttr(typ Attr, v attrValue, in *interner) bool
}

// decodeObject fills obj from the attributes of one object.
func decodeObject(obj ResObject, b []byte, in *interner) error {
	r := obj.Res()
	a := newAttrs(b)
	for a.next() {
		if obj.decodeAttr(a.typ, a.val, in) || r.decodeAttr(a.typ, a.val, in) {
			r.add(a.typ)
		}
	}
	return a.err
}

// resTable walks the objects of one dump message: the device handle,
// then the nested table. fn sees each object's attributes.
func resTable(data []byte, k *resKind, in *interner, fn func(dev uint32, name string, entry []byte) error) error {
	var dev uint32
	var name string
	msg := newAttrs(data)
	for msg.next() {
		switch msg.typ {
		case AttrDevIndex:
			dev = msg.val.u32()
		case AttrDevName:
			name = in.str(msg.val.strz())
		case k.table:
			table := newAttrs(msg.val)
			for table.next() {
				if table.typ != k.entry {
					continue
				}
				if err := fn(dev, name, table.val); err != nil {
					return err
				}
			}
			if table.err != nil {
				return table.err
			}
		}
	}
	return msg.err
}

// callbackError marks an error returned by the caller's callback, which
// is passed back untouched rather than explained as a kernel error.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// resDump streams one dump of cmd, calling fn with the attributes of each
// object. Dumps are read message by message: memory stays flat however
// many objects the kernel returns.
func (c *Client) resDump(t ResType, cmd Command, q ResQuery, fn func(dev uint32, name string, entry []byte) error) error {
	k := t.kind()
	err := c.dumpTable(cmd, q.encode(0, 0), k, func(dev uint32, name string, entry []byte, _ *interner) error {
		return fn(dev, name, entry)
	})
	if errors.Is(err, errInterrupted) {
		// Nothing can be taken back from a stream; the kernel does not
		// mark RES dumps as interrupted today in any case.
		err = ErrDumpInterrupted
	}
	op := fmt.Sprintf("list %s objects of RDMA device %d", k.name, q.DevIndex)
	if cmd == k.rawCmd {
		op = fmt.Sprintf("list raw %s data of RDMA device %d", k.name, q.DevIndex)
	}
	return wrap(op, err, resExplainer(t, cmd, q))
}

// resExplainer explains errnos of resource requests.
func resExplainer(t ResType, cmd Command, q ResQuery) explainer {
	return func(errno unix.Errno) string {
		switch errno {
		case unix.EINVAL:
			if cmd == t.kind().rawCmd {
				return "its driver has no raw form of " + t.String() + " objects (or no such device or port)"
			}
			if q.Port != 0 {
				return fmt.Sprintf("no RDMA device with index %d and port %d", q.DevIndex, q.Port)
			}
			return fmt.Sprintf("no RDMA device with index %d", q.DevIndex)
		case unix.ENOENT:
			return "no such " + t.String() + " object"
		case unix.EAGAIN:
			return "the " + t.String() + " object is not bound to that port"
		}
		return ""
	}
}

// ResDump lists objects of obj's type on one device, in the kernel's
// order, decoding each into obj and calling fn: obj is reused, so copy
// what must outlive the call. Equivalent to one device of
// `rdma res show qp|cm_id|cq|mr|pd|ctx|srq`.
func (c *Client) ResDump(q ResQuery, obj ResObject, fn func() error) error {
	var in interner
	t := obj.ResType()
	return c.resDump(t, t.kind().cmd, q, func(dev uint32, name string, entry []byte) error {
		if err := decodeResEntry(obj, dev, name, entry, &in); err != nil {
			return err
		}
		return fn()
	})
}

// decodeResEntry decodes one dumped object of device dev.
func decodeResEntry(obj ResObject, dev uint32, name string, entry []byte, in *interner) error {
	obj.reset()
	r := obj.Res()
	r.DevIndex, r.Device = dev, name
	r.add(AttrDevIndex)
	r.add(AttrDevName)
	return decodeObject(obj, entry, in)
}

// reorderLimit bounds the bytes ResDumpPortOrder holds back; past it, it
// asks the kernel again port by port instead of holding more.
var reorderLimit = 1 << 20

// ResDumpPortOrder is ResDump in rdma's order: for QPs and CM IDs, first
// the objects bound to no port, then those of port 1, port 2, ... (rdma
// asks once per port). Objects bound to ports are held back, up to 1 MiB
// of them, so one dump usually suffices; beyond that, each port in use is
// dumped again on its own. Equivalent to `rdma res show qp link DEV` and
// `rdma res show cm_id link DEV`.
func (c *Client) ResDumpPortOrder(q ResQuery, obj ResObject, fn func() error) error {
	if !obj.ResType().PerPort() || q.Port != 0 {
		return c.ResDump(q, obj, fn)
	}
	var (
		in       interner
		held     []byte // the attributes of held-back objects, back to back
		heldObjs []heldObject
		ports    []uint32 // ports seen, ascending
		overflow bool
	)
	t := obj.ResType()
	err := c.resDump(t, t.kind().cmd, q, func(dev uint32, name string, entry []byte) error {
		if err := decodeResEntry(obj, dev, name, entry, &in); err != nil {
			return err
		}
		r := obj.Res()
		if !r.Has(AttrPortIndex) {
			return fn()
		}
		if i, found := slices.BinarySearch(ports, r.Port); !found {
			ports = slices.Insert(ports, i, r.Port)
		}
		if overflow || len(held)+len(entry) > reorderLimit {
			overflow, held, heldObjs = true, nil, nil
			return nil
		}
		heldObjs = append(heldObjs, heldObject{port: r.Port, dev: dev, name: name, start: len(held), end: len(held) + len(entry)})
		held = append(held, entry...)
		return nil
	})
	if err != nil {
		return err
	}
	if overflow {
		for _, port := range ports {
			pq := q
			pq.Port = port
			if err := c.ResDump(pq, obj, fn); err != nil {
				return err
			}
		}
		return nil
	}
	slices.SortStableFunc(heldObjs, func(a, b heldObject) int { return cmp.Compare(a.port, b.port) })
	for _, h := range heldObjs {
		if err := decodeResEntry(obj, h.dev, h.name, held[h.start:h.end], &in); err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// heldObject locates one held-back object in ResDumpPortOrder's buffer.
type heldObject struct {
	port       uint32
	dev        uint32
	name       string
	start, end int
}

// ResGet returns one object by its number (lqpn, cm-idn, cqn, mrn, pdn,
// ctxn, srqn) with a single request instead of a dump. QPs and CM IDs are
// looked up on q.Port, which must be set. A missing object is an error
// wrapping ENOENT. Equivalent to rdma's lookup for e.g.
// `rdma res show cq dev DEV cqn N`.
func (c *Client) ResGet(q ResQuery, id uint32, obj ResObject) error {
	t := obj.ResType()
	k := t.kind()
	if k.perPort && q.Port == 0 {
		return &InvalidArgumentError{fmt.Sprintf("looking up a %s by number needs a port", k.name)}
	}
	if !k.perPort {
		q.Port = 0
	}
	var in interner
	err := c.getData(k.cmd, q.encode(k.id, id), func(data []byte) error {
		obj.reset()
		return decodeObject(obj, data, &in)
	})
	return wrap(fmt.Sprintf("get %s %d of RDMA device %d", k.name, id, q.DevIndex), err, resExplainer(t, k.cmd, q))
}

// RawEntry is one object as a _RAW request returns it: the driver's own
// binary description (for mlx5, the device's context dump).
type RawEntry struct {
	Resource
	Data []byte // aliases the reply: copy it to keep it
}

// ResDumpRaw lists the raw form of objects of type t (QP, CQ, MR, SRQ)
// on one device. Needs CAP_NET_ADMIN and a driver that implements it.
// Equivalent to one device of `rdma -r res show qp|cq|mr|srq`.
func (c *Client) ResDumpRaw(t ResType, q ResQuery, fn func(*RawEntry) error) error {
	if !t.HasRaw() {
		return &InvalidArgumentError{"the kernel has no raw form of " + t.String() + " objects"}
	}
	var in interner
	var e RawEntry
	return c.resDump(t, t.kind().rawCmd, q, func(dev uint32, name string, entry []byte) error {
		if err := e.decode(dev, name, entry, &in); err != nil {
			return err
		}
		return fn(&e)
	})
}

// ResGetRaw returns the raw form of one object by its number.
func (c *Client) ResGetRaw(t ResType, q ResQuery, id uint32) (RawEntry, error) {
	var e RawEntry
	if !t.HasRaw() {
		return e, &InvalidArgumentError{"the kernel has no raw form of " + t.String() + " objects"}
	}
	k := t.kind()
	if k.perPort && q.Port == 0 {
		return e, &InvalidArgumentError{fmt.Sprintf("looking up a %s by number needs a port", k.name)}
	}
	var in interner
	err := c.getData(k.rawCmd, q.encode(k.id, id), func(data []byte) error {
		return e.decode(0, "", data, &in)
	})
	return e, wrap(fmt.Sprintf("get raw %s %d of RDMA device %d", k.name, id, q.DevIndex), err, resExplainer(t, k.rawCmd, q))
}

func (e *RawEntry) decode(dev uint32, name string, b []byte, in *interner) error {
	e.Resource.reset()
	e.Data = nil
	if name != "" {
		e.DevIndex, e.Device = dev, name
		e.add(AttrDevIndex)
		e.add(AttrDevName)
	}
	a := newAttrs(b)
	for a.next() {
		switch {
		case a.typ == AttrResRaw:
			e.Data = a.val
		case e.Resource.decodeAttr(a.typ, a.val, in):
		default:
			continue
		}
		e.add(a.typ)
	}
	return a.err
}

// ResCount is one line item of a device's resource summary.
type ResCount struct {
	Name string // "pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"
	Curr uint64
}

// ResSummary counts the tracked objects of one device: a line of
// `rdma res show`.
type ResSummary struct {
	DevIndex uint32
	Device   string
	Counts   []ResCount // in the kernel's order
}

func (s *ResSummary) decode(b []byte, in *interner) error {
	a := newAttrs(b)
	for a.next() {
		switch a.typ {
		case AttrDevIndex:
			s.DevIndex = a.val.u32()
		case AttrDevName:
			s.Device = in.str(a.val.strz())
		case AttrResSummary:
			for e := newAttrs(a.val); e.next(); {
				if e.typ != AttrResSummaryEntry {
					continue
				}
				var cnt ResCount
				var hasName, hasCurr bool
				for f := newAttrs(e.val); f.next(); {
					switch f.typ {
					case AttrResSummaryEntryName:
						cnt.Name, hasName = in.str(f.val.strz()), true
					case AttrResSummaryEntryCurr:
						cnt.Curr, hasCurr = f.val.u64(), true
					}
				}
				if hasName && hasCurr {
					s.Counts = append(s.Counts, cnt)
				}
			}
		}
	}
	return a.err
}

// ResSummaries counts the tracked objects of every device with one dump.
// Equivalent to `rdma res show` (which asks device by device). The dump
// never counts driver-internal objects; ResSummary with driverDetails
// does.
func (c *Client) ResSummaries() ([]ResSummary, error) {
	var out []ResSummary
	var in interner
	err := c.dump(CmdResGet, nil, func() { out = out[:0] }, func(data []byte) error {
		var s ResSummary
		if err := s.decode(data, &in); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, wrap("list RDMA resource counts", err, nil)
}

// ResSummary counts the tracked objects of one device; driverDetails also
// counts driver-internal ones. Equivalent to `rdma [-dd] res show DEV`.
func (c *Client) ResSummary(dev uint32, driverDetails bool) (ResSummary, error) {
	var s ResSummary
	var in interner
	err := c.getData(CmdResGet, ResQuery{DevIndex: dev, DriverDetails: driverDetails}.encode(0, 0), func(data []byte) error {
		return s.decode(data, &in)
	})
	return s, wrap(fmt.Sprintf("count resources of RDMA device %d", dev), err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return "no RDMA device has this index"
		}
		return ""
	})
}
