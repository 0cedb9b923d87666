package uverbstest

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/uverbs"
)

// The kernel's side of the uverbs ABI (include/uapi/rdma/ib_user_verbs.h,
// ib_user_ioctl_cmds.h, rdma_user_rxe.h), as the fake reads requests and
// writes responses. It is written from the headers on its own, as the
// kernel is, rather than shared with package uverbs: a layout mistake on
// either side then shows as a failing test instead of two sides agreeing
// on it. The structs the uverbs API exports (DeviceAttr, PortAttr, WC,
// AddressVector, GIDEntry) are the kernel's own layouts and are used as
// they are.

// Write command numbers (enum ib_uverbs_write_cmds).
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdCreateAH          = 5
	cmdDestroyAH         = 8
	cmdRegMR             = 9
	cmdDeregMR           = 13
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdDestroyCQ         = 20
	cmdReqNotifyCQ       = 23
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdPostSend          = 28

	cmdFlagExtended  = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
	exCmdQueryDevice = 1          // IB_USER_VERBS_EX_CMD_QUERY_DEVICE
)

// ioctl objects, methods and attributes (ib_user_ioctl_cmds.h).
const (
	objectDevice = 0 // UVERBS_OBJECT_DEVICE
	objectMR     = 7 // UVERBS_OBJECT_MR

	methodQueryPort     = 2 // UVERBS_METHOD_QUERY_PORT
	methodGetContext    = 3 // UVERBS_METHOD_GET_CONTEXT
	methodQueryGIDTable = 5 // UVERBS_METHOD_QUERY_GID_TABLE
	methodRegDMABufMR   = 4 // UVERBS_METHOD_REG_DMABUF_MR (object MR)

	attrQueryPortPortNum        = 0
	attrQueryPortResp           = 1
	attrGetContextNumCompVecs   = 0
	attrGetContextCoreSupport   = 1
	attrGIDTableEntrySize       = 0
	attrGIDTableFlags           = 1
	attrGIDTableRespEntries     = 2
	attrGIDTableRespNumEntries  = 3
	attrUHWIn                   = 0x1000
	attrUHWOut                  = 0x1001
	attrFlagMandatory           = 1 // UVERBS_ATTR_F_MANDATORY
	coreSupportOptionalMRAccess = 1 // IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS
	gidEntrySize                = 32
	queryPortRespExSize         = 48
)

// rxe driver data and queues (rdma_user_rxe.h, rxe_queue.h).
const (
	mmapInfoSize      = 16  // struct mminfo
	rxeQueueHeader    = 384 // struct rxe_queue_buf without data[]
	rxeProducerOffset = 128
	rxeConsumerOffset = 256
	rxeSendWQESize    = 208 // struct rxe_send_wqe without its SGEs
	rxeRecvWQESize    = 40  // struct rxe_recv_wqe without its SGEs
	sgeSize           = 16  // struct ib_sge, struct rxe_sge
	// rxeCQESize is struct rxe_cqe, the union of struct ib_wc and struct
	// ib_uverbs_wc; the queue rounds it up to a power of two.
	rxeCQESize = 80
	wcSize     = 48 // struct ib_uverbs_wc
	cacheLine  = 64
)

// Offsets in struct rxe_send_wqe and struct rxe_recv_wqe.
const (
	sendWRID       = 0
	sendOpcode     = 12
	sendFlags      = 16
	sendImm        = 20
	sendRemoteAddr = 24
	sendRKey       = 32
	sendIOVA       = 152
	sendDMALength  = 184
	sendNumSGE     = 196
	// The ud member of the union: where the datagram goes, and rxe's
	// AH number or address vector (struct rxe_av).
	sendUDRemoteQPN  = 24
	sendUDRemoteQKey = 28
	sendUDAHNum      = 36
	sendUDAV         = 56
	recvWRID         = 0
	recvDMALength    = 16
	recvNumSGE       = 28
)

// cmdHeader is struct ib_uverbs_cmd_hdr.
type cmdHeader struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// exHeader is struct ib_uverbs_ex_cmd_hdr.
type exHeader struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	Reserved         uint32
}

type queryPortReq struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
}

type handleReq struct{ Handle uint32 } // dealloc_pd, dereg_mr

type regMRReq struct {
	Response, Start, Length, HCAVA uint64
	PDHandle, AccessFlags          uint32
}

type regMRResp struct{ MRHandle, LKey, RKey uint32 }

type createCQReq struct {
	Response, UserHandle uint64
	CQE, CompVector      uint32
	CompChannel          int32
	Reserved             uint32
}

type createCQResp struct{ CQHandle, CQE uint32 }

// destroyReq is destroy_cq, destroy_qp and query_qp (Extra: reserved or
// the attribute mask).
type destroyReq struct {
	Response uint64
	Handle   uint32
	Extra    uint32
}

