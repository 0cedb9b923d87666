package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/grdma/grdma/ib"
)

// rxe (Soft-RoCE) user queues live in kernel memory that user space maps
// from the uverbs device (include/uapi/rdma/rdma_user_rxe.h): the driver
// answers CREATE_CQ and CREATE_QP with where to mmap each queue, work
// requests are written into the send and receive queues, completions read
// from the completion queue, and a POST_SEND without work requests tells
// the kernel to look at the send queue. This is what librxe does; no
// other command is needed, and POLL_CQ and POST_RECV are not even enabled
// for rxe.

// mmapInfo is struct mminfo: the mmap offset and size of one rxe queue on
// the uverbs device.
type mmapInfo struct {
	Offset uint64
	Size   uint32
	Pad    uint32
}

// rxeCreateCQResp is struct rxe_create_cq_resp, CREATE_CQ's driver
// response data.
type rxeCreateCQResp struct{ MI mmapInfo }

// rxeCreateQPResp is struct rxe_create_qp_resp, CREATE_QP's driver
// response data.
type rxeCreateQPResp struct {
	RQMI mmapInfo
	SQMI mmapInfo
}

// rxeQueueBuf is the header of struct rxe_queue_buf; the queue's elements
// follow it (data[]). The producer and consumer indexes are on cache lines
// of their own and always lie in [0, IndexMask].
type rxeQueueBuf struct {
	Log2ElemSize  uint32
	IndexMask     uint32
	Pad1          [30]uint32
	ProducerIndex uint32
	Pad2          [31]uint32
	ConsumerIndex uint32
	Pad3          [31]uint32
}

// Where the fields of rxeQueueBuf are in the mapped queue.
const (
	rxeProducerOffset = unsafe.Offsetof(rxeQueueBuf{}.ProducerIndex)
	rxeConsumerOffset = unsafe.Offsetof(rxeQueueBuf{}.ConsumerIndex)
	rxeDataOffset     = unsafe.Sizeof(rxeQueueBuf{})
)

// rxeSendWR is struct rxe_send_wr with the rdma member of its union wr:
// what the kernel reads of a send work request.
type rxeSendWR struct {
	WRID         uint64
	Reserved     uint32
	Opcode       uint32
	SendFlags    uint32
	Ex           uint32 // immediate data (big-endian) or rkey to invalidate
	RemoteAddr   uint64
	RKey         uint32
	RDMAReserved uint32
	UnionRest    [104]byte // the larger members of union wr (ud, atomic, mw)
}

// rxeSendWRUD is struct rxe_send_wr with the ud member of its union wr:
// the send work request of a UD queue pair.
type rxeSendWRUD struct {
	WRID       uint64
	Reserved   uint32
	Opcode     uint32
	SendFlags  uint32
	Ex         uint32
	RemoteQPN  uint32
	RemoteQKey uint32
	PKeyIndex  uint16
	UDReserved uint16
	AHNum      uint32
	Pad        [4]uint32
	AV         rxeAV
}

// rxeDMAInfo is struct rxe_dma_info without its flexible SGE array.
type rxeDMAInfo struct {
	Length    uint32
	Resid     uint32
	CurSGE    uint32
	NumSGE    uint32
	SGEOffset uint32
	Reserved  uint32
}

// rxeSendWQE is struct rxe_send_wqe, a send queue element; its SGEs
// follow it.
type rxeSendWQE struct {
	WR          rxeSendWR
	Status      uint32
	State       uint32
	IOVA        uint64 // the remote address of an RDMA operation
	Mask        uint32 // computed by the kernel
	FirstPSN    uint32
	LastPSN     uint32
	AckLength   uint32
	SSN         uint32
	HasRdAtomic uint32
	DMA         rxeDMAInfo
}

// rxeSendWQEUD is struct rxe_send_wqe of a UD send.
type rxeSendWQEUD struct {
	WR          rxeSendWRUD
	Status      uint32
	State       uint32
	IOVA        uint64
	Mask        uint32
	FirstPSN    uint32
	LastPSN     uint32
	AckLength   uint32
	SSN         uint32
	HasRdAtomic uint32
	DMA         rxeDMAInfo
}

