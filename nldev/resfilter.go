package nldev

import (
	"net/netip"
	"strings"
)

// CommFunc returns the command name of a process (/proc/PID/comm); ok is
// false when it cannot be read. The comm filter and rdma's comm column
// need one.
type CommFunc func(pid uint32) (name string, ok bool)

// OwnerName is the name rdma shows as an object's comm: the process name
// of a user object, the module name of a kernel object.
func OwnerName(r *Resource, comm CommFunc) (string, bool) {
	switch {
	case r.Has(AttrResPID):
		if comm == nil {
			return "", false
		}
		return comm(r.PID)
	case r.Has(AttrResKernName):
		return r.KernName, true
	}
	return "", false
}

// ResField is a field of a resource object that a filter compares
// (ResFilter): a number (Numeric) or a name, as rdma prints it.
type ResField uint8

// Filterable fields. Each object type has its own (ResFieldsOf); a field
// means the same in every object that has it.
const (
	FieldPID          ResField = iota + 1 // the owning process
	FieldComm                             // the owner's name (OwnerName)
	FieldLQPN                             // a QP's number; of an SRQ, the QPs it serves
	FieldRQPN                             // the remote QP number
	FieldSQPSN                            // the send queue PSN
	FieldRQPSN                            // the receive queue PSN
	FieldQPType                           // the QP type (of a CM ID: of its QP)
	FieldPathMigState                     // the path migration state
	FieldState                            // the QP or CM ID state
	FieldPDN                              // the protection domain number
	FieldPS                               // the CM ID's port space, as rdma names it
	FieldSrcAddr                          // the CM ID's source IP address
	FieldSrcPort                          // the CM ID's source port
	FieldDstAddr                          // the CM ID's destination IP address
	FieldDstPort                          // the CM ID's destination port
	FieldCMIDN                            // the CM ID number
	FieldUsers                            // the use count
	FieldPollCtx                          // the CQ's poll context, as rdma names it
	FieldCQN                              // the CQ number
	FieldCtxN                             // the context number
	FieldRKey                             // the MR's remote key
	FieldLKey                             // the MR's local key
	FieldMRLen                            // the MR's length
	FieldMRN                              // the MR number
	FieldSRQN                             // the SRQ number
	FieldSRQType                          // the SRQ type
)

// Numeric reports whether the field is a number (compared with a NumList)
// rather than a name (compared with words).
func (f ResField) Numeric() bool {
	switch f {
	case FieldComm, FieldQPType, FieldPathMigState, FieldState, FieldPS, FieldSrcAddr, FieldDstAddr, FieldPollCtx, FieldSRQType:
		return false
	}
	return true
}

// ResFilter keeps the objects whose Field is in Numbers (a numeric field)
// or is one of Words (a name, compared case-insensitively; an address as
// netip.Addr writes it). A numeric field the object lacks never matches;
// a name it lacks compares the field's zero value, as rdma does (a UD
// QP's path-mig-state is MIGRATED to a filter); comm and addresses it
// lacks never match.
type ResFilter struct {
	Field   ResField
	Numbers NumList
	Words   []string
}

// field reads one field of an object: a number, or a name, and whether
// the object has it.
type field struct {
	num func(o ResObject) (uint64, bool)
	str func(o ResObject, comm CommFunc) (string, bool)
	all bool // every object passes: the SRQ's QP list
}

