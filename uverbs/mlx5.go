package uverbs

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"unsafe"
)

// mlx5 (ConnectX) driver data for the control path
// (include/uapi/rdma/mlx5-abi.h): GET_CONTEXT needs a request, and the
// queues of a completion queue or queue pair are user memory whose
// addresses CREATE_CQ and CREATE_QP pass, with a doorbell record each; the
// kernel pins them and hands them to the device. That is enough to create
// the objects and connect a queue pair. Sending through it would take
// libmlx5's data path (WQE format, UAR doorbells, CQE ownership), which
// this package does not have.

// mlx5Driver is the sysfs name of the mlx5 driver (device/driver).
const mlx5Driver = "mlx5_core"

// mlx5AllocUcontextReq is struct mlx5_ib_alloc_ucontext_req, the version
// 0 GET_CONTEXT request: with it the kernel uses CQE version 0 and
// allocates blue-flame registers itself.
type mlx5AllocUcontextReq struct {
	TotalNumBfregs      uint32
	NumLowLatencyBfregs uint32
}

// mlx5AllocUcontextResp is struct mlx5_ib_alloc_ucontext_resp.
type mlx5AllocUcontextResp struct {
	QPTabSize          uint32
	BfRegSize          uint32
	TotBfregs          uint32
	CacheLineSize      uint32
	MaxSQDescSz        uint16
	MaxRQDescSz        uint16
	MaxSendWQEBB       uint32
	MaxRecvWR          uint32
	MaxSRQRecvWR       uint32
	NumPorts           uint16
	FlowActionFlags    uint16
	CompMask           uint32
	ResponseLength     uint32
	CQEVersion         uint8
	CmdsSuppUHW        uint8
	EthMinInline       uint8
	ClockInfoVersions  uint8
	HCACoreClockOffset uint64
	LogUARSize         uint32
	NumUARsPerPage     uint32
	NumDynBfregs       uint32
	DumpFillMkey       uint32
}

// mlx5CreateCQ is struct mlx5_ib_create_cq, CREATE_CQ's driver request.
type mlx5CreateCQ struct {
	BufAddr          uint64
	DBAddr           uint64
	CQESize          uint32
	CQECompEn        uint8
	CQECompResFormat uint8
	Flags            uint16
	UARPageIndex     uint16
	Reserved0        uint16
	Reserved1        uint32
}

// mlx5CreateCQResp is struct mlx5_ib_create_cq_resp.
type mlx5CreateCQResp struct {
	CQN      uint32
	Reserved uint32
}

// mlx5CreateQP is struct mlx5_ib_create_qp, CREATE_QP's driver request.
type mlx5CreateQP struct {
	BufAddr    uint64
	DBAddr     uint64
	SQWQECount uint32
	RQWQECount uint32
	RQWQEShift uint32
	Flags      uint32
	UIDX       uint32
	BfregIndex uint32
	SQBufAddr  uint64 // only for raw packet queue pairs
	ECEOptions uint32
	DCIStreams [2]uint8
	Reserved   uint16
}

// mlx5CreateQPResp is struct mlx5_ib_create_qp_resp.
type mlx5CreateQPResp struct {
	BfregIndex uint32
	ECEOptions uint32
	CompMask   uint32
	TIRN       uint32
	TISN       uint32
	RQN        uint32
	SQN        uint32
	Reserved1  uint32
	TIRICMAddr uint64
}

// mlx5 constants of libmlx5 and the kernel.
const (
	// libmlx5's MLX5_DEF_TOT_UUARS and low-latency registers.
	mlx5TotalBfregs      = 16
	mlx5LowLatencyBfregs = 4
	mlx5CQESize          = 64
	mlx5SendWQEBB        = 64 // MLX5_SEND_WQE_BB
	mlx5DataSegSize      = 16 // struct mlx5_wqe_data_seg
	// ctrl + raddr + atomic segments: the most an RC send needs
	// besides its data segments.
	mlx5RCSendOverhead = 48
	// MLX5_IB_DEFAULT_UIDX: with CQE version 0 the user index must be
	// this (get_qp_user_index).
	mlx5DefaultUIDX = 0xffffff
)