// rxeRecvWQE is struct rxe_recv_wqe, a receive queue element; its SGEs
// follow it.
type rxeRecvWQE struct {
	WRID     uint64
	Reserved uint32
	Padding  uint32
	DMA      rxeDMAInfo
}

// SGE is a scatter/gather element: Length bytes at Addr in the memory
// region whose local key is LKey (struct ib_uverbs_sge, struct rxe_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is what a send work request does (enum ib_wr_opcode).
type WROpcode uint32

// Send work request opcodes.
const (
	WRRDMAWrite        WROpcode = 0
	WRRDMAWriteWithImm WROpcode = 1
	WRSend             WROpcode = 2
	WRSendWithImm      WROpcode = 3
	WRRDMARead         WROpcode = 4
)

// SendFlags modify a send work request (enum ib_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SendWR is a send work request (ibv_send_wr): the SGEs are sent (SEND,
// RDMA WRITE) to, or read (RDMA READ) from, the peer's memory at
// RemoteAddr with RKey, or its next receive buffer for SEND. On a UD
// queue pair a SEND goes to queue pair RemoteQPN at address AH, with
// RemoteQKey (ibv_send_wr's wr.ud), as it is: rxe does not replace a
// Q_Key with its high bit set by the queue pair's own.
type SendWR struct {
	ID         uint64 // returned in the work completion
	Opcode     WROpcode
	Flags      SendFlags
	SGL        []SGE
	RemoteAddr uint64
	RKey       uint32
	ImmData    uint32 // big-endian on the wire, as ibv_send_wr's imm_data

	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32

	// Inline, when set, is the message itself (IBV_SEND_INLINE):
	// PostSend copies it into the request, so the kernel reads no memory
	// region for it — one lookup and copy fewer per message, what
	// perftest's latency tests do — and the bytes may change once
	// PostSend returns. At most the queue pair's Cap.MaxInlineData
	// bytes, with no SGL; not for RDMA READ. PostSend sets SendInline.
	Inline []byte
}

// RecvWR is a receive work request (ibv_recv_wr): where the next incoming
// SEND goes.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// rxeQueue is one mapped rxe queue: a work queue the user produces into,
// or a completion queue the kernel produces into.
type rxeQueue struct {
	kernel    Kernel // what mapped it
	buf       []byte
	elemShift uint32
	indexMask uint32
}

// mapRxeQueue maps the queue mi describes and checks that its header
// describes elements of at least minElem bytes within the mapping.
func (c *Context) mapRxeQueue(what string, mi mmapInfo, minElem uintptr) (*rxeQueue, error) {
	if mi.Size < uint32(rxeDataOffset) {
		return nil, fmt.Errorf("%s: rxe %s queue of %d bytes is too small for its header", c.name, what, mi.Size)
	}
	c.mu.Lock()
	k := c.kernel
	c.mu.Unlock()
	if k == nil {
		return nil, fmt.Errorf("%s: mmap of the rxe %s queue: %w", c.name, what, os.ErrClosed)
	}
	buf, err := k.Mmap(int64(mi.Offset), int(mi.Size))
	if err != nil {
		return nil, fmt.Errorf("%s: mmap of the rxe %s queue (offset %#x, %d bytes): %w", c.name, what, mi.Offset, mi.Size, err)
	}
	q := &rxeQueue{
		kernel:    k,
		buf:       buf,
		elemShift: binary.NativeEndian.Uint32(buf[unsafe.Offsetof(rxeQueueBuf{}.Log2ElemSize):]),
		indexMask: binary.NativeEndian.Uint32(buf[unsafe.Offsetof(rxeQueueBuf{}.IndexMask):]),
	}
	slots := uint64(q.indexMask) + 1
	if q.elemShift >= 32 || slots&(slots-1) != 0 || 1<<q.elemShift < uint64(minElem) ||
		uint64(rxeDataOffset)+slots<<q.elemShift > uint64(len(buf)) {
		k.Munmap(buf)
		return nil, fmt.Errorf("%s: rxe %s queue header makes no sense: %d slots of 2^%d bytes in %d bytes",
			c.name, what, slots, q.elemShift, len(buf))
	}
	return q, nil
}