// resFields are the filterable fields of each object type.
var resFields = map[ResType]map[ResField]field{
	ResQP: {
		FieldLQPN:         numField(AttrResLQPN, func(q *QP) uint64 { return uint64(q.LQPN) }),
		FieldRQPN:         numField(AttrResRQPN, func(q *QP) uint64 { return uint64(q.RQPN) }),
		FieldPID:          pidField,
		FieldSQPSN:        numField(AttrResSQPSN, func(q *QP) uint64 { return uint64(q.SQPSN) }),
		FieldRQPSN:        numField(AttrResRQPSN, func(q *QP) uint64 { return uint64(q.RQPSN) }),
		FieldQPType:       enumField(func(q *QP) string { return q.Type.String() }),
		FieldPathMigState: enumField(func(q *QP) string { return q.PathMigState.String() }),
		FieldState:        enumField(func(q *QP) string { return q.State.String() }),
		FieldPDN:          numField(AttrResPDN, func(q *QP) uint64 { return uint64(q.PDN) }),
		FieldComm:         commField,
	},
	ResCMID: {
		FieldLQPN:    numField(AttrResLQPN, func(c *CMID) uint64 { return uint64(c.LQPN) }),
		FieldQPType:  enumField(func(c *CMID) string { return c.QPType.String() }),
		FieldState:   enumField(func(c *CMID) string { return c.State.String() }),
		FieldPS:      enumField(func(c *CMID) string { return c.PS.RdmaName() }),
		FieldPID:     pidField,
		FieldSrcAddr: addrField(AttrResSrcAddr, func(c *CMID) netip.AddrPort { return c.SrcAddr }),
		FieldSrcPort: portField(AttrResSrcAddr, func(c *CMID) netip.AddrPort { return c.SrcAddr }),
		FieldDstAddr: addrField(AttrResDstAddr, func(c *CMID) netip.AddrPort { return c.DstAddr }),
		FieldDstPort: portField(AttrResDstAddr, func(c *CMID) netip.AddrPort { return c.DstAddr }),
		FieldCMIDN:   numField(AttrResCMIDN, func(c *CMID) uint64 { return uint64(c.ID) }),
		FieldComm:    commField,
	},
	ResCQ: {
		FieldUsers:   numField(AttrResUseCnt, func(c *CQ) uint64 { return c.Users }),
		FieldPollCtx: enumField(func(c *CQ) string { return c.PollCtx.RdmaName() }),
		FieldPID:     pidField,
		FieldCQN:     numField(AttrResCQN, func(c *CQ) uint64 { return uint64(c.CQN) }),
		FieldCtxN:    numField(AttrResCtxN, func(c *CQ) uint64 { return uint64(c.CtxN) }),
		FieldComm:    commField,
	},
	ResMR: {
		FieldRKey:  numField(AttrResRKey, func(m *MR) uint64 { return uint64(m.RKey) }),
		FieldLKey:  numField(AttrResLKey, func(m *MR) uint64 { return uint64(m.LKey) }),
		FieldMRLen: numField(AttrResMRLen, func(m *MR) uint64 { return m.Len }),
		FieldPID:   pidField,
		FieldMRN:   numField(AttrResMRN, func(m *MR) uint64 { return uint64(m.MRN) }),
		FieldPDN:   numField(AttrResPDN, func(m *MR) uint64 { return uint64(m.PDN) }),
		FieldComm:  commField,
	},
	ResPD: {
		FieldUsers: numField(AttrResUseCnt, func(d *PD) uint64 { return d.Users }),
		FieldPID:   pidField,
		FieldCtxN:  numField(AttrResCtxN, func(d *PD) uint64 { return uint64(d.CtxN) }),
		FieldPDN:   numField(AttrResPDN, func(d *PD) uint64 { return uint64(d.PDN) }),
		FieldComm:  commField,
	},
	ResCtx: {
		FieldPID:  pidField,
		FieldCtxN: numField(AttrResCtxN, func(c *Ctx) uint64 { return uint64(c.CtxN) }),
		FieldComm: commField,
	},
	ResSRQ: {
		FieldPID:     pidField,
		FieldSRQN:    numField(AttrResSRQN, func(s *SRQ) uint64 { return uint64(s.SRQN) }),
		FieldSRQType: enumField(func(s *SRQ) string { return s.Type.String() }),
		FieldPDN:     numField(AttrResPDN, func(s *SRQ) uint64 { return uint64(s.PDN) }),
		FieldCQN:     numField(AttrResCQN, func(s *SRQ) uint64 { return uint64(s.CQN) }),
		// FieldLQPN of an SRQ picks the QPs shown inside each SRQ
		// (ResSelect.QPList), not SRQs: every SRQ passes.
		FieldLQPN: {all: true},
		FieldComm: commField,
	},
}

// HasField reports whether objects of type t have field f.
func (t ResType) HasField(f ResField) bool {
	_, ok := resFields[t][f]
	return ok
}

