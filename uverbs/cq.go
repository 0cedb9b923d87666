package uverbs

import (
	"errors"
	"fmt"
)

// CQ is a completion queue (ibv_cq).
type CQ struct {
	Handle uint32
	CQE    uint32 // its capacity, which the driver may round up

	// channel is the completion channel its events go to (nil: none),
	// userHandle what they name it by.
	channel    *CompChannel
	userHandle uint64
}

// Channel returns the completion channel the CQ's events go to, or nil.
func (cq CQ) Channel() *CompChannel { return cq.channel }

// CQInit describes a completion queue to create (ibv_create_cq's
// arguments).
type CQInit struct {
	// CQE is the least number of completions it holds.
	CQE uint32
	// Channel receives an event when the armed queue gets a completion
	// (see ReqNotifyCQ); nil for none.
	Channel *CompChannel
	// CompVector is the completion vector (interrupt) the events use,
	// below Context.NumCompVectors.
	CompVector uint32
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
	return c.CreateCQWith(CQInit{CQE: cqe}, driverIn, driverOut)
}

// CreateCQWith is CreateCQ with a completion channel and vector. Use
// CreateRxeCQWith.
func (c *Context) CreateCQWith(init CQInit, driverIn, driverOut []byte) (CQ, error) {
	req := createCQReq{CQE: init.CQE, CompVector: init.CompVector, CompChannel: -1, UserHandle: c.userHandles.Add(1)}
	if ch := init.Channel; ch != nil {
		fd, err := ch.use(c)
		if err != nil {
			return CQ{}, err
		}
		req.CompChannel = int32(fd)
	}
	var resp createCQResp
	if err := c.execute(cmdCreateCQ, &req, driverIn, &resp, driverOut); err != nil {
		return CQ{}, err
	}
	cq := CQ{Handle: resp.CQHandle, CQE: resp.CQE, channel: init.Channel, userHandle: req.UserHandle}
	if cq.channel != nil {
		cq.channel.register(cq.userHandle)
	}
	return cq, nil
}

// DestroyCQ destroys a completion queue (ibv_destroy_cq). The kernel
// refuses while a queue pair still uses it (EBUSY; rxe: EINVAL).
func (c *Context) DestroyCQ(cq CQ) error {
	_, err := c.DestroyCQEvents(cq)
	return err
}

// CQEvents counts the events the kernel delivered for a completion queue
// (struct ib_uverbs_destroy_cq_resp): completion events read from its
// channel, and asynchronous events (CQ errors) read from the context's
// event file.
type CQEvents struct {
	Comp  uint32
	Async uint32
}

// DestroyCQEvents is DestroyCQ, returning the events the kernel delivered
// for the queue over its life. Events read from the channel but not
// waited for are dropped with it.
func (c *Context) DestroyCQEvents(cq CQ) (CQEvents, error) {
	var resp destroyCQResp
	if err := c.execute(cmdDestroyCQ, &destroyCQReq{CQHandle: cq.Handle}, nil, &resp, nil); err != nil {
		return CQEvents{}, err
	}
	if cq.channel != nil {
		cq.channel.forget(cq.userHandle)
	}
	return CQEvents{Comp: resp.CompEventsReported, Async: resp.AsyncEventsReported}, nil
}

// ReqNotifyCQ arms a completion queue (ibv_req_notify_cq): its next
// completion, or with solicitedOnly its next solicited completion (a
// receive of a message sent with SendSolicited, or an error), makes the
// kernel write one event to the queue's channel. Completions already in
// the queue do not: poll after arming. rxe enables the command; mlx5 arms
// through its doorbell record instead (EOPNOTSUPP here).
func (c *Context) ReqNotifyCQ(cq CQ, solicitedOnly bool) error {
	msg, err := reqNotifyCommand(cq, solicitedOnly)
	if err != nil {
		return err
	}
	// No response: a waiter arms its queue after each wake, so it is
	// a data path command (executeQuick).
	return c.executeQuick(cmdReqNotifyCQ, msg)
}

// reqNotifyCommand encodes cq's REQ_NOTIFY_CQ. RxeCQ keeps its own, as
// RxeQP its doorbell (doorbellCommand): encoding it costs allocations at
// every wait that sleeps.
func reqNotifyCommand(cq CQ, solicitedOnly bool) ([]byte, error) {
	if cq.channel == nil {
		return nil, errNoChannel
	}
	req := reqNotifyCQReq{CQHandle: cq.Handle}
	if solicitedOnly {
		req.SolicitedOnly = 1
	}
	return encodeCommand(cmdReqNotifyCQ, &req, nil, 0)
}

// errNoChannel means a completion queue made without a channel was to be
// armed or waited for.
var errNoChannel = errors.New("uverbs: the completion queue has no completion channel")

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