func (q *rxeQueue) index(offset uintptr) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.buf[offset]))
}

func (q *rxeQueue) slot(i uint32) []byte {
	start := uint64(rxeDataOffset) + uint64(i)<<q.elemShift
	return q.buf[start : start+1<<q.elemShift]
}

// nextFree returns the slot a producer fills next, zeroed, or false when
// the queue is full.
func (q *rxeQueue) nextFree() ([]byte, bool) {
	prod := atomic.LoadUint32(q.index(rxeProducerOffset))
	if atomic.LoadUint32(q.index(rxeConsumerOffset)) == (prod+1)&q.indexMask {
		return nil, false
	}
	s := q.slot(prod & q.indexMask)
	clear(s)
	return s, true
}

// produce hands the slot nextFree returned to the kernel: the atomic store
// orders the slot's contents before the new index, as librxe's release
// store does.
func (q *rxeQueue) produce() {
	prod := atomic.LoadUint32(q.index(rxeProducerOffset))
	atomic.StoreUint32(q.index(rxeProducerOffset), (prod+1)&q.indexMask)
}

// nextFull returns the oldest element the kernel produced, or false when
// the queue is empty.
func (q *rxeQueue) nextFull() ([]byte, bool) {
	cons := atomic.LoadUint32(q.index(rxeConsumerOffset))
	if atomic.LoadUint32(q.index(rxeProducerOffset)) == cons {
		return nil, false
	}
	return q.slot(cons & q.indexMask), true
}

// consume gives the element nextFull returned back to the kernel.
func (q *rxeQueue) consume() {
	cons := atomic.LoadUint32(q.index(rxeConsumerOffset))
	atomic.StoreUint32(q.index(rxeConsumerOffset), (cons+1)&q.indexMask)
}

func (q *rxeQueue) unmap() error {
	if q == nil || q.buf == nil {
		return nil
	}
	err := q.kernel.Munmap(q.buf)
	q.buf = nil
	return err
}

// RxeCQ is an rxe completion queue with its mapped queue. Poll and the
// waits are for one goroutine at a time (the queue has one consumer
// index).
type RxeCQ struct {
	cq    CQ
	c     *Context
	queue *rxeQueue
	// armed is how the queue is armed since its last event was taken.
	armed armMode
	// arms are the REQ_NOTIFY_CQ commands of each mode
	// (reqNotifyCommand); none without a channel.
	arms [armedNext + 1][]byte
	// unsure: the queue was armed or waited for other than by waitSole,
	// which then cannot know what events its channel holds.
	unsure bool
}

// armMode is what arms a completion queue, weakest first.
type armMode uint8

const (
	disarmed armMode = iota
	armedSolicited
	armedNext
)

// CQ returns the completion queue.
func (cq *RxeCQ) CQ() CQ { return cq.cq }

// CreateRxeCQ creates a completion queue of at least cqe entries on an rxe
// device and maps it. Nothing is left behind on failure.
func (c *Context) CreateRxeCQ(cqe uint32) (*RxeCQ, error) {
	return c.CreateRxeCQWith(CQInit{CQE: cqe})
}

// CreateRxeCQWith is CreateRxeCQ with a completion channel (for Wait) and
// vector.
func (c *Context) CreateRxeCQWith(init CQInit) (*RxeCQ, error) {
	var out [unsafe.Sizeof(rxeCreateCQResp{})]byte
	cq, err := c.CreateCQWith(init, nil, out[:])
	if err != nil {
		return nil, err
	}
	rcq := &RxeCQ{cq: cq, c: c}
	if cq.channel != nil {
		for _, mode := range []armMode{armedSolicited, armedNext} {
			if rcq.arms[mode], err = reqNotifyCommand(cq, mode == armedSolicited); err != nil {
				return nil, errors.Join(err, c.DestroyCQ(cq))
			}
		}
	}
	var resp rxeCreateCQResp
	decodeDriverData(out[:], &resp)
	if rcq.queue, err = c.mapRxeQueue("completion", resp.MI, unsafe.Sizeof(WC{})); err != nil {
		return nil, errors.Join(err, c.DestroyCQ(cq))
	}
	return rcq, nil
}

