package verbsprobe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// The probe on the fake uverbs kernel (uverbstest): a device alone, and
// two hosts of one fabric talking over net.Pipe instead of TCP.

// fakeOptions are Options of a device on the fake uverbs kernel.
func fakeOptions(d *uverbstest.Device) Options {
	return Options{Device: d.Name(), Port: 1, GIDIndex: AutoGID, Open: func() (*uverbs.Context, error) { return d.Open() }}
}

// noneLeft fails the test when a fake device has objects left.
func noneLeft(t *testing.T, devs ...*uverbstest.Device) {
	t.Helper()
	for _, d := range devs {
		if res := d.Resources(); res != (uverbstest.Resources{}) {
			t.Errorf("%s: left behind: %+v", d.Name(), res)
		}
	}
}

func TestRunOnFake(t *testing.T) {
	d := uverbstest.NewDevice(uverbstest.Config{Name: "rxe0"})
	for _, traffic := range []bool{false, true} {
		opts := fakeOptions(d)
		opts.Traffic = traffic
		r := Run(context.Background(), opts)
		want := "open,query_device,query_port,address,alloc_pd,create_cq,create_qp,modify_qp_init,modify_qp_rtr,modify_qp_rts,query_qp,"
		if traffic {
			want += "reg_mr,send,rdma_write,rdma_read,"
		}
		want += "destroy_qp,destroy_cq,"
		if traffic {
			want += "dereg_mr,"
		}
		want += "dealloc_pd,close"
		if !r.OK() || stepNames(r) != want || r.GIDIndex != 1 || r.QPN == 0 {
			t.Errorf("traffic %v: steps %s, %v; want %s", traffic, stepNames(r), r.Err(), want)
		}
	}
	noneLeft(t, d)
}

// pipeListener is a net.Listener whose connections are net.Pipes made by
// its Dial, from the address from.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	from  net.Addr
}

func newPipeListener(from string) *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{}),
		from: net.TCPAddrFromAddrPort(netipAddrPort(from))}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *pipeListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(10, 10, 0, 1), Port: DefaultPeerPort}
}

// Dial connects to the listener; a closed one refuses.
func (l *pipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- &addrConn{Conn: b, remote: l.from}:
		return a, nil
	case <-l.done:
		return nil, syscall.ECONNREFUSED
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// addrConn is a connection that says it comes from remote.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

// fakePair is two hosts on one fake fabric: a (10.10.0.1, the server) and
// b (10.10.0.2, the client).
type fakePair struct {
	fab  *uverbstest.Fabric
	a, b *uverbstest.Device
	poll bool // Options.Poll on both sides
}

func newFakePair() *fakePair {
	fab := uverbstest.NewFabric()
	return &fakePair{fab: fab, a: fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.10.0.1")}),
		b: fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.10.0.2")})}
}

// probe runs Serve on a and ConnectWith on b over a pipe.
func (p *fakePair) probe(t *testing.T, scfg ServeConfig, ccfg ConnectConfig) (server, client *Result) {
	t.Helper()
	ln := newPipeListener("10.10.0.2:40000")
	done := make(chan *Result, 1)
	aopts, bopts := fakeOptions(p.a), fakeOptions(p.b)
	aopts.Poll, bopts.Poll = p.poll, p.poll
	go func() { done <- Serve(context.Background(), aopts, ln, scfg) }()
	ccfg.Dial = ln.Dial
	client = ConnectWith(context.Background(), bopts, "10.10.0.1:18515", ccfg)
	return <-done, client
}

// Every test, its completions waited for with events (polled in the
// latency tests), and once more polled everywhere (Options.Poll).
func TestConnectServeOnFake(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) { connectServeOnFake(t, poll) })
	}
}

func connectServeOnFake(t *testing.T, poll bool) {
	p := newFakePair()
	p.poll = poll
	for _, test := range []Test{
		{},
		{Kind: TestTraffic},
		{Kind: TestTraffic, Size: 20000},
		{Kind: TestBandwidth, Op: OpWrite, Size: 4096, Iters: 50},
		{Kind: TestBandwidth, Op: OpSend, Size: 4096, Iters: 50},
		{Kind: TestBandwidth, Op: OpRead, Size: 4096, Iters: 50},
		{Kind: TestBandwidth, Op: OpWrite, Size: 4096, Duration: 200 * time.Millisecond},
		{Kind: TestLatency, Op: OpWrite, Iters: 20},
		{Kind: TestLatency, Op: OpSend, Iters: 20},
		{Kind: TestLatency, Op: OpRead, Iters: 20},
		{Kind: TestLatency, Op: OpWrite, Size: 3, Duration: 100 * time.Millisecond},
		{Kind: TestPingpong, Iters: 20},
	} {
		t.Run(strings.ReplaceAll(test.String(), " ", "_"), func(t *testing.T) {
			s, c := p.probe(t, ServeConfig{Pingpong: Test{Iters: test.Iters}}, ConnectConfig{Test: test, Timeout: 5 * time.Second})
			if !s.OK() || !c.OK() {
				t.Fatalf("server %s: %v\nclient %s: %v", stepNames(s), s.Err(), stepNames(c), c.Err())
			}
			sp, cp := s.Peer, c.Peer
			if cp.Remote == nil || sp.Remote == nil || cp.Remote.QPN != s.QPN || sp.Remote.QPN != c.QPN || cp.PathMTU == 0 {
				t.Errorf("each side names the other: client %+v, server %+v", cp, sp)
			}
			want := test.WithDefaults()
			if sp.Test == nil || *sp.Test != want {
				t.Errorf("the server ran %+v, want %+v", sp.Test, want)
			}
			if got := cp.Pinned; got != (want.Pinned()+4095)/4096*4096 || sp.Pinned != got {
				t.Errorf("pinned: client %d, server %d, want %d", got, sp.Pinned, want.Pinned())
			}
			switch want.Kind {
			case TestBandwidth, TestLatency, TestPingpong:
				if len(cp.Measurements) != 1 || cp.Measurements[0].Iters == 0 {
					t.Errorf("client measurements %+v", cp.Measurements)
				}
			}
			if want.Kind == TestPingpong && (!cp.Pingpong || !sp.Pingpong) {
				t.Errorf("pingpong: client %v, server %v", cp.Pingpong, sp.Pingpong)
			}
		})
	}
	noneLeft(t, p.a, p.b)
}

func netipAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