// getMlx5Context is GET_CONTEXT with the version 0 mlx5 request.
func (c *Context) getMlx5Context() error {
	var req [unsafe.Sizeof(mlx5AllocUcontextReq{})]byte
	encodeDriverData(req[:], &mlx5AllocUcontextReq{TotalNumBfregs: mlx5TotalBfregs, NumLowLatencyBfregs: mlx5LowLatencyBfregs})
	var resp getContextResp
	var out [unsafe.Sizeof(mlx5AllocUcontextResp{})]byte
	if err := c.execute(cmdGetContext, &getContextReq{}, req[:], &resp, out[:]); err != nil {
		return err
	}
	c.asyncFD = int(resp.AsyncFD)
	c.NumCompVectors = int(resp.NumCompVectors)
	return nil
}

// mlx5Queues is the user memory of an mlx5 completion queue or queue
// pair: its queue buffer and its doorbell record, which the kernel pins and
// the device uses while the object lives.
type mlx5Queues struct {
	buf   []byte
	dbrec []byte
}

func allocMlx5Queues(size int) (mlx5Queues, error) {
	buf, err := AllocBuffer(size)
	if err != nil {
		return mlx5Queues{}, err
	}
	dbrec, err := AllocBuffer(8)
	if err != nil {
		return mlx5Queues{}, errors.Join(err, FreeBuffer(buf))
	}
	return mlx5Queues{buf: buf, dbrec: dbrec}, nil
}

func (q *mlx5Queues) addrs() (buf, dbrec uint64) { return bufferAddr(q.buf), bufferAddr(q.dbrec) }

func (q *mlx5Queues) free() error {
	err := errors.Join(FreeBuffer(q.buf), FreeBuffer(q.dbrec))
	q.buf, q.dbrec = nil, nil
	return err
}

// Mlx5CQ is an mlx5 completion queue with its buffer and doorbell record,
// which this process allocated and the device uses.
type Mlx5CQ struct {
	cq  CQ
	CQN uint32 // the device's number for it
	c   *Context
	mlx5Queues
}

// CQ returns the completion queue.
func (cq *Mlx5CQ) CQ() CQ { return cq.cq }

// CreateMlx5CQ creates a completion queue of at least cqe entries on an
// mlx5 device. Its buffer and doorbell record are pinned, which counts
// against RLIMIT_MEMLOCK. Nothing is left behind on failure.
func (c *Context) CreateMlx5CQ(cqe uint32) (*Mlx5CQ, error) {
	entries := uint32(1) << bits.Len32(cqe) // roundup_pow_of_two(cqe + 1), as the kernel sizes it
	q, err := allocMlx5Queues(int(entries) * mlx5CQESize)
	if err != nil {
		return nil, err
	}
	var out [unsafe.Sizeof(mlx5CreateCQResp{})]byte
	cq, err := c.CreateCQ(entries-1, mlx5CQRequest(q.addrs()), out[:])
	if err != nil {
		return nil, errors.Join(err, q.free())
	}
	var resp mlx5CreateCQResp
	decodeDriverData(out[:], &resp)
	return &Mlx5CQ{cq: cq, CQN: resp.CQN, c: c, mlx5Queues: q}, nil
}

// mlx5CQRequest encodes CREATE_CQ's driver request for 64-byte CQEs.
func mlx5CQRequest(bufAddr, dbAddr uint64) []byte {
	b := make([]byte, unsafe.Sizeof(mlx5CreateCQ{}))
	encodeDriverData(b, &mlx5CreateCQ{BufAddr: bufAddr, DBAddr: dbAddr, CQESize: mlx5CQESize})
	return b
}

// Destroy destroys the completion queue, then frees its buffers, but
// keeps them when DESTROY_CQ fails: the device may still write them.
func (cq *Mlx5CQ) Destroy() error {
	if err := cq.c.DestroyCQ(cq.cq); err != nil {
		return err
	}
	return cq.free()
}

// Mlx5QP is an mlx5 queue pair with its work queue buffer and doorbell
// record.
type Mlx5QP struct {
	qp         QP
	BfregIndex uint32 // the blue-flame register the kernel chose
	c          *Context
	mlx5Queues
}