// Poll moves up to len(wcs) completions from the queue into wcs and
// returns how many (ibv_poll_cq). It makes no system call.
func (cq *RxeCQ) Poll(wcs []WC) int {
	n := 0
	for n < len(wcs) {
		slot, ok := cq.queue.nextFull()
		if !ok {
			break
		}
		// The element is a struct rxe_cqe; user completions start with
		// struct ib_uverbs_wc, whose layout WC has (no padding: the
		// layout tests check it), and mapRxeQueue checked the size.
		wcs[n] = *(*WC)(unsafe.Pointer(&slot[0]))
		cq.queue.consume()
		n++
	}
	return n
}

// Arm asks for an event at the queue's next completion, or its next
// solicited one (ReqNotifyCQ). Wait arms as needed; Arm is for programs
// that run their own loop of Arm, Poll and WaitEvent.
func (cq *RxeCQ) Arm(solicitedOnly bool) error {
	cq.unsure = true
	if solicitedOnly {
		return cq.arm(armedSolicited)
	}
	return cq.arm(armedNext)
}

func (cq *RxeCQ) arm(mode armMode) error {
	msg := cq.arms[mode]
	if msg == nil {
		return errNoChannel
	}
	if err := cq.c.executeQuick(cmdReqNotifyCQ, msg); err != nil {
		return err
	}
	cq.armed = max(cq.armed, mode)
	return nil
}

// Wait returns completions (up to len(wcs), at least one), waiting for
// them without polling: it polls, and when the queue is empty arms it,
// polls again (a completion may have come before the arming) and waits
// for the event on the queue's channel, then polls again. The wait costs
// no CPU and no thread; it ends with ctx's error when ctx ends first. The
// queue must have a completion channel (CreateRxeCQWith).
func (cq *RxeCQ) Wait(ctx context.Context, wcs []WC) (int, error) {
	return cq.wait(untilDone(ctx), wcs, armedNext)
}

// WaitSolicited is Wait woken only by a solicited completion (a receive of
// a message sent with SendSolicited, or an error): completions that come
// before it are returned with it.
func (cq *RxeCQ) WaitSolicited(ctx context.Context, wcs []WC) (int, error) {
	return cq.wait(untilDone(ctx), wcs, armedSolicited)
}

// WaitUntil is Wait for an event loop that waits often: it waits until
// deadline (zero: none) instead of a context's end, and returns no
// completions and no error when the deadline passes, ErrInterrupted when
// the channel's Interrupt wakes it. As the channel's only waiter it
// allocates nothing: the deadline is the file's read deadline, where a
// context would cost a context, an AfterFunc and a timer a wait (behind
// another queue's waiter on the channel it makes a timer).
// Completions already queued come first: an Interrupt then stays pending,
// and the next WaitUntil returns ErrInterrupted at once, maybe for
// nothing (the caller looks at what it was interrupted for and waits
// again). As its channel's only queue, the event that ends its sleep is
// read by the next wait, before it arms the queue again, not between the
// wake and the return: one system call less each wake, on the path from a
// completion to what the program does about it.
func (cq *RxeCQ) WaitUntil(deadline time.Time, wcs []WC) (int, error) {
	n, err := cq.wait(until{deadline: deadline}, wcs, armedNext)
	if err == context.DeadlineExceeded {
		return 0, nil
	}
	return n, err
}

