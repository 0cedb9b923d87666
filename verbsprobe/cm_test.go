package verbsprobe

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/rdmacm/rdmacmtest"
)

// cmPair is a fakePair whose hosts reach each other through a fake RDMA
// CM (rdmacmtest): a at 127.0.0.1 (its device's GID 10.10.0.1), b at
// 127.0.0.2.
type cmPair struct {
	*fakePair
	net          *rdmacmtest.Network
	aOpen, bOpen func() (*cmChannel, error)
}

func newCMPair() *cmPair {
	n := rdmacmtest.NewNetwork()
	p := newFakePair()
	return &cmPair{fakePair: p, net: n, aOpen: fakeCM(n.NewHost(netip.MustParseAddr("127.0.0.1"), p.a)),
		bOpen: fakeCM(n.NewHost(netip.MustParseAddr("127.0.0.2"), p.b))}
}

// fakeCM opens h's CM, its devices named by the fake.
func fakeCM(h *rdmacmtest.Host) func() (*cmChannel, error) {
	return func() (*cmChannel, error) {
		cm, err := h.Open()
		return &cmChannel{CM: cm, deviceName: h.DeviceName}, err
	}
}

// probe runs ServeCM on a and ConnectWith over the CM on b, b's device
// left for the CM to choose.
func (p *cmPair) probe(t *testing.T, scfg ServeConfig, test Test) (server, client *Result) {
	t.Helper()
	done := make(chan *Result, 1)
	aopts, bopts := fakeOptions(p.a), fakeOptions(p.b)
	bopts.Device = ""
	l := CMListen{Addr: netipAddrPort("127.0.0.1:18515")}
	go func() { done <- serveCM(context.Background(), aopts, scfg, l, p.aOpen) }()
	for !p.net.Listening(l.Addr) {
		time.Sleep(time.Millisecond)
	}
	client = ConnectWith(context.Background(), bopts, "127.0.0.1:18515",
		ConnectConfig{Test: test, Timeout: 5 * time.Second, Via: TransportCM, cmOpen: p.bOpen})
	return <-done, client
}

func TestProbeOverCMOnFake(t *testing.T) {
	p := newCMPair()
	for _, test := range []Test{
		{},
		{Kind: TestTraffic},
		{Kind: TestBandwidth, Op: OpWrite, Size: 4096, Iters: 50},
		{Kind: TestBandwidth, Op: OpSend, Size: 4096, Iters: 50},
		{Kind: TestBandwidth, Op: OpRead, Size: 4096, Iters: 50},
		{Kind: TestLatency, Op: OpWrite, Iters: 20},
		{Kind: TestLatency, Op: OpSend, Iters: 20},
		{Kind: TestLatency, Op: OpRead, Iters: 20},
	} {
		t.Run(strings.ReplaceAll(test.String(), " ", "_"), func(t *testing.T) {
			s, c := p.probe(t, ServeConfig{}, test)
			test := test.WithDefaults()
			if !s.OK() || !c.OK() {
				t.Fatalf("server %s: %v\nclient %s: %v", stepNames(s), s.Err(), stepNames(c), c.Err())
			}
			want := "resolve,open,query_device,query_port,address,alloc_pd,create_cq,create_qp,"
			if test.Kind != TestConnect {
				want += "reg_mr,"
			}
			want += "modify_qp_init,connect,modify_qp_rtr,modify_qp_rts,query_qp,establish,"
			if test.Kind == TestConnect {
				want += "disconnect,"
			} else {
				want += test.WithDefaults().stepName() + ","
				if test.Kind == TestTraffic {
					want = strings.Replace(want, "traffic,", "send,rdma_write,rdma_read,", 1)
				}
				want += "finish,"
			}
			if got := stepNames(c); !strings.HasPrefix(got, want) {
				t.Errorf("client steps %s, want %s…", got, want)
			}
			if !strings.HasPrefix(stepNames(s), "request,open,") {
				t.Errorf("server steps %s", stepNames(s))
			}
			ci := c.Peer.CM
			if ci == nil || c.Device != "rxe0" || ci.Device != "rxe0" || ci.Port != 1 || ci.PathMTU == 0 || ci.HopLimit != 64 ||
				ci.GIDIndex != 1 || ci.Dst.String() != "127.0.0.1:18515" || len(ci.Steps) < 4 {
				t.Errorf("client CM info %+v (device %q)", ci, c.Device)
			}
			if (ci.ControlPort != 0) != (test.Kind != TestConnect) {
				t.Errorf("control port %d for %s", ci.ControlPort, test)
			}
			if c.Peer.Remote == nil || c.Peer.Remote.QPN != s.QPN || s.Peer.Remote == nil || s.Peer.Remote.QPN != c.QPN {
				t.Errorf("each side names the other's QPN: client %+v, server %+v", c.Peer.Remote, s.Peer.Remote)
			}
			if k := test.Kind; (k == TestBandwidth || k == TestLatency) && (len(c.Peer.Measurements) != 1 || c.Peer.Measurements[0].Iters == 0) {
				t.Errorf("client measurements %+v", c.Peer.Measurements)
			}
			if n := p.net.Live(); n != 0 {
				t.Errorf("%d CM IDs left", n)
			}
		})
	}
	noneLeft(t, p.a, p.b)
}

