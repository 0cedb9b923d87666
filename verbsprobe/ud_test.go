package verbsprobe

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/udping"
)

// ibv_ud_pingpong's exchange between two fake hosts: Connect with
// ud-pingpong against a listener serving ud-pingpong, both sides' UD
// queue pairs and address handles made, the loop run, and nothing left.
func TestUDPingpongOnFake(t *testing.T) {
	p := newFakePair()
	test := Test{Kind: TestUDPingpong, Iters: 30, Size: 512}
	s, c := p.probe(t, ServeConfig{Pingpong: test}, ConnectConfig{Test: Test{Kind: TestUDPingpong, Iters: 30, Size: 512}, Timeout: 5 * time.Second})
	if !s.OK() || !c.OK() {
		t.Fatalf("server %s: %v\nclient %s: %v", stepNames(s), s.Err(), stepNames(c), c.Err())
	}
	want := "open,query_device,query_port,address,alloc_pd,create_cq,create_qp,reg_mr,modify_qp_init,connect,modify_qp_rtr," +
		"modify_qp_rts,query_qp,create_ah,ud-pingpong,destroy_qp,destroy_ah,destroy_cq,dereg_mr,dealloc_pd,close"
	if got := stepNames(c); got != want {
		t.Errorf("client steps %s\nwant %s", got, want)
	}
	for _, r := range []*Result{s, c} {
		pr := r.Peer
		if !pr.Pingpong || pr.Test == nil || pr.Test.Kind != TestUDPingpong || len(pr.Measurements) != 1 ||
			pr.Measurements[0].Iters != 30 || pr.Measurements[0].Test != TestUDPingpong {
			t.Errorf("%s: %+v", pr.Role, pr)
		}
		if !strings.Contains(stepNames(r), "create_ah") || !strings.Contains(stepNames(r), "destroy_ah") {
			t.Errorf("%s steps %s", pr.Role, stepNames(r))
		}
	}
	// ibv_ud_pingpong refuses a message over the port's MTU (1024 here).
	_, c = p.probe(t, ServeConfig{Pingpong: test, Timeout: 100 * time.Millisecond},
		ConnectConfig{Test: Test{Kind: TestUDPingpong, Size: 2048}, Timeout: time.Second})
	if c.OK() || !strings.Contains(c.Err().Error(), "larger than the port's active MTU") {
		t.Errorf("2048 bytes at MTU 1024: client %s: %v", stepNames(c), c.Err())
	}
	noneLeft(t, p.a, p.b)
}

// A responder with UD ping: a prober asks it for its queue pair over the
// control channel (LookupUD, which registers the prober), pings it, and
// the responder's line names the lookup. A listener refuses the lookup.
func TestUDPingLookup(t *testing.T) {
	f := newFakeFleet(1)
	var ud *udping.Responder
	var mu sync.Mutex
	r := f.respond(t, ResponderConfig{UDPing: &udping.ResponderConfig{}, OnUDPing: func(x *udping.Responder) {
		mu.Lock()
		ud = x
		mu.Unlock()
	}})
	dev, res := OpenDevice(context.Background(), fakeOptions(f.clients[0]))
	if dev == nil {
		t.Fatal(res.Err())
	}
	defer dev.Close()
	local, err := dev.UDLocal()
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(ctx context.Context, target string, me udping.Address) (udping.Address, error) {
		return LookupUD(ctx, dev, target, me, ConnectConfig{Dial: r.ln.Dial, Timeout: 5 * time.Second})
	}
	p, err := udping.NewProber(udping.ProberConfig{Local: local, Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if err := p.Add("10.30.0.1:18515", udping.TargetConfig{Rate: 20, Count: 4}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		select {
		case res := <-p.Results():
			if res.Outcome != udping.OutcomeReply || !res.DelayKnown || res.Seq != uint64(i+1) {
				t.Errorf("%+v", res)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("result %d did not come; prober %+v", i+1, p.Stats())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	mu.Lock()
	if ud == nil || ud.Stats().Probes != 4 || ud.Stats().Peers != 1 {
		t.Errorf("the UD responder: %+v", ud)
	}
	mu.Unlock()
	if err := r.stop(); err != nil {
		t.Error(err)
	}
	r.mu.Lock()
	if len(r.served) != 1 || !r.served[0].OK() || stepNames(r.served[0]) != "register,welcome" ||
		r.served[0].Peer.Test.Kind != TestUDPing {
		t.Errorf("served %d: %+v", len(r.served), r.served)
	}
	r.mu.Unlock()
	dev.Close()
	noneLeft(t, f.server, f.clients[0])

	// A listener answers no UD ping.
	pair := newFakePair()
	ln := newPipeListener("10.10.0.2:40000")
	sdone := make(chan *Result, 1)
	go func() {
		sdone <- Serve(context.Background(), fakeOptions(pair.a), ln, ServeConfig{Timeout: time.Second})
	}()
	bdev, _ := OpenDevice(context.Background(), fakeOptions(pair.b))
	defer bdev.Close()
	_, err = LookupUD(context.Background(), bdev, "10.10.0.1:18515", udping.Address{QPN: 0x99, QKey: 3}, ConnectConfig{Dial: ln.Dial, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "answers no UD ping") {
		t.Errorf("a listener's answer to a UD ping lookup: %v", err)
	}
	ln.Close()
	<-sdone
}

// The lookup's checks of what the prober says: an address no UD queue
// pair has is refused, naming it.
func TestUDPingLookupRefuses(t *testing.T) {
	f := newFakeFleet(1)
	r := f.respond(t, ResponderConfig{UDPing: &udping.ResponderConfig{}})
	dev, _ := OpenDevice(context.Background(), fakeOptions(f.clients[0]))
	defer dev.Close()
	for _, bad := range []udping.Address{{QPN: 1, QKey: 5}, {QPN: 0x42, QKey: 0x80000001}, {QPN: 0x1000000, QKey: 5}} {
		_, err := LookupUD(context.Background(), dev, "10.30.0.1:18515", bad, ConnectConfig{Dial: r.ln.Dial, Timeout: time.Second})
		if err == nil || !strings.Contains(err.Error(), "register") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