// wait is Wait, WaitSolicited and WaitUntil.
func (cq *RxeCQ) wait(u until, wcs []WC, mode armMode) (int, error) {
	if len(wcs) == 0 {
		return 0, nil
	}
	if cq.cq.channel == nil {
		return 0, errNoChannel
	}
	for {
		if n := cq.Poll(wcs); n > 0 {
			return n, nil
		}
		if u.ctx == nil {
			if n, ok, err := cq.waitSole(u, wcs, mode); ok {
				if err != nil || n > 0 {
					return n, err
				}
				continue
			}
		}
		cq.unsure = true
		// Still armed since the last event: the next completion will
		// send one, no need to ask again.
		if cq.armed < mode {
			if err := cq.arm(mode); err != nil {
				return 0, err
			}
			if n := cq.Poll(wcs); n > 0 {
				return n, nil
			}
		}
		if err := cq.waitEvent(u); err != nil {
			return 0, err
		}
	}
}

// WaitEvent waits for the queue's next event on its channel
// (CompChannel.WaitCQ): the queue was armed and got a completion, which
// disarmed it. Use it with Arm and Poll, not CompChannel.WaitCQ, so that
// Wait knows the queue needs arming again.
func (cq *RxeCQ) WaitEvent(ctx context.Context) error {
	return cq.waitEvent(untilDone(ctx))
}

// waitSole is wait's when the queue is alone on its channel, for
// WaitUntil: the event that ends it is left in the file for the next wait
// to read (see soleWait). ok is false when it cannot: another queue uses
// the channel, a reader is at it, or an event of the queue was read
// already (wait's waitEvent then takes it); errWoken means look again.
func (cq *RxeCQ) waitSole(u until, wcs []WC, mode armMode) (n int, ok bool, err error) {
	ch := cq.cq.channel
	ch.mu.Lock()
	events, live := ch.cqs[cq.cq.userHandle]
	if !live || events > 0 || len(ch.cqs) != 1 || ch.reading || ch.closed {
		ch.mu.Unlock()
		return 0, false, nil
	}
	if ch.interrupted.CompareAndSwap(true, false) {
		ch.mu.Unlock()
		return 0, true, ErrInterrupted
	}
	ch.reading = true
	ch.mu.Unlock()
	if cq.unsure {
		ch.stale, cq.unsure = -1, false
	}
	n, err = ch.readSole(u, cq, wcs, mode)
	ch.mu.Lock()
	ch.reading = false
	ch.broadcast()
	ch.mu.Unlock()
	if err == errWoken {
		err = nil // the loop looks again
	}
	return n, true, err
}

func (cq *RxeCQ) waitEvent(u until) error {
	cq.unsure = true
	if cq.cq.channel == nil {
		return errNoChannel
	}
	if err := cq.cq.channel.waitCQ(u, cq.cq); err != nil {
		return err
	}
	cq.armed = disarmed
	return nil
}

// Destroy destroys the completion queue and unmaps it. The kernel keeps
// the queue's memory until both are done, so it is unmapped even when
// DESTROY_CQ fails (the object then goes with the context).
func (cq *RxeCQ) Destroy() error {
	_, err := cq.DestroyEvents()
	return err
}

// DestroyEvents is Destroy, returning the events the kernel delivered for
// the queue (DestroyCQEvents).
func (cq *RxeCQ) DestroyEvents() (CQEvents, error) {
	ev, err := cq.c.DestroyCQEvents(cq.cq)
	return ev, errors.Join(err, cq.queue.unmap())
}

// RxeQP is an rxe queue pair with its mapped send and receive queues.
type RxeQP struct {
	qp  QP
	typ ib.QPType
	c   *Context
	sq  *rxeQueue
	rq  *rxeQueue
	db  []byte // the doorbell command (doorbellCommand)
}

// QP returns the queue pair.
func (qp *RxeQP) QP() QP { return qp.qp }