func TestProbeOverCMErrorsOnFake(t *testing.T) {
	p := newCMPair()
	bopts := fakeOptions(p.b)
	bopts.Device = ""
	connect := func(addr string, test Test) *Result {
		return ConnectWith(context.Background(), bopts, addr, ConnectConfig{Test: test, Timeout: 300 * time.Millisecond, Via: TransportCM, cmOpen: p.bOpen})
	}
	t.Run("nothing listens", func(t *testing.T) {
		r := connect("127.0.0.1:18515", Test{})
		var ce *rdmacm.Error
		if st := r.Failed(); st == nil || st.Name != StepConnect || !errors.As(r.Err(), &ce) || ce.Status != 8 {
			t.Errorf("steps %s: %v", stepNames(r), r.Err())
		}
	})
	t.Run("no RDMA device", func(t *testing.T) {
		r := connect("10.99.0.1:18515", Test{})
		var ce *rdmacm.Error
		if st := r.Failed(); st == nil || st.Name != StepResolve || !errors.As(r.Err(), &ce) || ce.Event != rdmacm.EventAddrError {
			t.Errorf("steps %s: %v", stepNames(r), r.Err())
		}
	})
	t.Run("not an IP", func(t *testing.T) {
		r := connect("hosta:18515", Test{})
		if st := r.Failed(); st == nil || st.Name != StepResolve || !strings.Contains(r.Err().Error(), "IP address") {
			t.Errorf("steps %s: %v", stepNames(r), r.Err())
		}
	})
	t.Run("another device", func(t *testing.T) {
		opts := bopts
		opts.Device = "mlx5_0"
		r := ConnectWith(context.Background(), opts, "127.0.0.1:18515", ConnectConfig{Via: TransportCM, cmOpen: p.bOpen})
		if st := r.Failed(); st == nil || st.Name != StepResolve || !strings.Contains(r.Err().Error(), "not mlx5_0/1") {
			t.Errorf("steps %s: %v", stepNames(r), r.Err())
		}
	})
	t.Run("refused over the limits", func(t *testing.T) {
		done := make(chan *Result, 1)
		l := CMListen{Addr: netipAddrPort("127.0.0.1:18515")}
		var refusals []Refusal
		go func() {
			done <- serveCM(context.Background(), fakeOptions(p.a), ServeConfig{Timeout: time.Second, Limits: Limits{MaxSize: 4096},
				OnRefused: func(r Refusal) { refusals = append(refusals, r) }}, l, p.aOpen)
		}()
		for !p.net.Listening(l.Addr) {
			time.Sleep(time.Millisecond)
		}
		r := connect("127.0.0.1:18515", Test{Kind: TestBandwidth, Size: 1 << 20})
		s := <-done
		if r.OK() || !strings.Contains(r.Err().Error(), "refused") || !strings.Contains(r.Err().Error(), "4096") || IsBusy(r.Err()) {
			t.Errorf("client: %v", r.Err())
		}
		if s.OK() || len(refusals) != 1 {
			t.Errorf("server: %v, refusals %+v", s.Err(), refusals)
		}
	})
	t.Run("peer silent", func(t *testing.T) {
		p.net.DropRequests(true)
		defer p.net.DropRequests(false)
		var l rdmacm.Listener
		ch, err := p.aOpen()
		if err == nil {
			l, err = ch.CreateListener(rdmacm.PortSpaceTCP)
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Bind(netipAddrPort("127.0.0.1:18515"))
		defer l.Destroy()
		r := connect("127.0.0.1:18515", Test{})
		if st := r.Failed(); st == nil || st.Name != StepConnect || !errors.Is(r.Err(), context.DeadlineExceeded) {
			t.Errorf("steps %s: %v", stepNames(r), r.Err())
		}
	})
	if n := p.net.Live(); n != 0 {
		t.Errorf("%d CM IDs left", n)
	}
	noneLeft(t, p.a, p.b)
}

// A CM hello from a peer is checked, never trusted.
func TestCMHelloAttacker(t *testing.T) {
	good, err := cmHello{Test: Test{Kind: TestBandwidth, Op: OpRead, Size: 4096, Iters: 9}, Seed: 7}.MarshalBinary()
	if err != nil || len(good) > rdmacm.MaxConnectPrivateData {
		t.Fatal(len(good), err)
	}
	var h cmHello
	if err := h.UnmarshalBinary(append(good, make([]byte, 24)...)); err != nil || h.Test.Op != OpRead || h.Test.Size != 4096 || h.Seed != 7 {
		t.Errorf("round trip: %+v %v", h, err)
	}
	for name, b := range map[string][]byte{
		"empty":    nil,
		"rping":    make([]byte, 56),
		"short":    good[:20],
		"version":  func() []byte { b := append([]byte(nil), good...); b[4] = 9; return b }(),
		"kind":     func() []byte { b := append([]byte(nil), good...); b[5] = 200; return b }(),
		"op":       func() []byte { b := append([]byte(nil), good...); b[6] = 4; return b }(),
		"duration": func() []byte { b := append([]byte(nil), good...); b[16] = 0xff; return b }(),
	} {
		if err := h.UnmarshalBinary(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := (cmHello{Test: Test{Kind: TestPingpong}}).MarshalBinary(); err == nil {
		t.Error("pingpong over CM accepted")
	}
	// A REJ's reason is a peer's text: control bytes do not pass.
	ok, busy, reason := parseRefusal(refusalData(true, "full\x1b[2J"))
	if !ok || !busy || reason != "full?[2J" {
		t.Errorf("refusal %v %v %q", ok, busy, reason)
	}
	if ok, _, _ := parseRefusal([]byte("garbage")); ok {
		t.Error("garbage taken for a refusal")
	}
}

// A responder answers probes over the CM beside TCP ones, under the same
// limits: a CM peer over its peers is rejected busy and asks again (a
// new ID) until its timeout (then IsBusy), one over a peer's limits is
// refused; nothing is left.
func TestRespondOverCMOnFake(t *testing.T) {
	f := newFakeFleet(3)
	n := rdmacmtest.NewNetwork()
	srvOpen := fakeCM(n.NewHost(netip.MustParseAddr("127.0.0.1"), f.server))
	var cliOpen []func() (*cmChannel, error)
	for i, c := range f.clients {
		cliOpen = append(cliOpen, fakeCM(n.NewHost(netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 2)}), c)))
	}
	r := f.respond(t, ResponderConfig{MaxPeers: 1, ServeConfig: ServeConfig{Limits: Limits{MaxSize: 1 << 20}},
		CM: &CMListen{Addr: netipAddrPort("127.0.0.1:18515")}, cmOpen: srvOpen})
	if !eventually(2*time.Second, func() bool { return n.Listeners() == 1 }) {
		t.Fatal("no CM listener")
	}
	overCMWithin := func(i int, test Test, timeout time.Duration) *Result {
		opts := fakeOptions(f.clients[i])
		opts.Device = ""
		return ConnectWith(context.Background(), opts, "127.0.0.1:18515", ConnectConfig{Test: test, Timeout: timeout, Via: TransportCM, cmOpen: cliOpen[i]})
	}
	overCM := func(i int, test Test) *Result { return overCMWithin(i, test, 5*time.Second) }
	first := make(chan *Result)
	go func() { first <- overCM(0, Test{Kind: TestBandwidth, Size: 4096, Duration: 600 * time.Millisecond}) }()
	if !eventually(2*time.Second, func() bool { return f.server.Resources().QPs > 0 }) {
		t.Fatal("the first peer never got its queue pair")
	}
	busy := overCMWithin(1, Test{}, 300*time.Millisecond)
	if c := <-first; !c.OK() {
		t.Errorf("first: %s: %v", stepNames(c), c.Err())
	}
	if err := busy.Err(); !IsBusy(err) || !strings.Contains(err.Error(), "1 peers served at once") {
		t.Errorf("second, while the first ran: %v", err)
	}
	if c := overCM(1, Test{Kind: TestLatency, Op: OpSend, Iters: 20}); !c.OK() {
		t.Errorf("second, after: %s: %v", stepNames(c), c.Err())
	}
	if c := overCM(2, Test{Kind: TestBandwidth, Size: 4 << 20}); c.OK() || !strings.Contains(c.Err().Error(), "refused") || IsBusy(c.Err()) {
		t.Errorf("over a peer's limit: %v", c.Err())
	}
	if c := r.connect(f.clients[2], ConnectConfig{Test: Test{Kind: TestTraffic}}); !c.OK() {
		t.Errorf("TCP beside CM: %v", c.Err())
	}
	if err := r.stop(); err != nil {
		t.Errorf("Respond: %v", err)
	}
	if len(r.served) != 3 {
		t.Errorf("%d served, want 3", len(r.served))
	}
	if !strings.Contains(r.refusals(), "RDMA CM: ") || !strings.Contains(r.refusals(), "busy=true") {
		t.Errorf("refusals:\n%s", r.refusals())
	}
	if l := n.Live(); l != 0 {
		t.Errorf("%d CM IDs left", l)
	}
	noneLeft(t, append(f.clients, f.server)...)
}