type reqNotifyCQReq struct{ CQHandle, SolicitedOnly uint32 }

type createQPReq struct {
	Response, UserHandle                                    uint64
	PDHandle, SendCQHandle, RecvCQHandle, SRQHandle         uint32
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInline uint32
	SQSigAll, QPType, IsSRQ, Reserved                       uint8
}

type createQPResp struct {
	QPHandle, QPN                                                     uint32
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInline, Reserved uint32
}

type modifyQPReq struct {
	Dest, AltDest                                                uverbs.AddressVector
	QPHandle, AttrMask, QKey, RQPSN, SQPSN, DestQPN, AccessFlags uint32
	PKeyIndex, AltPKeyIndex                                      uint16
	State, CurState, PathMTU, PathMigState, EnSQDAsyncNotify     uint8
	MaxRdAtomic, MaxDestRdAtomic, MinRNRTimer, PortNum, Timeout  uint8
	RetryCnt, RNRRetry, AltPortNum, AltTimeout                   uint8
	Reserved                                                     [2]uint8
}

type queryQPResp struct {
	Dest, AltDest                                               uverbs.AddressVector
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInline     uint32
	QKey, RQPSN, SQPSN, DestQPN, AccessFlags                    uint32
	PKeyIndex, AltPKeyIndex                                     uint16
	State, CurState, PathMTU, PathMigState, SQDraining          uint8
	MaxRdAtomic, MaxDestRdAtomic, MinRNRTimer, PortNum, Timeout uint8
	RetryCnt, RNRRetry, AltPortNum, AltTimeout, SQSigAll        uint8
	Reserved                                                    [5]uint8
}

// createAHReq is struct ib_uverbs_create_ah.
type createAHReq struct {
	Response, UserHandle uint64
	PDHandle, Reserved   uint32
	Attr                 ahAttr
}

// ahAttr is struct ib_uverbs_ah_attr.
type ahAttr struct {
	DGID                                                     [16]byte
	FlowLabel                                                uint32
	SGIDIndex, HopLimit, TrafficClass, Reserved1             uint8
	DLID                                                     uint16
	SL, SrcPathBits, StaticRate, IsGlobal, PortNum, Reserved uint8
}

// Offsets in struct rxe_av (the address vector of a UD send work request
// on kernels before 5.10).
const (
	avNetworkType = 1
	avDGID        = 8
	avFlowLabel   = 24
	avSGIDIndex   = 28
	avHopLimit    = 29
	avTClass      = 30
	avSGIDAddr    = 32
	avDGIDAddr    = 60
	avSize        = 88
)

type postSendReq struct {
	Response                             uint64
	QPHandle, WRCount, SGECount, WQESize uint32
}

type mmapInfo struct {
	Offset uint64
	Size   uint32
	Pad    uint32
}

// ioctlHeader is struct ib_uverbs_ioctl_hdr; ioctlAttr struct
// ib_uverbs_attr.
type ioctlHeader struct {
	Length, ObjectID, MethodID, NumAttrs uint16
	Reserved1                            uint64
	DriverID, Reserved2                  uint32
}

type ioctlAttr struct {
	AttrID, Len, Flags, AttrData uint16
	Data                         uint64
}

const (
	ioctlHeaderSize = 24
	ioctlAttrSize   = 16
)

// size is the encoded size of a fixed-size struct.
func size(v any) int { return binary.Size(v) }

// decode reads a request struct from b, which must be long enough.
func decode(b []byte, v any) {
	if _, err := binary.Decode(b, binary.NativeEndian, v); err != nil {
		panic(err) // the caller checked the length: a bug
	}
}

func encode(v any) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

// userBytes is n bytes of this process's memory at addr, what the kernel
// reaches with copy_from_user and copy_to_user: the response buffers and
// registered memory the client named by address.
func userBytes(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	// A user address is an integer in the ABI; the fake lives in the
	// same process, so it is a pointer here.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// guarded runs fn, turning a memory fault into EFAULT, as copy_to_user
// and copy_from_user fail on an address that is not mapped.
func guarded(fn func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				err = unix.EFAULT
				return
			}
			panic(r)
		}
	}()
	fn()
	runtime.KeepAlive(fn)
	return nil
}

// copyToUser writes b at addr.
func copyToUser(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if addr == 0 {
		return unix.EFAULT
	}
	return guarded(func() { copy(userBytes(addr, len(b)), b) })
}

// copyFromUser reads n bytes at addr.
func copyFromUser(addr uint64, n int) ([]byte, error) {
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if addr == 0 {
		return nil, unix.EFAULT
	}
	err := guarded(func() { copy(b, userBytes(addr, n)) })
	return b, err
}