// CreateRxeQP creates a queue pair on an rxe device and maps its queues
// (rxe takes no driver request data). Nothing is left behind on failure.
func (c *Context) CreateRxeQP(init QPInit) (*RxeQP, error) {
	var out [unsafe.Sizeof(rxeCreateQPResp{})]byte
	qp, err := c.CreateQP(init, nil, out[:])
	if err != nil {
		return nil, err
	}
	var resp rxeCreateQPResp
	decodeDriverData(out[:], &resp)
	// As librxe: the receive queue first, then the send queue.
	minRecv := unsafe.Sizeof(rxeRecvWQE{}) + uintptr(init.Cap.MaxRecvSGE)*unsafe.Sizeof(SGE{})
	rq, err := c.mapRxeQueue("receive", resp.RQMI, minRecv)
	if err != nil {
		return nil, errors.Join(err, c.DestroyQP(qp))
	}
	// A send slot holds the larger of its SGEs and its inline data, as
	// the kernel answered them (rxe_qp_init_req).
	minSend := unsafe.Sizeof(rxeSendWQE{}) + max(uintptr(qp.Cap.MaxSendSGE)*unsafe.Sizeof(SGE{}), uintptr(qp.Cap.MaxInlineData))
	sq, err := c.mapRxeQueue("send", resp.SQMI, minSend)
	if err != nil {
		return nil, errors.Join(err, c.DestroyQP(qp), rq.unmap())
	}
	db, err := c.doorbellCommand(qp)
	if err != nil {
		return nil, errors.Join(err, c.DestroyQP(qp), rq.unmap(), sq.unmap())
	}
	return &RxeQP{qp: qp, typ: init.Type, c: c, sq: sq, rq: rq, db: db}, nil
}

// ErrQueueFull means a work queue has no free slot.
var ErrQueueFull = errors.New("work queue full")

// PostRecv puts a receive work request on the receive queue
// (ibv_post_recv). It makes no system call: the kernel takes the request
// when a SEND arrives.
func (qp *RxeQP) PostRecv(wr RecvWR) error {
	if len(wr.SGL) > int(qp.qp.Cap.MaxRecvSGE) {
		return fmt.Errorf("receive request with %d SGEs; the queue pair takes %d", len(wr.SGL), qp.qp.Cap.MaxRecvSGE)
	}
	slot, ok := qp.rq.nextFree()
	if !ok {
		return fmt.Errorf("receive queue: %w", ErrQueueFull)
	}
	length := sglLength(wr.SGL)
	wqe := rxeRecvWQE{WRID: wr.ID, DMA: rxeDMAInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGL))}}
	encodeWQE(slot, &wqe, wr.SGL, nil)
	qp.rq.produce()
	return nil
}

// PostSend puts a send work request on the send queue and rings the
// doorbell (ibv_post_send). The queue pair must be in RTS.
func (qp *RxeQP) PostSend(wr SendWR) error {
	flags, length, err := qp.sendShape(&wr)
	if err != nil {
		return err
	}
	if qp.typ == ib.QPTypeUD {
		return qp.postSendUD(wr, flags, length)
	}
	slot, ok := qp.sq.nextFree()
	if !ok {
		return fmt.Errorf("send queue: %w", ErrQueueFull)
	}
	wqe := rxeSendWQE{
		WR: rxeSendWR{WRID: wr.ID, Opcode: uint32(wr.Opcode), SendFlags: uint32(flags), Ex: wr.ImmData},
		// The kernel takes the remote address of RDMA operations from
		// IOVA; librxe sets both.
		IOVA: wr.RemoteAddr,
		DMA:  rxeDMAInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGL))},
	}
	if wr.Opcode != WRSend && wr.Opcode != WRSendWithImm {
		wqe.WR.RemoteAddr, wqe.WR.RKey = wr.RemoteAddr, wr.RKey
	}
	encodeWQE(slot, &wqe, wr.SGL, wr.Inline)
	qp.sq.produce()
	return qp.c.ringDoorbell(qp.db)
}

