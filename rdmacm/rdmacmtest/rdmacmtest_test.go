package rdmacmtest

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

func twoHosts() (n *Network, a, b *Host) {
	fab := uverbstest.NewFabric()
	n = NewNetwork()
	a = n.NewHost(netip.MustParseAddr("127.0.0.1"), fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.1.0.1")}))
	b = n.NewHost(netip.MustParseAddr("127.0.0.2"), fab.NewDevice(uverbstest.Config{Name: "rxe1", IPv4: netip.MustParseAddr("10.1.0.2")}))
	return n, a, b
}

// must fails the test at err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A rejected request: the reason and the private data reach the client
// (148 bytes, zero padded); the INIT_QP_ATTR answers of a connection
// carry the other side's QPN, PSN and GID, and the client's ToS on both
// sides; Destroy ends a wait; nothing is left.
func TestConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, a, b := twoHosts()
	cmA, err := a.Open()
	must(t, err)
	cmB, err := b.Open()
	must(t, err)
	l, err := cmB.CreateListener(rdmacm.PortSpaceTCP)
	must(t, err)
	srvAddr := netip.MustParseAddrPort("127.0.0.2:18515")
	if err := l.Bind(srvAddr); err != nil || !n.Listening(srvAddr) || n.Listeners() != 1 {
		t.Fatalf("bind: %v, listeners %d", err, n.Listeners())
	}
	l2, err := cmB.CreateListener(rdmacm.PortSpaceTCP)
	must(t, err)
	if err := l2.Bind(srvAddr); err == nil {
		t.Error("a second listener bound the same address")
	}
	l2.Destroy()
	if !n.Listening(srvAddr) {
		t.Error("destroying the listener that failed to bind unbound the first")
	}
	reqs := make(chan rdmacm.ConnRequest, 2)
	go func() {
		for range 2 {
			r, err := l.NextRequest(ctx)
			if err != nil {
				return
			}
			reqs <- r
		}
	}()
	dial := func(tos uint8, qpn uint32) (rdmacm.Conn, chan error) {
		c, err := cmA.CreateConn(rdmacm.PortSpaceTCP)
		must(t, err)
		if err := c.ResolveAddr(ctx, netip.AddrPort{}, srvAddr, time.Second); err != nil {
			t.Fatal(err)
		}
		c.SetTOS(tos)
		done := make(chan error, 1)
		go func() {
			_, err := c.Connect(ctx, rdmacm.ConnParam{QPNum: qpn, ResponderResources: 2, InitiatorDepth: 3})
			done <- err
		}()
		return c, done
	}

	c, done := dial(0, 17)
	r := <-reqs
	if r.Peer.QPNum != 17 || r.Peer.ResponderResources != 3 || r.Peer.InitiatorDepth != 2 || len(r.Peer.PrivateData) != rdmacm.MaxConnectPrivateData {
		t.Errorf("request %+v", r.Peer)
	}
	r.Conn.Reject(rdmacm.RejectConsumer, []byte("no"))
	var ce *rdmacm.Error
	if err := <-done; !errors.As(err, &ce) || ce.Event != rdmacm.EventRejected || rdmacm.RejectReason(ce.Status) != rdmacm.RejectConsumer ||
		len(ce.Private) != rdmacm.MaxRejectPrivateData || !bytes.HasPrefix(ce.Private, []byte("no\x00")) {
		t.Errorf("rejected: %v (%+v)", err, ce)
	}
	r.Conn.Destroy()
	c.Destroy()

	c, done = dial(96, 18)
	r = <-reqs
	if err := r.Conn.Accept(rdmacm.ConnParam{QPNum: 19}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		c       rdmacm.Conn
		peerQPN uint32
		dgid    [16]byte
	}{{c, 19, b.Device().GID(1)}, {r.Conn, 18, a.Device().GID(1)}} {
		rtr, _, err := side.c.InitQPAttr(ib.QPStateRTR)
		if err != nil || rtr.DestQPN != side.peerQPN || rtr.AV.DGID != side.dgid || rtr.AV.TrafficClass != 96 {
			t.Errorf("RTR: %+v, %v", rtr, err)
		}
	}
	rtsA, _, _ := c.InitQPAttr(ib.QPStateRTS)
	rtrB, _, _ := r.Conn.InitQPAttr(ib.QPStateRTR)
	if rtsA.SQPSN != rtrB.RQPSN {
		t.Errorf("client's SQ PSN %d, server's RQ PSN %d", rtsA.SQPSN, rtrB.RQPSN)
	}
	route, err := c.QueryRoute()
	if err != nil || len(route.Paths) != 1 {
		t.Fatalf("route %+v, %v", route, err)
	}
	if p := route.Paths[0]; p.SGID != a.Device().GID(1) || p.DGID != b.Device().GID(1) || p.TrafficClass != 96 {
		t.Errorf("route %+v", p)
	}
	c.Establish()
	if err := r.Conn.WaitEstablished(ctx); err != nil {
		t.Error(err)
	}
	wait := make(chan error, 1)
	go func() { wait <- r.Conn.WaitDisconnected(ctx) }()
	r.Conn.Destroy()
	if err := <-wait; !errors.Is(err, rdmacm.ErrDestroyed) {
		t.Errorf("a wait on a destroyed ID: %v", err)
	}
	c.Destroy()
	l.Destroy()
	if n.Live() != 0 || n.Listeners() != 0 {
		t.Errorf("%d IDs, %d listeners left", n.Live(), n.Listeners())
	}
}

// An address no host has: ADDR_ERROR; a dropped request ends with its
// context.
func TestErrors(t *testing.T) {
	n, a, b := twoHosts()
	cm, err := a.Open()
	must(t, err)
	c, err := cm.CreateConn(rdmacm.PortSpaceTCP)
	must(t, err)
	defer c.Destroy()
	var ce *rdmacm.Error
	if err := c.ResolveAddr(context.Background(), netip.AddrPort{}, netip.MustParseAddrPort("10.99.0.1:1"), time.Second); !errors.As(err, &ce) || ce.Event != rdmacm.EventAddrError {
		t.Errorf("unknown address: %v", err)
	}
	cmB, err := b.Open()
	must(t, err)
	l, err := cmB.CreateListener(rdmacm.PortSpaceTCP)
	must(t, err)
	defer l.Destroy()
	l.Bind(netip.MustParseAddrPort("0.0.0.0:7174"))
	n.DropRequests(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c.ResolveAddr(ctx, netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.2:7174"), time.Second)
	if _, err := c.Connect(ctx, rdmacm.ConnParam{QPNum: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dropped request: %v", err)
	}
	if _, err := cm.CreateConn(rdmacm.PortSpaceUDP); err == nil {
		t.Error("a UDP port space ID")
	}
	cm.Close()
	if _, err := cm.CreateConn(rdmacm.PortSpaceTCP); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