// QP returns the queue pair.
func (qp *Mlx5QP) QP() QP { return qp.qp }

// mlx5QueueLayout is how a queue pair's receive and send queues share its
// buffer: the receive queue first, then the send queue in 64-byte basic
// blocks.
type mlx5QueueLayout struct {
	RQWQECount uint32
	RQWQEShift uint32
	SQWQECount uint32
}

// Size is the buffer size the kernel pins (set_user_buf_size).
func (l mlx5QueueLayout) Size() int {
	return int(l.RQWQECount)<<l.RQWQEShift + int(l.SQWQECount)*mlx5SendWQEBB
}

// mlx5RCQueueLayout sizes the queues of an RC queue pair as libmlx5 does
// for requests without inline data: receive elements of one data segment
// per SGE, a power of two, at least one basic block in all; send elements
// of whole basic blocks for the RC segments and the SGEs, a power of two
// of basic blocks in all.
func mlx5RCQueueLayout(cap QPCap) mlx5QueueLayout {
	var l mlx5QueueLayout
	if cap.MaxRecvWR > 0 {
		wqe := roundUpPow2(max(cap.MaxRecvSGE, 1) * mlx5DataSegSize)
		size := max(roundUpPow2(cap.MaxRecvWR)*wqe, mlx5SendWQEBB)
		l.RQWQECount, l.RQWQEShift = size/wqe, uint32(bits.TrailingZeros32(wqe))
	}
	if cap.MaxSendWR > 0 {
		wqe := (mlx5RCSendOverhead + cap.MaxSendSGE*mlx5DataSegSize + mlx5SendWQEBB - 1) / mlx5SendWQEBB * mlx5SendWQEBB
		l.SQWQECount = roundUpPow2(cap.MaxSendWR*wqe) / mlx5SendWQEBB
	}
	return l
}

func roundUpPow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// CreateMlx5QP creates a reliable connected queue pair on an mlx5 device
// (opened with Open, which sends the version 0 context request). Its
// buffer and doorbell record are pinned, which counts against
// RLIMIT_MEMLOCK. Nothing is left behind on failure.
func (c *Context) CreateMlx5QP(init QPInit) (*Mlx5QP, error) {
	layout := mlx5RCQueueLayout(init.Cap)
	q, err := allocMlx5Queues(layout.Size())
	if err != nil {
		return nil, err
	}
	buf, dbrec := q.addrs()
	var out [unsafe.Sizeof(mlx5CreateQPResp{})]byte
	qp, err := c.CreateQP(init, mlx5QPRequest(buf, dbrec, layout), out[:])
	if err != nil {
		return nil, errors.Join(err, q.free())
	}
	var resp mlx5CreateQPResp
	decodeDriverData(out[:], &resp)
	return &Mlx5QP{qp: qp, BfregIndex: resp.BfregIndex, c: c, mlx5Queues: q}, nil
}

// mlx5QPRequest encodes CREATE_QP's driver request: the kernel allocates
// the blue-flame register (no flags), and the user index is the default
// one of CQE version 0.
func mlx5QPRequest(bufAddr, dbAddr uint64, l mlx5QueueLayout) []byte {
	b := make([]byte, unsafe.Sizeof(mlx5CreateQP{}))
	encodeDriverData(b, &mlx5CreateQP{
		BufAddr: bufAddr, DBAddr: dbAddr,
		SQWQECount: l.SQWQECount, RQWQECount: l.RQWQECount, RQWQEShift: l.RQWQEShift,
		UIDX: mlx5DefaultUIDX,
	})
	return b
}

// Destroy destroys the queue pair, then frees its buffers, but keeps them
// when DESTROY_QP fails: the device may still use them.
func (qp *Mlx5QP) Destroy() error {
	if err := qp.c.DestroyQP(qp.qp); err != nil {
		return err
	}
	return qp.free()
}

func bufferAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// encodeDriverData encodes driver request data of a known, fixed size.
func encodeDriverData(b []byte, v any) {
	if _, err := binary.Encode(b, binary.NativeEndian, v); err != nil {
		panic(err) // b was sized from v: a bug
	}
}