// sendShape checks a send request against the queue pair and returns its
// flags and length.
func (qp *RxeQP) sendShape(wr *SendWR) (SendFlags, uint32, error) {
	switch {
	case wr.Inline != nil && len(wr.SGL) > 0:
		return 0, 0, errors.New("an inline send request takes no SGEs")
	case wr.Inline != nil && wr.Opcode == WRRDMARead:
		return 0, 0, errors.New("an RDMA READ cannot be inline: it reads into memory")
	case wr.Inline != nil && len(wr.Inline) > int(qp.qp.Cap.MaxInlineData):
		return 0, 0, fmt.Errorf("inline send request of %d bytes; the queue pair takes %d", len(wr.Inline), qp.qp.Cap.MaxInlineData)
	case wr.Inline != nil:
		return wr.Flags | SendInline, uint32(len(wr.Inline)), nil
	case wr.Flags&SendInline != 0:
		return 0, 0, errors.New("an inline send request carries its data in Inline")
	case len(wr.SGL) > int(qp.qp.Cap.MaxSendSGE):
		return 0, 0, fmt.Errorf("send request with %d SGEs; the queue pair takes %d", len(wr.SGL), qp.qp.Cap.MaxSendSGE)
	}
	return wr.Flags, sglLength(wr.SGL), nil
}

// postSendUD posts a datagram: a SEND to wr.AH, with the AH number and
// the address vector as librxe posts it (init_send_wqe).
func (qp *RxeQP) postSendUD(wr SendWR, flags SendFlags, length uint32) error {
	switch {
	case wr.Opcode != WRSend && wr.Opcode != WRSendWithImm:
		return fmt.Errorf("a UD queue pair sends only SEND and SEND_WITH_IMM, not opcode %d", wr.Opcode)
	case wr.AH == nil || wr.AH.rxe == nil:
		return errors.New("a UD send needs an address handle of CreateRxeAH")
	}
	slot, ok := qp.sq.nextFree()
	if !ok {
		return fmt.Errorf("send queue: %w", ErrQueueFull)
	}
	wqe := rxeSendWQEUD{
		WR: rxeSendWRUD{WRID: wr.ID, Opcode: uint32(wr.Opcode), SendFlags: uint32(flags), Ex: wr.ImmData,
			RemoteQPN: wr.RemoteQPN, RemoteQKey: wr.RemoteQKey, AHNum: wr.AH.rxe.num, AV: wr.AH.rxe.av},
		DMA: rxeDMAInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGL))},
	}
	encodeWQE(slot, &wqe, wr.SGL, wr.Inline)
	qp.sq.produce()
	return qp.c.ringDoorbell(qp.db)
}

// Type is the queue pair's type.
func (qp *RxeQP) Type() ib.QPType { return qp.typ }

// Destroy destroys the queue pair and unmaps its queues, even when
// DESTROY_QP fails.
func (qp *RxeQP) Destroy() error {
	return errors.Join(qp.c.DestroyQP(qp.qp), qp.sq.unmap(), qp.rq.unmap())
}

func sglLength(sgl []SGE) uint32 {
	var n uint32
	for _, s := range sgl {
		n += s.Length
	}
	return n
}

// encodeWQE writes a work queue element and its SGEs, or its inline
// data, into a zeroed slot, which mapRxeQueue made large enough (the
// kernel sizes send slots for Cap.MaxInlineData). The element's Go layout
// is the C one (no padding: the layout tests check it), so it is copied
// as is: a reflecting encoder cost more than the rest of a post on a slow
// machine.
func encodeWQE[T rxeSendWQE | rxeSendWQEUD | rxeRecvWQE](slot []byte, wqe *T, sgl []SGE, inline []byte) {
	size := int(unsafe.Sizeof(*wqe))
	if len(slot) < size+len(sgl)*int(unsafe.Sizeof(SGE{}))+len(inline) {
		panic("rxe work queue slot smaller than its element") // mapRxeQueue checked: a bug
	}
	*(*T)(unsafe.Pointer(&slot[0])) = *wqe
	if len(sgl) > 0 {
		copy(unsafe.Slice((*SGE)(unsafe.Pointer(&slot[size])), len(sgl)), sgl)
	}
	copy(slot[size:], inline) // struct rxe_dma_info's inline_data, where the SGEs would be
}

// decodeDriverData decodes driver response data of a known, fixed size.
func decodeDriverData(b []byte, v any) {
	if _, err := binary.Decode(b, binary.NativeEndian, v); err != nil {
		panic(err) // b was sized from v: a bug
	}
}
