package uverbs

import "fmt"

// CQ is a completion queue (ibv_cq).
type CQ struct {
	Handle uint32
	CQE    uint32 // its capacity, which the driver may round up
}

// createCQReq is struct ib_uverbs_create_cq.
type createCQReq struct {
	Response    uint64
	UserHandle  uint64
	CQE         uint32
	CompVector  uint32
	CompChannel int32 // -1: no completion channel
	Reserved    uint32
}

// createCQResp is struct ib_uverbs_create_cq_resp.
type createCQResp struct {
	CQHandle uint32
	CQE      uint32
}

// destroyCQReq is struct ib_uverbs_destroy_cq.
type destroyCQReq struct {
	Response uint64
	CQHandle uint32
	Reserved uint32
}

// destroyCQResp is struct ib_uverbs_destroy_cq_resp.
type destroyCQResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

func (r *createCQReq) setResponse(addr uint64)  { r.Response = addr }
func (r *destroyCQReq) setResponse(addr uint64) { r.Response = addr }

// CreateCQ creates a completion queue of at least cqe entries, without a
// completion channel, on completion vector 0 (ibv_create_cq). driverIn is
// the driver's request data and driverOut receives its response data:
// rxe answers where to mmap the queue, mlx5 needs the queue's buffer and
// doorbell addresses. Use CreateRxeCQ or CreateMlx5CQ.
func (c *Context) CreateCQ(cqe uint32, driverIn, driverOut []byte) (CQ, error) {
	req := createCQReq{CQE: cqe, CompChannel: -1}
	var resp createCQResp
	if err := c.execute(cmdCreateCQ, &req, driverIn, &resp, driverOut); err != nil {
		return CQ{}, err
	}
	return CQ{Handle: resp.CQHandle, CQE: resp.CQE}, nil
}

// DestroyCQ destroys a completion queue (ibv_destroy_cq). The kernel
// refuses while a queue pair still uses it (EBUSY; rxe: EINVAL).
func (c *Context) DestroyCQ(cq CQ) error {
	var resp destroyCQResp
	return c.execute(cmdDestroyCQ, &destroyCQReq{CQHandle: cq.Handle}, nil, &resp, nil)
}

// WC is a work completion, struct ib_uverbs_wc (the layout of ibv_wc):
// the result of one work request.
type WC struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	Ex           uint32 // immediate data (big-endian) or the invalidated rkey
	QPNum        uint32
	SrcQP        uint32
	WCFlags      uint32
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
	Reserved     uint8
}

// WCStatus is the status of a work completion (enum ib_wc_status).
type WCStatus uint32

// Work completion statuses.
const (
	WCSuccess         WCStatus = 0
	WCLocLenErr       WCStatus = 1
	WCLocQPOpErr      WCStatus = 2
	WCLocProtErr      WCStatus = 4
	WCWRFlushErr      WCStatus = 5
	WCRemInvReqErr    WCStatus = 9
	WCRemAccessErr    WCStatus = 10
	WCRemOpErr        WCStatus = 11
	WCRetryExcErr     WCStatus = 12
	WCRNRRetryExcErr  WCStatus = 13
	WCGeneralErr      WCStatus = 21
	wcStatusNameCount          = 22
)

var wcStatusNames = [wcStatusNameCount]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error", "bad response error",
	"local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error",
	"invalid EE context number", "invalid EE context state", "fatal error", "response timeout error",
	"general error",
}

// String returns the status as ibv_wc_status_str does.
func (s WCStatus) String() string {
	if s < wcStatusNameCount {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("unknown status %d", uint32(s))
}

// WCOpcode says what a work completion completed (enum ib_wc_opcode).
type WCOpcode uint32

// Work completion opcodes.
const (
	WCSend      WCOpcode = 0
	WCRDMAWrite WCOpcode = 1
	WCRDMARead  WCOpcode = 2
	WCRecv      WCOpcode = 128
)

// String names the opcode.
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCRecv:
		return "RECV"
	}
	return fmt.Sprintf("opcode %d", uint32(o))
}
