package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// fakeRxe stands in for rxe's queue memory: the kernel's CREATE_CQ and
// CREATE_QP answers name mmap offsets, and mapping one returns anonymous
// memory with the queue header rxe would write.
type fakeRxe struct {
	t      *testing.T
	queues map[int64]rxeQueueBuf // header by mmap offset
	mapped map[*byte]int64       // live mappings
	mapErr error
}

// The fake's queues, with the shapes 6.12's rxe gives the probe's
// queues: 64 CQEs of 128 bytes (struct rxe_cqe), 32 receive WQEs of 64
// bytes and 32 send WQEs of 256 bytes (one SGE each).
const (
	fakeCQOffset = 0x1000
	fakeRQOffset = 0x2000
	fakeSQOffset = 0x4000
	fakeQueueLen = 0x4000
)

func newFakeRxe(t *testing.T) (*Context, *fakeKernel, *fakeRxe) {
	c, k := newObjectKernel(t)
	r := &fakeRxe{t: t, mapped: map[*byte]int64{}, queues: map[int64]rxeQueueBuf{
		fakeCQOffset: {Log2ElemSize: 7, IndexMask: 63},
		fakeRQOffset: {Log2ElemSize: 6, IndexMask: 31},
		fakeSQOffset: {Log2ElemSize: 8, IndexMask: 31},
	}}
	kernelOf(t, c).mmap, kernelOf(t, c).munmap = r.mmap, r.munmap
	mi := func(offset uint64) string {
		var b [16]byte
		binary.NativeEndian.PutUint64(b[:], offset)
		binary.NativeEndian.PutUint32(b[8:], fakeQueueLen)
		return string(b[:])
	}
	k.responses[cmdCreateCQ] = append(unhex(t, "02000000 3f000000"), mi(fakeCQOffset)...)
	k.responses[cmdCreateQP] = append(unhex(t, "03000000 11000000 1f000000 1f000000 01000000 01000000 00000000 00000000"),
		mi(fakeRQOffset)+mi(fakeSQOffset)...)
	return c, k, r
}

func (r *fakeRxe) mmap(offset int64, size int) ([]byte, error) {
	if r.mapErr != nil {
		return nil, r.mapErr
	}
	hdr, ok := r.queues[offset]
	if !ok || size != fakeQueueLen {
		r.t.Errorf("mmap of offset %#x, %d bytes: no such queue", offset, size)
		return nil, unix.EINVAL
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	binary.Encode(b, binary.NativeEndian, &hdr)
	r.mapped[&b[0]] = offset
	return b, nil
}

func (r *fakeRxe) munmap(b []byte) error {
	if _, ok := r.mapped[&b[0]]; !ok {
		r.t.Errorf("munmap of memory that is not a mapped queue")
	}
	delete(r.mapped, &b[0])
	return unix.Munmap(b)
}

func (r *fakeRxe) leaks() []int64 {
	var offsets []int64
	for _, o := range r.mapped {
		offsets = append(offsets, o)
	}
	return offsets
}

func newProbeQueues(t *testing.T, c *Context) (*RxeCQ, *RxeQP) {
	t.Helper()
	cq, err := c.CreateRxeCQ(32)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateRxeQP(QPInit{PD: PD{Handle: 1}, SendCQ: cq.CQ(), RecvCQ: cq.CQ(), Type: ib.QPTypeRC,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return cq, qp
}

// TestRxeWorkRequestEncoding checks the bytes of the send and receive
// queue elements, the producer indexes, and the doorbell.
func TestRxeWorkRequestEncoding(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k, _ := newFakeRxe(t)
	cq, qp := newProbeQueues(t, c)
	defer cq.Destroy()
	defer qp.Destroy()
	// CREATE_QP sends no driver data: rxe refuses any (udata->inlen).
	wantCommand(t, c, k, "CREATE_QP", `18000000 1000 1000 RESP 0000000000000000
		01000000 02000000 02000000 00000000 10000000 10000000 01000000 01000000 00000000 00 02 00 00`)

	sge := SGE{Addr: 0x7f0000001000, Length: 8192, LKey: 0x21a}
	if err := qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{sge}}); err != nil {
		t.Fatal(err)
	}
	if got, want := qp.rq.slot(0), unhex(t, `01000000 00000000 00000000 00000000
		00200000 00200000 00000000 01000000 00000000 00000000
		00100000 007f0000 00200000 1a020000`+zeros(8)); !bytes.Equal(got, want) {
		t.Errorf("receive WQE\n% x\nwant\n% x", got, want)
	}
	if err := qp.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{sge}}); err != nil {
		t.Fatal(err)
	}
	if got, want := qp.sq.slot(0), unhex(t, `02000000 00000000 00000000 02000000 02000000 00000000
		0000000000000000 00000000 00000000`+zeros(104)+`
		00000000 00000000 0000000000000000 00000000 00000000 00000000 00000000 00000000 00000000
		00200000 00200000 00000000 01000000 00000000 00000000
		00100000 007f0000 00200000 1a020000`+zeros(32)); !bytes.Equal(got, want) {
		t.Errorf("SEND WQE\n% x\nwant\n% x", got, want)
	}
	wantCommand(t, c, k, "POST_SEND doorbell", "1c000000 0800 0100 RESP 03000000 00000000 00000000 80000000")

	write := SendWR{ID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{sge}, RemoteAddr: 0x7f0000005000, RKey: 0x21b}
	if err := qp.PostSend(write); err != nil {
		t.Fatal(err)
	}
	// The remote address goes in wr.rdma and in iova, which the kernel
	// reads.
	if got, want := qp.sq.slot(1)[:184], unhex(t, `03000000 00000000 00000000 00000000 02000000 00000000
		00500000007f0000 1b020000 00000000`+zeros(104)+`
		00000000 00000000 00500000007f0000 00000000 00000000 00000000 00000000 00000000 00000000`); !bytes.Equal(got, want) {
		t.Errorf("RDMA WRITE WQE\n% x\nwant\n% x", got, want)
	}
	if prod := *qp.sq.index(rxeProducerOffset); prod != 2 {
		t.Errorf("send producer index %d, want 2", prod)
	}
	if prod := *qp.rq.index(rxeProducerOffset); prod != 1 {
		t.Errorf("receive producer index %d, want 1", prod)
	}
}

