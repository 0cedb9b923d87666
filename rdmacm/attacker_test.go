package rdmacm

import (
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// peerFlood plays a peer that floods a listener with connection
// requests: the kernel queues one CONNECT_REQUEST event each, with a
// new ID handle, for the listener's uid.
type peerFlood struct {
	mu        sync.Mutex
	rejected  []uint32
	destroyed []uint32
}

func (p *peerFlood) handle(cmd uint32, req []byte) ([]byte, unix.Errno) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch cmd {
	case cmdCreateID:
		return binary.NativeEndian.AppendUint32(nil, 1), 0 // the listener's handle
	case cmdReject:
		p.rejected = append(p.rejected, binary.NativeEndian.Uint32(req))
	case cmdDestroyID:
		p.destroyed = append(p.destroyed, binary.NativeEndian.Uint32(req[8:]))
		return make([]byte, 4), 0
	case cmdQuery:
		return make([]byte, binary.Size(queryAddrResp{})), 0
	}
	return nil, 0
}

// TestListenerBacklog: a listener holds at most its backlog of requests
// nobody took yet; the rest are rejected and destroyed at once, so a
// peer cannot make the channel hold requests without end. Requests for
// a listener that is gone are destroyed too.
func TestListenerBacklog(t *testing.T) {
	p := &peerFlood{}
	k := newFakeKernel(t, "flood", transcript{})
	k.handle = p.handle
	c := k.channel(Options{})
	l, err := c.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(2); err != nil {
		t.Fatal(err)
	}
	for h := uint32(10); h < 15; h++ {
		ev := eventResp{UID: l.uid, ID: h, Event: uint32(EventConnectRequest)}
		binary.NativeEndian.PutUint32(ev.Param[:], 0x123)
		ev.Param[264] = 255 // the kernel's private data length; the buffer bounds it
		k.queue(ev)
	}
	// The flood arrives before anyone takes a request.
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.destroyed) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []uint32{10, 11} {
		req, err := l.GetRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if req.ID.Handle() != want || req.Peer.QPNum != 0x123 || len(req.Peer.PrivateData) != 255 {
			t.Errorf("request %d: handle %d, %+v", want, req.ID.Handle(), req.Peer)
		}
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if req, err := l.GetRequest(short); err == nil {
		t.Errorf("a third request was held: handle %d", req.ID.Handle())
	}
	p.mu.Lock()
	if !slices.Equal(p.rejected, []uint32{12, 13, 14}) || !slices.Equal(p.destroyed, []uint32{12, 13, 14}) {
		t.Errorf("rejected %v, destroyed %v; want 12, 13 and 14 each", p.rejected, p.destroyed)
	}
	p.mu.Unlock()

	// A request for a uid nobody has (its listener was destroyed) is
	// destroyed as it comes.
	k.queue(eventResp{UID: 99, ID: 20, Event: uint32(EventConnectRequest)})
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return slices.Contains(p.destroyed, 20) })
}

// waitFor waits up to 5 s for cond, failing the test if it never holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in 5 s")
}