// idField is the field that numbers objects of type t: one value of it
// is a single lookup instead of a dump.
func (t ResType) idField() ResField {
	switch t {
	case ResQP:
		return FieldLQPN
	case ResCMID:
		return FieldCMIDN
	case ResCQ:
		return FieldCQN
	case ResMR:
		return FieldMRN
	case ResPD:
		return FieldPDN
	case ResCtx:
		return FieldCtxN
	case ResSRQ:
		return FieldSRQN
	}
	return 0
}

// RdmaName is the port space name rdma prints: RDMA_PS_IB shows as
// "IPoIB" there, and scripts match on it.
func (ps PortSpace) RdmaName() string {
	if ps == PSIB {
		return "IPoIB"
	}
	return ps.String()
}

// RdmaName is the poll context name rdma prints (its table predates Linux
// 5.8: the kernel's UNBOUND_WORKQUEUE shows as WORKQUEUE).
func (p PollCtx) RdmaName() string {
	if int(p) < len(RdmaPollCtxNames) {
		return RdmaPollCtxNames[p]
	}
	return "UNKNOWN"
}

// Field constructors. T is the object type, e.g. QP; attr is the
// attribute whose presence a numeric value needs (rdma: a numeric filter
// never matches an object lacking the field).

func numField[T any, PT interface {
	*T
	ResObject
}](attr Attr, get func(PT) uint64) field {
	return field{num: func(o ResObject) (uint64, bool) {
		p := o.(PT)
		return get(p), p.Res().Has(attr)
	}}
}

// enumField is an enum field; a missing one reads as its zero value (the
// object was reset), which rdma compares too (rd_is_string_filtered_attr).
func enumField[T any, PT interface {
	*T
	ResObject
}](get func(PT) string) field {
	return field{str: func(o ResObject, _ CommFunc) (string, bool) { return get(o.(PT)), true }}
}

// addrField is a CM ID's IP address (src-addr, dst-addr). A CM ID without
// one never matches (rdma compares an uninitialized buffer).
func addrField(attr Attr, get func(*CMID) netip.AddrPort) field {
	return field{str: func(o ResObject, _ CommFunc) (string, bool) {
		c := o.(*CMID)
		a := get(c)
		return a.Addr().String(), c.Has(attr) && a.IsValid()
	}}
}

// portField is a CM ID's port (src-port, dst-port).
func portField(attr Attr, get func(*CMID) netip.AddrPort) field {
	return field{num: func(o ResObject) (uint64, bool) {
		c := o.(*CMID)
		a := get(c)
		return uint64(a.Port()), c.Has(attr) && a.IsValid()
	}}
}

// pidField and commField apply to every object type.
var (
	pidField = field{num: func(o ResObject) (uint64, bool) {
		r := o.Res()
		return uint64(r.PID), r.Has(AttrResPID)
	}}
	commField = field{str: func(o ResObject, comm CommFunc) (string, bool) { return OwnerName(o.Res(), comm) }}
)

// NumRange is an inclusive range of a numeric filter value.
type NumRange struct{ Lo, Hi uint64 }

// NumList is a numeric filter value: numbers and inclusive ranges.
type NumList []NumRange

// Contains reports whether v is in one of the ranges.
func (l NumList) Contains(v uint64) bool {
	for _, r := range l {
		if r.Lo <= v && v <= r.Hi {
			return true
		}
	}
	return false
}

// single returns the number when the list names exactly one that fits
// in 32 bits.
func (l NumList) single() (uint32, bool) {
	if len(l) != 1 || l[0].Lo != l[0].Hi || l[0].Lo > 0xffffffff {
		return 0, false
	}
	return uint32(l[0].Lo), true
}

// Match reports whether object o passes the filter; a field objects of
// its type do not have matches every object.
func (f *ResFilter) Match(o ResObject, comm CommFunc) bool {
	fd, ok := resFields[o.ResType()][f.Field]
	switch {
	case !ok || fd.all:
		return true
	case fd.num != nil:
		v, ok := fd.num(o)
		return ok && f.Numbers.Contains(v)
	}
	v, ok := fd.str(o, comm)
	if !ok {
		return false
	}
	for _, w := range f.Words {
		if strings.EqualFold(w, v) {
			return true
		}
	}
	return false
}