func TestRxePoll(t *testing.T) {
	c, _, _ := newFakeRxe(t)
	cq, qp := newProbeQueues(t, c)
	defer cq.Destroy()
	defer qp.Destroy()
	wcs := make([]WC, 4)
	if n := cq.Poll(wcs); n != 0 {
		t.Fatalf("Poll of an empty queue = %d", n)
	}
	// The kernel completes a SEND and a RECV.
	produced := []WC{
		{WRID: 2, Status: WCSuccess, Opcode: WCSend, ByteLen: 8192, QPNum: 17},
		{WRID: 1, Status: WCSuccess, Opcode: WCRecv, ByteLen: 8192, QPNum: 17, WCFlags: 1, PortNum: 1},
	}
	for i, wc := range produced {
		binary.Encode(cq.queue.slot(uint32(i)), binary.NativeEndian, &wc)
	}
	*cq.queue.index(rxeProducerOffset) = 2
	if n := cq.Poll(wcs[:1]); n != 1 || wcs[0] != produced[0] {
		t.Fatalf("Poll(1) = %d, %+v", n, wcs[0])
	}
	if n := cq.Poll(wcs); n != 1 || wcs[0] != produced[1] {
		t.Fatalf("Poll(4) = %d, %+v", n, wcs[0])
	}
	if cons := *cq.queue.index(rxeConsumerOffset); cons != 2 {
		t.Errorf("consumer index %d, want 2", cons)
	}
	// Indexes wrap at the queue's size.
	*cq.queue.index(rxeConsumerOffset), *cq.queue.index(rxeProducerOffset) = 63, 0
	binary.Encode(cq.queue.slot(63), binary.NativeEndian, &produced[0])
	if n := cq.Poll(wcs); n != 1 || *cq.queue.index(rxeConsumerOffset) != 0 {
		t.Errorf("Poll across the end = %d, consumer %d", n, *cq.queue.index(rxeConsumerOffset))
	}
}

func TestRxeQueueFull(t *testing.T) {
	c, _, _ := newFakeRxe(t)
	cq, qp := newProbeQueues(t, c)
	defer cq.Destroy()
	defer qp.Destroy()
	// Nobody consumes: 31 of the 32 slots fill, as in librxe.
	for i := range 31 {
		if err := qp.PostRecv(RecvWR{ID: uint64(i)}); err != nil {
			t.Fatalf("PostRecv %d: %v", i, err)
		}
	}
	if err := qp.PostRecv(RecvWR{}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("PostRecv to a full queue = %v, want ErrQueueFull", err)
	}
	if err := qp.PostSend(SendWR{SGL: make([]SGE, 2)}); err == nil {
		t.Error("PostSend with 2 SGEs on a 1-SGE queue pair succeeded")
	}
	if err := qp.PostSend(SendWR{Flags: SendInline}); err == nil {
		t.Error("PostSend with SendInline and no Inline data succeeded")
	}
}

