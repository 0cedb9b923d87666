package nldev

import (
	"encoding/binary"
	"net/netip"

	"github.com/grdma/grdma/ib"
)

// PathMigState is a QP's path migration state (enum ib_mig_state).
type PathMigState uint8

// PathMigStateNames are the names of path migration states in value order.
var PathMigStateNames = []string{"MIGRATED", "REARM", "ARMED"}

// String returns the name rdma prints ("MIGRATED", ...; "UNKNOWN").
func (s PathMigState) String() string { return enumName(PathMigStateNames, int(s)) }

func enumName(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return "UNKNOWN"
}

// QP is a queue pair. Equivalent to a line of `rdma res show qp`.
type QP struct {
	Resource
	LQPN         uint32
	RQPN         uint32 // RC and UC only
	RQPSN        uint32 // RC and UC only
	SQPSN        uint32
	PathMigState PathMigState // RC, UC, XRC only
	Type         ib.QPType
	Subtype      string // ib.QPTypeDriver: the driver's name for it
	State        ib.QPState
	PDN          uint32 // user QPs only
}

// Res returns the fields every object type has.
func (q *QP) Res() *Resource { return &q.Resource }

// ResType is ResQP.
func (*QP) ResType() ResType { return ResQP }

func (q *QP) reset() { *q = QP{Resource: q.Resource}; q.Resource.reset() }

func (q *QP) decodeAttr(typ Attr, v attrValue, in *interner) bool {
	switch typ {
	case AttrResLQPN:
		q.LQPN = v.u32()
	case AttrResRQPN:
		q.RQPN = v.u32()
	case AttrResRQPSN:
		q.RQPSN = v.u32()
	case AttrResSQPSN:
		q.SQPSN = v.u32()
	case AttrResPathMigState:
		q.PathMigState = PathMigState(v.u8())
	case AttrResType:
		q.Type = ib.QPType(v.u8())
	case AttrResSubtype:
		q.Subtype = in.str(v.strz())
	case AttrResState:
		q.State = ib.QPState(v.u8())
	case AttrResPDN:
		q.PDN = v.u32()
	default:
		return false
	}
	return true
}

// CMState is an RDMA CM ID's state (enum rdma_cm_state).
type CMState uint8

// CM ID states.
const (
	CMStateIdle CMState = iota
	CMStateAddrQuery
	CMStateAddrResolved
	CMStateRouteQuery
	CMStateRouteResolved
	CMStateConnect
	CMStateDisconnect
	CMStateAddrBound
	CMStateListen
	CMStateDeviceRemoval
	CMStateDestroying
)

// CMStateNames are the names of CM ID states in value order.
var CMStateNames = []string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING"}

// String returns the name rdma prints ("LISTEN", ...; "UNKNOWN").
func (s CMState) String() string { return enumName(CMStateNames, int(s)) }

// PortSpace is an RDMA CM port space (enum rdma_ucm_port_space).
type PortSpace uint32

// Port spaces.
const (
	PSIPoIB PortSpace = 0x0002
	PSIB    PortSpace = 0x013f
	PSTCP   PortSpace = 0x0106
	PSUDP   PortSpace = 0x0111
)

// String returns the kernel's name of the port space ("TCP", "IB", ...;
// "---" for others). rdma prints PSIB as "IPoIB".
func (ps PortSpace) String() string {
	switch ps {
	case PSIPoIB:
		return "IPoIB"
	case PSIB:
		return "IB"
	case PSTCP:
		return "TCP"
	case PSUDP:
		return "UDP"
	}
	return "---"
}

// CMID is an RDMA connection manager ID. Equivalent to a line of
// `rdma res show cm_id`.
type CMID struct {
	Resource
	ID      uint32    // cm-idn
	LQPN    uint32    // with a QP only
	QPType  ib.QPType // with a QP only
	PS      PortSpace
	State   CMState
	SrcAddr netip.AddrPort // Has(AttrResSrcAddr) and an IPv4/IPv6 family
	DstAddr netip.AddrPort
	// SrcFamily and DstFamily are the address families (AF_INET,
	// AF_INET6, AF_IB, ...) of the addresses, which may not be IP.
	SrcFamily, DstFamily uint16
}

// Res returns the fields every object type has.
func (c *CMID) Res() *Resource { return &c.Resource }

