package uverbs

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/grdma/grdma/ib"
)

// QPCap is what a queue pair can hold: work requests, scatter/gather
// entries per request and inline data, per queue.
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPInit describes a queue pair to create (ibv_qp_init_attr).
type QPInit struct {
	PD     PD
	SendCQ CQ
	RecvCQ CQ
	Type   ib.QPType
	Cap    QPCap
	// SignalAll makes every send request produce a completion, as if it
	// had the SIGNALED flag (sq_sig_all).
	SignalAll bool
}

// QP is a queue pair (ibv_qp): QPN is its number on the wire, Cap what the
// driver gave it (at least what was asked).
type QP struct {
	Handle uint32
	QPN    uint32
	Cap    QPCap
}

// QPAttrMask selects the attributes a MODIFY_QP sets or a QUERY_QP
// returns (enum ib_qp_attr_mask).
type QPAttrMask uint32

// Queue pair attributes.
const (
	QPAttrState QPAttrMask = 1 << iota
	QPAttrCurState
	QPAttrEnSQDAsyncNotify
	QPAttrAccessFlags
	QPAttrPKeyIndex
	QPAttrPort
	QPAttrQKey
	QPAttrAV
	QPAttrPathMTU
	QPAttrTimeout
	QPAttrRetryCnt
	QPAttrRNRRetry
	QPAttrRQPSN
	QPAttrMaxQPRdAtomic
	QPAttrAltPath
	QPAttrMinRNRTimer
	QPAttrSQPSN
	QPAttrMaxDestRdAtomic
	QPAttrPathMigState
	QPAttrCap
	QPAttrDestQPN

	// QPAttrAll is every attribute the write ABI knows
	// (IB_QP_ATTR_STANDARD_BITS); the kernel refuses others.
	QPAttrAll QPAttrMask = 1<<21 - 1
)

// The attributes ib_modify_qp_is_ok requires for each step of connecting
// a reliable connected queue pair.
const (
	QPAttrsResetToInit = QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
	QPAttrsInitToRTR   = QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN |
		QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	QPAttrsRTRToRTS = QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN |
		QPAttrMaxQPRdAtomic
)

