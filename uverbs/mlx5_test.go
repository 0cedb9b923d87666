package uverbs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// There is no mlx5 device here: these tests check the bytes of mlx5's
// control-path driver data against mlx5-abi.h's layouts (see
// TestObjectLayoutsMatchHeaders) and the kernel's checks
// (mlx5_ib_alloc_ucontext, create_cq_user, _create_user_qp,
// set_user_buf_size, get_qp_user_index).

func addrHex(a uint64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], a)
	return hex.EncodeToString(b[:])
}

// GET_CONTEXT with the version 0 request: 8 bytes of driver data
// (total_num_bfregs 16, num_low_latency_bfregs 4), room for the 72-byte
// mlx5_ib_alloc_ucontext_resp.
func TestMlx5GetContext(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k := newObjectKernel(t)
	k.responses[cmdGetContext] = unhex(t, "08000000 03000000")
	if err := c.getMlx5Context(); err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "GET_CONTEXT", "00000000 0600 1400 RESP 10000000 04000000")
	if c.asyncFD != 8 || c.NumCompVectors != 3 {
		t.Errorf("asyncFD, NumCompVectors = %d, %d", c.asyncFD, c.NumCompVectors)
	}
	c.asyncFD = -1 // not ours to close
	if contextRequests[mlx5Driver] == nil {
		t.Error("Open does not send mlx5's context request")
	}
}

// CREATE_CQ: 32 entries asked, 64 made (roundup_pow_of_two(cqe+1)), so
// cqe 63 and a 64 × 64-byte buffer; the driver data names the buffer and
// the doorbell record, 64-byte CQEs, no compression or flags.
func TestMlx5CreateCQ(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k := newObjectKernel(t)
	k.responses[cmdCreateCQ] = unhex(t, "02000000 3f000000 2a040000 00000000")
	cq, err := c.CreateMlx5CQ(32)
	if err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "CREATE_CQ", "12000000 1200 0400 RESP 0100000000000000 3f000000 00000000 ffffffff 00000000"+
		addrHex(bufferAddr(cq.buf))+addrHex(bufferAddr(cq.dbrec))+"40000000 00 00 0000 0000 0000 00000000")
	if len(cq.buf) != 64*64 || cq.CQN != 0x42a || cq.CQ().Handle != 2 || cq.CQ().CQE != 63 {
		t.Errorf("buffer of %d bytes, CQN %#x, cq %+v", len(cq.buf), cq.CQN, cq.CQ())
	}
	if err := cq.Destroy(); err != nil || cq.buf != nil || cq.dbrec != nil {
		t.Errorf("Destroy = %v, buffers %p %p", err, cq.buf, cq.dbrec)
	}
	wantCommand(t, c, k, "DESTROY_CQ", "14000000 0600 0200 RESP 02000000 00000000")

	k.errno[cmdCreateCQ] = unix.ENOMEM
	if _, err := c.CreateMlx5CQ(32); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("CreateMlx5CQ = %v, want ENOMEM", err)
	}
}

// CREATE_QP for the probe's RC queue pair: 16 receive WQEs of one data
// segment (16 bytes, shift 4) then 16 send basic blocks, 1280 bytes; the
// kernel allocates the blue-flame register (no flags); user index 0xffffff
// as CQE version 0 requires.
func TestMlx5CreateQP(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k := newObjectKernel(t)
	k.responses[cmdCreateQP] = append(unhex(t, "03000000 11000000 10000000 10000000 01000000 01000000 00000000 00000000"),
		unhex(t, "01000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 0000000000000000")...)
	qp, err := c.CreateMlx5QP(QPInit{PD: PD{Handle: 1}, SendCQ: CQ{Handle: 2}, RecvCQ: CQ{Handle: 2}, Type: ib.QPTypeRC,
		SignalAll: true, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "CREATE_QP", `18000000 1e00 1200 RESP 0000000000000000
		01000000 02000000 02000000 00000000 10000000 10000000 01000000 01000000 00000000 01 02 00 00`+
		addrHex(bufferAddr(qp.buf))+addrHex(bufferAddr(qp.dbrec))+
		"10000000 10000000 04000000 00000000 ffffff00 00000000 0000000000000000 00000000 0000 0000")
	if qp.QP().QPN != 17 || qp.BfregIndex != 1 || len(qp.buf) < 1280 {
		t.Errorf("qp %+v, buffer of %d bytes", qp.QP(), len(qp.buf))
	}
	// A failed DESTROY_QP keeps the buffers: the device may still use
	// them.
	k.errno[cmdDestroyQP] = unix.EBUSY
	if err := qp.Destroy(); !errors.Is(err, unix.EBUSY) || qp.buf == nil {
		t.Errorf("Destroy = %v, buffer kept: %v", err, qp.buf != nil)
	}
	delete(k.errno, cmdDestroyQP)
	if err := qp.Destroy(); err != nil || qp.buf != nil || qp.dbrec != nil {
		t.Errorf("Destroy = %v", err)
	}
}

func TestMlx5RCQueueLayout(t *testing.T) {
	for _, tt := range []struct {
		cap  QPCap
		want mlx5QueueLayout
		size int
	}{
		{QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, mlx5QueueLayout{16, 4, 16}, 1280},
		{QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, mlx5QueueLayout{4, 4, 1}, 128},
		{QPCap{MaxSendWR: 100, MaxRecvWR: 1000, MaxSendSGE: 2, MaxRecvSGE: 3}, mlx5QueueLayout{1024, 6, 256}, 65536 + 16384},
		{QPCap{MaxSendWR: 8, MaxSendSGE: 1}, mlx5QueueLayout{0, 0, 8}, 512},
	} {
		if got := mlx5RCQueueLayout(tt.cap); got != tt.want || got.Size() != tt.size {
			t.Errorf("mlx5RCQueueLayout(%+v) = %+v (%d bytes), want %+v (%d)", tt.cap, got, got.Size(), tt.want, tt.size)
		}
	}
}