// ResType is ResCMID.
func (*CMID) ResType() ResType { return ResCMID }

func (c *CMID) reset() { *c = CMID{Resource: c.Resource}; c.Resource.reset() }

func (c *CMID) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	switch typ {
	case AttrResCMIDN:
		c.ID = v.u32()
	case AttrResLQPN:
		c.LQPN = v.u32()
	case AttrResType:
		c.QPType = ib.QPType(v.u8())
	case AttrResPS:
		c.PS = PortSpace(v.u32())
	case AttrResState:
		c.State = CMState(v.u8())
	case AttrResSrcAddr:
		c.SrcFamily, c.SrcAddr = sockaddr(v)
	case AttrResDstAddr:
		c.DstFamily, c.DstAddr = sockaddr(v)
	default:
		return false
	}
	return true
}

// sockaddr decodes a struct __kernel_sockaddr_storage: the family in host
// order, the port in network order.
func sockaddr(b []byte) (uint16, netip.AddrPort) {
	const afInet, afInet6 = 2, 10
	if len(b) < 2 {
		return 0, netip.AddrPort{}
	}
	family := binary.NativeEndian.Uint16(b)
	switch {
	case family == afInet && len(b) >= 8:
		return family, netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
	case family == afInet6 && len(b) >= 24:
		return family, netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:]))
	}
	return family, netip.AddrPort{}
}

// PollCtx is how a kernel CQ is polled (enum ib_poll_context, Linux 5.8+).
type PollCtx uint8

// Poll contexts.
const (
	PollSoftIRQ          PollCtx = 0
	PollWorkqueue        PollCtx = 1
	PollUnboundWorkqueue PollCtx = 2
	PollDirect           PollCtx = 3
)

// String returns the kernel's name. rdma's names are one off: it still
// uses the order before Linux 5.8 (see RdmaPollCtxNames).
func (p PollCtx) String() string {
	return enumName([]string{"SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE", "DIRECT"}, int(p))
}

// RdmaPollCtxNames are the names rdma prints for poll context values
// 0..3, from before Linux 5.8 reordered them: rdma calls the context
// PollUnboundWorkqueue "WORKQUEUE".
var RdmaPollCtxNames = []string{"DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"}

// CQ is a completion queue. Equivalent to a line of `rdma res show cq`.
type CQ struct {
	Resource
	CQN     uint32
	CQE     uint32 // size in entries
	Users   uint64 // QPs and SRQs using it
	PollCtx PollCtx
	DIM     uint8  // adaptive moderation: 0 off, 1 on
	CtxN    uint32 // user CQs: the owning context
}

// Res returns the fields every object type has.
func (c *CQ) Res() *Resource { return &c.Resource }

// ResType is ResCQ.
func (*CQ) ResType() ResType { return ResCQ }

func (c *CQ) reset() { *c = CQ{Resource: c.Resource}; c.Resource.reset() }

func (c *CQ) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	switch typ {
	case AttrResCQN:
		c.CQN = v.u32()
	case AttrResCQE:
		c.CQE = v.u32()
	case AttrResUseCnt:
		c.Users = v.u64()
	case AttrResPollCtx:
		c.PollCtx = PollCtx(v.u8())
	case AttrDevDIM:
		c.DIM = v.u8()
	case AttrResCtxN:
		c.CtxN = v.u32()
	default:
		return false
	}
	return true
}

// MR is a memory region. Equivalent to a line of `rdma res show mr`.
// The keys are only reported to callers with CAP_NET_ADMIN.
type MR struct {
	Resource
	MRN  uint32
	RKey uint32
	LKey uint32
	IOVA uint64 // older kernels only
	Len  uint64
	PDN  uint32 // user MRs only
}

// Res returns the fields every object type has.
func (m *MR) Res() *Resource { return &m.Resource }

// ResType is ResMR.
func (*MR) ResType() ResType { return ResMR }

func (m *MR) reset() { *m = MR{Resource: m.Resource}; m.Resource.reset() }

func (m *MR) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	switch typ {
	case AttrResMRN:
		m.MRN = v.u32()
	case AttrResRKey:
		m.RKey = v.u32()
	case AttrResLKey:
		m.LKey = v.u32()
	case AttrResIOVA:
		m.IOVA = v.u64()
	case AttrResMRLen:
		m.Len = v.u64()
	case AttrResPDN:
		m.PDN = v.u32()
	default:
		return false
	}
	return true
}