// String lists the attribute names, e.g. "STATE|PKEY_INDEX|PORT".
func (m QPAttrMask) String() string {
	names := [...]string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX",
		"PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN",
		"MAX_QP_RD_ATOMIC", "ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC",
		"PATH_MIG_STATE", "CAP", "DEST_QPN"}
	var set []string
	for i, n := range names {
		if m&(1<<i) != 0 {
			set = append(set, n)
		}
	}
	if rest := m &^ QPAttrAll; rest != 0 {
		set = append(set, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(set, "|")
}

// AddressVector is struct ib_uverbs_qp_dest: where a connected queue pair
// sends. On RoCE it must be global (IsGlobal 1) and name a source GID; on
// InfiniBand DLID is the destination port's LID.
type AddressVector struct {
	DGID         [16]byte
	FlowLabel    uint32
	DLID         uint16
	Reserved     uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

// QPAttr holds queue pair attributes (ibv_qp_attr) for ModifyQP and from
// QueryQP; a QPAttrMask says which are meant.
type QPAttr struct {
	State            ib.QPState
	CurState         ib.QPState
	PathMTU          ib.MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32 // 24 bits
	SQPSN            uint32 // 24 bits
	DestQPN          uint32
	AccessFlags      Access
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8 // QueryQP only
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	AV               AddressVector
	AltAV            AddressVector
	Cap              QPCap // QueryQP only
	SQSigAll         uint8 // QueryQP only
}

// createQPReq is struct ib_uverbs_create_qp.
type createQPReq struct {
	Response      uint64
	UserHandle    uint64
	PDHandle      uint32
	SendCQHandle  uint32
	RecvCQHandle  uint32
	SRQHandle     uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	SQSigAll      uint8
	QPType        uint8
	IsSRQ         uint8
	Reserved      uint8
}

// createQPResp is struct ib_uverbs_create_qp_resp.
type createQPResp struct {
	QPHandle      uint32
	QPN           uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// modifyQPReq is struct ib_uverbs_modify_qp; MODIFY_QP has no response.
type modifyQPReq struct {
	Dest             AddressVector
	AltDest          AddressVector
	QPHandle         uint32
	AttrMask         uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	QPState          uint8
	CurQPState       uint8
	PathMTU          uint8
	PathMigState     uint8
	EnSQDAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
}

// queryQPReq is struct ib_uverbs_query_qp.
type queryQPReq struct {
	Response uint64
	QPHandle uint32
	AttrMask uint32
}

// queryQPResp is struct ib_uverbs_query_qp_resp.
type queryQPResp struct {
	Dest            AddressVector
	AltDest         AddressVector
	MaxSendWR       uint32
	MaxRecvWR       uint32
	MaxSendSGE      uint32
	MaxRecvSGE      uint32
	MaxInlineData   uint32
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPNum       uint32
	QPAccessFlags   uint32
	PKeyIndex       uint16
	AltPKeyIndex    uint16
	QPState         uint8
	CurQPState      uint8
	PathMTU         uint8
	PathMigState    uint8
	SQDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SQSigAll        uint8
	Reserved        [5]uint8
}

// destroyQPReq is struct ib_uverbs_destroy_qp.
type destroyQPReq struct {
	Response uint64
	QPHandle uint32
	Reserved uint32
}

// destroyQPResp is struct ib_uverbs_destroy_qp_resp.
type destroyQPResp struct{ EventsReported uint32 }

// postSendReq is struct ib_uverbs_post_send without work requests.
type postSendReq struct {
	Response uint64
	QPHandle uint32
	WRCount  uint32
	SGECount uint32
	WQESize  uint32
}

// postSendResp is struct ib_uverbs_post_send_resp.
type postSendResp struct{ BadWR uint32 }

func (r *createQPReq) setResponse(addr uint64)  { r.Response = addr }
func (r *queryQPReq) setResponse(addr uint64)   { r.Response = addr }
func (r *destroyQPReq) setResponse(addr uint64) { r.Response = addr }
func (r *postSendReq) setResponse(addr uint64)  { r.Response = addr }

// CreateQP creates a queue pair (ibv_create_qp) in the RESET state.
// driverIn is the driver's request data and driverOut receives its
// response data: rxe answers where to mmap the queues and takes no
// request data, mlx5 needs the queues' buffer and doorbell addresses. Use
// CreateRxeQP or CreateMlx5QP.
func (c *Context) CreateQP(init QPInit, driverIn, driverOut []byte) (QP, error) {
	req := createQPReq{
		PDHandle: init.PD.Handle, SendCQHandle: init.SendCQ.Handle, RecvCQHandle: init.RecvCQ.Handle,
		MaxSendWR: init.Cap.MaxSendWR, MaxRecvWR: init.Cap.MaxRecvWR,
		MaxSendSGE: init.Cap.MaxSendSGE, MaxRecvSGE: init.Cap.MaxRecvSGE, MaxInlineData: init.Cap.MaxInlineData,
		QPType: uint8(init.Type),
	}
	if init.SignalAll {
		req.SQSigAll = 1
	}
	var resp createQPResp
	if err := c.execute(cmdCreateQP, &req, driverIn, &resp, driverOut); err != nil {
		return QP{}, err
	}
	return QP{Handle: resp.QPHandle, QPN: resp.QPN, Cap: QPCap{
		MaxSendWR: resp.MaxSendWR, MaxRecvWR: resp.MaxRecvWR,
		MaxSendSGE: resp.MaxSendSGE, MaxRecvSGE: resp.MaxRecvSGE, MaxInlineData: resp.MaxInlineData,
	}}, nil
}

// ModifyQP sets the attributes of qp that mask selects (ibv_modify_qp),
// typically a state transition: see QPAttrsResetToInit and the others.
func (c *Context) ModifyQP(qp QP, attr *QPAttr, mask QPAttrMask) error {
	req := modifyQPReq{
		Dest: attr.AV, AltDest: attr.AltAV, QPHandle: qp.Handle, AttrMask: uint32(mask),
		QKey: attr.QKey, RQPSN: attr.RQPSN, SQPSN: attr.SQPSN, DestQPNum: attr.DestQPN,
		QPAccessFlags: uint32(attr.AccessFlags), PKeyIndex: attr.PKeyIndex, AltPKeyIndex: attr.AltPKeyIndex,
		QPState: uint8(attr.State), CurQPState: uint8(attr.CurState), PathMTU: uint8(attr.PathMTU),
		PathMigState: attr.PathMigState, EnSQDAsyncNotify: attr.EnSQDAsyncNotify,
		MaxRdAtomic: attr.MaxRdAtomic, MaxDestRdAtomic: attr.MaxDestRdAtomic, MinRNRTimer: attr.MinRNRTimer,
		PortNum: attr.PortNum, Timeout: attr.Timeout, RetryCnt: attr.RetryCnt, RNRRetry: attr.RNRRetry,
		AltPortNum: attr.AltPortNum, AltTimeout: attr.AltTimeout,
	}
	return c.execute(cmdModifyQP, &req, nil, nil, nil)
}

// QueryQP returns the attributes of qp (ibv_query_qp); the kernel fills
// them all whatever mask asks.
func (c *Context) QueryQP(qp QP, mask QPAttrMask) (QPAttr, error) {
	var r queryQPResp
	if err := c.execute(cmdQueryQP, &queryQPReq{QPHandle: qp.Handle, AttrMask: uint32(mask)}, nil, &r, nil); err != nil {
		return QPAttr{}, err
	}
	return QPAttr{
		State: ib.QPState(r.QPState), CurState: ib.QPState(r.CurQPState), PathMTU: ib.MTU(r.PathMTU),
		PathMigState: r.PathMigState, QKey: r.QKey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum,
		AccessFlags: Access(r.QPAccessFlags), PKeyIndex: r.PKeyIndex, AltPKeyIndex: r.AltPKeyIndex,
		SQDraining: r.SQDraining, MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRNRTimer, PortNum: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt,
		RNRRetry: r.RNRRetry, AltPortNum: r.AltPortNum, AltTimeout: r.AltTimeout,
		AV: r.Dest, AltAV: r.AltDest, SQSigAll: r.SQSigAll,
		Cap: QPCap{MaxSendWR: r.MaxSendWR, MaxRecvWR: r.MaxRecvWR, MaxSendSGE: r.MaxSendSGE,
			MaxRecvSGE: r.MaxRecvSGE, MaxInlineData: r.MaxInlineData},
	}, nil
}

// DestroyQP destroys a queue pair (ibv_destroy_qp).
func (c *Context) DestroyQP(qp QP) error {
	var resp destroyQPResp
	return c.execute(cmdDestroyQP, &destroyQPReq{QPHandle: qp.Handle}, nil, &resp, nil)
}

// doorbellWQESize is the wqe_size of a doorbell POST_SEND: what librxe
// sends (sizeof(struct ibv_send_wr)), and at least
// sizeof(struct ib_uverbs_send_wr), which newer kernels check even when
// no work request follows.
const doorbellWQESize = 128

// RingSendDoorbell tells the kernel that qp's send queue has new work
// requests: a POST_SEND without work requests, which is how rxe and siw
// user queue pairs, whose requests are in a queue shared with the kernel,
// start sending (librxe's post_send_db). The queue pair must be in RTS.
func (c *Context) RingSendDoorbell(qp QP) error {
	msg, err := c.doorbellCommand(qp)
	if err != nil {
		return err
	}
	return c.ringDoorbell(msg)
}

// doorbellCommand encodes qp's doorbell POST_SEND once, for ringDoorbell:
// a latency test rings once a work request, and encoding it each time
// costs 350-500 ns and an allocation (BenchmarkDoorbellEncode's figure on
// the 2-core build host, 2026-11-27; many times that on an emulated CPU).
// Its response goes where execute's would, in the context's arena.
func (c *Context) doorbellCommand(qp QP) ([]byte, error) {
	req := postSendReq{Response: c.arenaAddr + arenaSize - maxResponse, QPHandle: qp.Handle, WQESize: doorbellWQESize}
	return encodeCommand(cmdPostSend, &req, nil, int(unsafe.Sizeof(postSendResp{})))
}

// ringDoorbell writes msg, a doorbellCommand of this context, as a data
// path command (executeQuick).
func (c *Context) ringDoorbell(msg []byte) error { return c.executeQuick(cmdPostSend, msg) }