// TestRxeInlineSend checks an inline request's bytes (the data where the
// SGEs would be, SendInline set, no SGE counted) and the requests refused
// before anything is queued.
func TestRxeInlineSend(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k, _ := newFakeRxe(t)
	// As rxe answers a queue pair asked for 48 bytes inline: the slot
	// of 256 bytes holds the 208-byte element and 48 bytes of data.
	k.responses[cmdCreateQP] = append(unhex(t, "03000000 11000000 1f000000 1f000000 03000000 01000000 30000000 00000000"),
		k.responses[cmdCreateQP][32:]...)
	cq, qp := newProbeQueues(t, c)
	defer cq.Destroy()
	defer qp.Destroy()
	if got := qp.QP().Cap.MaxInlineData; got != 48 {
		t.Fatalf("MaxInlineData %d, want 48", got)
	}
	msg := []byte("ping")
	if err := qp.PostSend(SendWR{ID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, Inline: msg, RemoteAddr: 0x7f0000005000, RKey: 0x21b}); err != nil {
		t.Fatal(err)
	}
	msg[0] = 'X' // copied at the post: the request keeps what was posted
	if got, want := qp.sq.slot(0)[:216], unhex(t, `04000000 00000000 00000000 00000000 0a000000 00000000
		00500000007f0000 1b020000 00000000`+zeros(104)+`
		00000000 00000000 00500000007f0000 00000000 00000000 00000000 00000000 00000000 00000000
		04000000 04000000 00000000 00000000 00000000 00000000
		70696e67 00000000`); !bytes.Equal(got, want) {
		t.Errorf("inline RDMA WRITE WQE\n% x\nwant\n% x", got, want)
	}
	for _, bad := range []struct {
		what string
		wr   SendWR
	}{
		{"inline and an SGL", SendWR{Opcode: WRSend, Inline: []byte{1}, SGL: []SGE{{Length: 1}}}},
		{"an inline RDMA READ", SendWR{Opcode: WRRDMARead, Inline: []byte{1}}},
		{"49 bytes inline", SendWR{Opcode: WRSend, Inline: make([]byte, 49)}},
	} {
		if err := qp.PostSend(bad.wr); err == nil {
			t.Errorf("PostSend with %s succeeded", bad.what)
		}
	}
	if prod := *qp.sq.index(rxeProducerOffset); prod != 1 {
		t.Errorf("send producer index %d after the refused requests, want 1", prod)
	}
	if err := qp.PostSend(SendWR{Opcode: WRSend, Inline: make([]byte, 48)}); err != nil {
		t.Errorf("48 bytes inline: %v", err)
	}
}

// Every failure after CREATE_CQ or CREATE_QP destroys the object and
// unmaps what was mapped.
func TestRxeCreateFailuresLeaveNothing(t *testing.T) {
	c, k, r := newFakeRxe(t)
	r.mapErr = unix.ENOMEM
	if _, err := c.CreateRxeCQ(32); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("CreateRxeCQ with a failing mmap = %v", err)
	}
	wantCommand(t, c, k, "DESTROY_CQ after the failed mmap", "14000000 0600 0200 RESP 02000000 00000000")
	r.mapErr = nil

	// A send queue whose elements cannot hold a send WQE.
	r.queues[fakeSQOffset] = rxeQueueBuf{Log2ElemSize: 6, IndexMask: 31}
	if _, err := c.CreateRxeQP(QPInit{Cap: QPCap{MaxSendSGE: 1}}); err == nil {
		t.Error("CreateRxeQP with a bad send queue header succeeded")
	}
	wantCommand(t, c, k, "DESTROY_QP after the bad header", "1b000000 0600 0100 RESP 03000000 00000000")
	if leaks := r.leaks(); len(leaks) != 0 {
		t.Errorf("queues left mapped at offsets %#x", leaks)
	}

	r.queues[fakeSQOffset] = rxeQueueBuf{Log2ElemSize: 8, IndexMask: 31}
	cq, qp := newProbeQueues(t, c)
	k.errno[cmdDestroyQP] = unix.EBUSY
	if err := qp.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Destroy = %v, want EBUSY", err)
	}
	if err := cq.Destroy(); err != nil {
		t.Error(err)
	}
	if leaks := r.leaks(); len(leaks) != 0 {
		t.Errorf("queues left mapped after Destroy at offsets %#x", leaks)
	}
}