// PD is a protection domain. Equivalent to a line of `rdma res show pd`.
// The keys are only reported to callers with CAP_NET_ADMIN.
type PD struct {
	Resource
	PDN              uint32
	LocalDMALKey     uint32
	UnsafeGlobalRKey uint32 // PDs made with IB_PD_UNSAFE_GLOBAL_RKEY only
	Users            uint64
	CtxN             uint32 // user PDs only
}

// Res returns the fields every object type has.
func (p *PD) Res() *Resource { return &p.Resource }

// ResType is ResPD.
func (*PD) ResType() ResType { return ResPD }

func (p *PD) reset() { *p = PD{Resource: p.Resource}; p.Resource.reset() }

func (p *PD) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	switch typ {
	case AttrResPDN:
		p.PDN = v.u32()
	case AttrResLocalDMALKey:
		p.LocalDMALKey = v.u32()
	case AttrResUnsafeGlobalRKey:
		p.UnsafeGlobalRKey = v.u32()
	case AttrResUseCnt:
		p.Users = v.u64()
	case AttrResCtxN:
		p.CtxN = v.u32()
	default:
		return false
	}
	return true
}

// Ctx is a user context (an open verbs device). Equivalent to a line of
// `rdma res show ctx`.
type Ctx struct {
	Resource
	CtxN uint32
}

// Res returns the fields every object type has.
func (c *Ctx) Res() *Resource { return &c.Resource }

// ResType is ResCtx.
func (*Ctx) ResType() ResType { return ResCtx }

func (c *Ctx) reset() { *c = Ctx{Resource: c.Resource}; c.Resource.reset() }

func (c *Ctx) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	if typ != AttrResCtxN {
		return false
	}
	c.CtxN = v.u32()
	return true
}

// SRQType is a shared receive queue type (enum ib_srq_type).
type SRQType uint8

// SRQ types.
const (
	SRQTypeBasic SRQType = iota
	SRQTypeXRC
	SRQTypeTM
)

// SRQTypeNames are the names of SRQ types in value order.
var SRQTypeNames = []string{"BASIC", "XRC", "TM"}

// String returns the name rdma prints ("BASIC", ...; "UNKNOWN").
func (t SRQType) String() string { return enumName(SRQTypeNames, int(t)) }

// QPRange is a run of QP numbers, First..Last inclusive.
type QPRange struct{ First, Last uint32 }

// SRQ is a shared receive queue. Equivalent to a line of
// `rdma res show srq`.
type SRQ struct {
	Resource
	SRQN uint32
	Type SRQType
	PDN  uint32
	CQN  uint32 // types with a CQ (XRC, TM) only
	// QPs are the QPs using the SRQ, as the kernel sends them: single
	// numbers and ascending runs (Has(AttrResQP) even when empty).
	QPs []QPRange
}

// Res returns the fields every object type has.
func (s *SRQ) Res() *Resource { return &s.Resource }

// ResType is ResSRQ.
func (*SRQ) ResType() ResType { return ResSRQ }

func (s *SRQ) reset() {
	*s = SRQ{Resource: s.Resource, QPs: s.QPs[:0]}
	s.Resource.reset()
}

func (s *SRQ) decodeAttr(typ Attr, v attrValue, _ *interner) bool {
	switch typ {
	case AttrResSRQN:
		s.SRQN = v.u32()
	case AttrResType:
		s.Type = SRQType(v.u8())
	case AttrResPDN:
		s.PDN = v.u32()
	case AttrResCQN:
		s.CQN = v.u32()
	case AttrResQP:
		for e := newAttrs(v); e.next(); {
			if e.typ != AttrResQPEntry {
				continue
			}
			var r QPRange
			var hasMin, hasMax, hasOne bool
			for f := newAttrs(e.val); f.next(); {
				switch f.typ {
				case AttrResLQPN:
					r.First, r.Last, hasOne = f.val.u32(), f.val.u32(), true
				case AttrMinRange:
					r.First, hasMin = f.val.u32(), true
				case AttrMaxRange:
					r.Last, hasMax = f.val.u32(), true
				}
			}
			if hasOne || hasMin && hasMax {
				s.QPs = append(s.QPs, r)
			}
		}
	default:
		return false
	}
	return true
}
