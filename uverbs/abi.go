package uverbs

import (
	"encoding/binary"

	"github.com/grdma/grdma/ib"
)

// Kernel ABI numbers from include/uapi/rdma/ib_user_verbs.h.
const (
	// ABIVersion is IB_USER_VERBS_ABI_VERSION, which
	// /sys/class/infiniband_verbs/abi_version must show.
	ABIVersion = 6

	cmdGetContext  = 0 // IB_USER_VERBS_CMD_GET_CONTEXT
	cmdQueryDevice = 1 // IB_USER_VERBS_CMD_QUERY_DEVICE
	cmdQueryPort   = 2 // IB_USER_VERBS_CMD_QUERY_PORT

	// The objects of a verbs probe (pd.go, cq.go, qp.go, mr.go).
	cmdAllocPD   = 3  // IB_USER_VERBS_CMD_ALLOC_PD
	cmdDeallocPD = 4  // IB_USER_VERBS_CMD_DEALLOC_PD
	cmdCreateAH  = 5  // IB_USER_VERBS_CMD_CREATE_AH
	cmdDestroyAH = 8  // IB_USER_VERBS_CMD_DESTROY_AH
	cmdRegMR     = 9  // IB_USER_VERBS_CMD_REG_MR
	cmdDeregMR   = 13 // IB_USER_VERBS_CMD_DEREG_MR
	cmdCreateCQ  = 18 // IB_USER_VERBS_CMD_CREATE_CQ
	// Completion events (events.go).
	cmdCreateCompChannel = 17 // IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL
	cmdReqNotifyCQ       = 23 // IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
	cmdDestroyCQ         = 20 // IB_USER_VERBS_CMD_DESTROY_CQ
	cmdCreateQP          = 24 // IB_USER_VERBS_CMD_CREATE_QP
	cmdQueryQP           = 25 // IB_USER_VERBS_CMD_QUERY_QP
	cmdModifyQP          = 26 // IB_USER_VERBS_CMD_MODIFY_QP
	cmdDestroyQP         = 27 // IB_USER_VERBS_CMD_DESTROY_QP
	cmdPostSend          = 28 // IB_USER_VERBS_CMD_POST_SEND
)

var commandNames = map[uint32]string{
	cmdGetContext:        "GET_CONTEXT",
	cmdQueryDevice:       "QUERY_DEVICE",
	cmdQueryPort:         "QUERY_PORT",
	cmdAllocPD:           "ALLOC_PD",
	cmdDeallocPD:         "DEALLOC_PD",
	cmdCreateAH:          "CREATE_AH",
	cmdDestroyAH:         "DESTROY_AH",
	cmdRegMR:             "REG_MR",
	cmdDeregMR:           "DEREG_MR",
	cmdCreateCQ:          "CREATE_CQ",
	cmdCreateCompChannel: "CREATE_COMP_CHANNEL",
	cmdReqNotifyCQ:       "REQ_NOTIFY_CQ",
	cmdDestroyCQ:         "DESTROY_CQ",
	cmdCreateQP:          "CREATE_QP",
	cmdQueryQP:           "QUERY_QP",
	cmdModifyQP:          "MODIFY_QP",
	cmdDestroyQP:         "DESTROY_QP",
	cmdPostSend:          "POST_SEND",
}

// The Go structs below mirror the kernel's field for field, reserved
// fields included, so that their encoding/binary form is the C layout;
// TestLayoutMatchesHeader checks every size and offset against the header.
// A request that has a response starts with Response, the user address the
// kernel copies the response to.

// cmdHdr is struct ib_uverbs_cmd_hdr. InWords counts the whole write() in
// 32-bit words, this header included; OutWords the response buffer.
type cmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// getContextReq is struct ib_uverbs_get_context.
type getContextReq struct{ Response uint64 }

// getContextResp is struct ib_uverbs_get_context_resp.
type getContextResp struct {
	AsyncFD        uint32
	NumCompVectors uint32
}

// queryDeviceReq is struct ib_uverbs_query_device.
type queryDeviceReq struct{ Response uint64 }

// queryPortReq is struct ib_uverbs_query_port.
type queryPortReq struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
}

func (r *getContextReq) setResponse(addr uint64)  { r.Response = addr }
func (r *queryDeviceReq) setResponse(addr uint64) { r.Response = addr }
func (r *queryPortReq) setResponse(addr uint64)   { r.Response = addr }

// BE64 is a big-endian 64-bit field (__be64), such as a GUID.
type BE64 [8]byte

// Uint64 returns the value of b.
func (b BE64) Uint64() uint64 { return binary.BigEndian.Uint64(b[:]) }

// DeviceAttr is struct ib_uverbs_query_device_resp: the device attributes
// QUERY_DEVICE returns, what `ibv_devinfo -v` prints above the ports.
type DeviceAttr struct {
	FWVer                 uint64
	NodeGUID              BE64
	SysImageGUID          BE64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32 // 0xffffff for rxe, 0x02c9 for Mellanox
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWr               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWr              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]uint8
}

// PortAttr is struct ib_uverbs_query_port_resp: the port attributes
// QUERY_PORT returns, what `ibv_devinfo -v` prints for a port.
//
// The write ABI has no room for speeds beyond NDR: the kernel clamps
// ActiveSpeed to NDR (128), and XDR and later exist only as active_speed_ex
// of the ioctl UVERBS_METHOD_QUERY_PORT. Read the port's sysfs rate for
// those.
type PortAttr struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	GIDTblLen     uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         ib.PortState
	MaxMTU        ib.MTU
	ActiveMTU     ib.MTU
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   ib.Width
	ActiveSpeed   uint8 // an ib.Speed up to NDR (128)
	PhysState     ib.PhysState
	LinkLayer     ib.LinkLayer
	Flags         uint8 // IB_UVERBS_QPF_GRH_REQUIRED (1)
	Reserved      uint8
}
