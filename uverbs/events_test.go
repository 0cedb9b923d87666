package uverbs

import (
	"encoding/binary"
	"encoding/hex"
	"testing"

	"golang.org/x/sys/unix"
)

// The bytes of the completion event commands: CREATE_COMP_CHANNEL
// (response only), CREATE_CQ naming the channel's descriptor and a vector,
// REQ_NOTIFY_CQ (no response; solicited_only 0 or 1), and the counts
// DESTROY_CQ answers.
func TestEventCommandEncoding(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k := newObjectKernel(t)
	ch, fd := newPipeChannel(t, c, k)
	wantCommand(t, c, k, "CREATE_COMP_CHANNEL", "11000000 0400 0100 RESP")
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Errorf("the channel's descriptor is not non-blocking (flags %#x, %v)", flags, err)
	}

	k.responses[cmdCreateCQ] = unhex(t, "07000000 3f000000")
	cq, err := c.CreateCQWith(CQInit{CQE: 32, Channel: ch, CompVector: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fdBytes [4]byte
	binary.LittleEndian.PutUint32(fdBytes[:], uint32(fd))
	wantCommand(t, c, k, "CREATE_CQ with a channel", "12000000 0a00 0200 RESP 0100000000000000 20000000 02000000 "+
		hex.EncodeToString(fdBytes[:])+" 00000000")
	if cq.Channel() != ch {
		t.Error("the CQ does not know its channel")
	}
	if err := c.ReqNotifyCQ(cq, false); err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "REQ_NOTIFY_CQ", "17000000 0400 0000 07000000 00000000")
	if err := c.ReqNotifyCQ(cq, true); err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "REQ_NOTIFY_CQ solicited", "17000000 0400 0000 07000000 01000000")
	if err := c.ReqNotifyCQ(CQ{Handle: 8}, false); err == nil {
		t.Error("ReqNotifyCQ of a CQ without a channel: no error")
	}

	k.responses[cmdDestroyCQ] = unhex(t, "03000000 01000000")
	ev, err := c.DestroyCQEvents(cq)
	if err != nil || ev != (CQEvents{Comp: 3, Async: 1}) {
		t.Errorf("DestroyCQEvents = %+v, %v; want 3 and 1", ev, err)
	}
	if err := ch.WaitCQ(t.Context(), cq); err == nil {
		t.Error("WaitCQ of a destroyed CQ: no error")
	}
}

// newPipeChannel makes a completion channel of c whose descriptor is the
// read end of a pipe (CREATE_COMP_CHANNEL answered by k), closed with the
// test; it returns the channel and that descriptor.
func newPipeChannel(t *testing.T, c *Context, k *fakeKernel) (*CompChannel, int) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	k.responses[cmdCreateCompChannel] = binary.NativeEndian.AppendUint32(nil, uint32(fds[0]))
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch, fds[0]
}
