package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/uverbs/uverbstest"
)

// A responder on the fake kernel: peers at once from several hosts, its
// limits (busy, refused), the shared secret, and its shutdown.

// fakeFleet is a responder's host (10.30.0.1) and n client hosts
// (10.30.0.2...) on one fabric.
type fakeFleet struct {
	server  *uverbstest.Device
	clients []*uverbstest.Device
}

func newFakeFleet(n int) *fakeFleet {
	fab := uverbstest.NewFabric()
	f := &fakeFleet{server: fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.1")})}
	for i := range n {
		f.clients = append(f.clients, fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr(fmt.Sprintf("10.30.0.%d", i+2))}))
	}
	return f
}

// responder runs Respond on the fleet's server until the returned stop is
// called, which waits for it and closes the device.
type responder struct {
	ln      *pipeListener
	mu      sync.Mutex
	served  []*Result
	refused []Refusal
	stop    func() error
}

func (f *fakeFleet) respond(t *testing.T, cfg ResponderConfig) *responder {
	t.Helper()
	dev, res := OpenDevice(context.Background(), fakeOptions(f.server))
	if dev == nil {
		t.Fatalf("OpenDevice: %v", res.Err())
	}
	r := &responder{ln: newPipeListener("10.30.0.2:40000")}
	cfg.OnPeer = func(res *Result) { r.mu.Lock(); r.served = append(r.served, res); r.mu.Unlock() }
	cfg.OnRefused = func(x Refusal) { r.mu.Lock(); r.refused = append(r.refused, x); r.mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Respond(ctx, dev, r.ln, cfg) }()
	var once sync.Once
	var err error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
			dev.Close()
		})
		return err
	}
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *responder) connect(d *uverbstest.Device, cfg ConnectConfig) *Result {
	cfg.Dial = r.ln.Dial
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return ConnectWith(context.Background(), fakeOptions(d), "10.30.0.1:18515", cfg)
}

func (r *responder) refusals() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, x := range r.refused {
		s = append(s, fmt.Sprintf("%s busy=%v", x.Reason, x.Busy))
	}
	return strings.Join(s, "\n")
}

// Four hosts, each running three tests one after the other, all at once:
// every test passes on both sides and nothing is left.
func TestRespondManyPeers(t *testing.T) {
	f := newFakeFleet(4)
	r := f.respond(t, ResponderConfig{})
	tests := []Test{{Kind: TestTraffic}, {Kind: TestBandwidth, Size: 4096, Iters: 100}, {Kind: TestLatency, Op: OpSend, Iters: 20}}
	var wg sync.WaitGroup
	failed := make(chan string, 12)
	for _, d := range f.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, test := range tests {
				if c := r.connect(d, ConnectConfig{Test: test}); !c.OK() {
					failed <- fmt.Sprintf("%s: %s: %v", test, stepNames(c), c.Err())
				}
			}
		}()
	}
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Error(f)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Respond: %v", err)
	}
	if len(r.served) != 12 {
		t.Errorf("%d peers served, want 12", len(r.served))
	}
	for _, s := range r.served {
		if !s.OK() || s.Peer.Role != RoleServer || s.Device != "rxe0" || s.GIDIndex != 1 {
			t.Errorf("served %s: %v", stepNames(s), s.Err())
		}
	}
	noneLeft(t, append(f.clients, f.server)...)
}

// peers 1: a second peer is answered busy while the first runs, asks
// again and is served; one whose timeout ends first fails naming the
// limit.
func TestRespondBusy(t *testing.T) {
	f := newFakeFleet(3)
	r := f.respond(t, ResponderConfig{MaxPeers: 1})
	first := make(chan *Result)
	go func() {
		first <- r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestBandwidth, Size: 4096, Duration: 600 * time.Millisecond}})
	}()
	if !eventually(2*time.Second, func() bool { return f.server.Resources().QPs > 0 }) {
		t.Fatal("the first peer never got its queue pair")
	}
	short := r.connect(f.clients[2], ConnectConfig{Test: Test{Kind: TestTraffic}, Timeout: 300 * time.Millisecond})
	second := r.connect(f.clients[1], ConnectConfig{Test: Test{Kind: TestTraffic}, Timeout: 10 * time.Second})
	if c := <-first; !c.OK() {
		t.Errorf("first: %v", c.Err())
	}
	if !second.OK() {
		t.Errorf("second, which waited: %v\nrefusals:\n%s", second.Err(), r.refusals())
	}
	if err := short.Err(); !IsBusy(err) || !strings.Contains(err.Error(), "busy: 1 peers served at once, the responder's limit (its peers)") {
		t.Errorf("short: %v", err)
	}
	if !strings.Contains(r.refusals(), "busy: 1 peers served at once") || !strings.Contains(r.refusals(), "busy=true") {
		t.Errorf("refusals:\n%s", r.refusals())
	}
	r.stop()
	noneLeft(t, append(f.clients, f.server)...)
}

// A peer's limits refuse at once, naming both values; memory binds the
// peers together.
func TestRespondLimits(t *testing.T) {
	f := newFakeFleet(2)
	r := f.respond(t, ResponderConfig{MaxPinnedTotal: 1 << 20, ServeConfig: ServeConfig{Limits: Limits{MaxDuration: time.Second}}})
	for _, tt := range []struct {
		test Test
		want string
	}{
		{Test{Kind: TestTraffic, Size: 1 << 20}, "the test asks for memory 4194304 bytes pinned; the listener allows at most 1048576 bytes a peer (its peer-memory)"},
		{Test{Kind: TestBandwidth, Duration: time.Minute}, "the test asks for duration 1m0s; the listener allows at most 1s (its duration)"},
		{Test{Kind: TestBandwidth, Size: 32 << 20}, "size 33554432 bytes; the listener allows at most 16777216 bytes (its size)"},
	} {
		c := r.connect(f.clients[0], ConnectConfig{Test: tt.test})
		var remote *RemoteFailure
		if !errors.As(c.Err(), &remote) || !strings.Contains(remote.Message, tt.want) {
			t.Errorf("%v: %v, want the peer's refusal %q", tt.test, c.Err(), tt.want)
		}
	}
	// Within them: served.
	if c := r.connect(f.clients[1], ConnectConfig{Test: Test{Kind: TestBandwidth, Size: 256 << 10, Iters: 10}}); !c.OK() {
		t.Errorf("within the limits: %v", c.Err())
	}
	r.stop()
	noneLeft(t, append(f.clients, f.server)...)
}

func TestRespondAuth(t *testing.T) {
	f := newFakeFleet(1)
	key := []byte("0123456789abcdef-the-fleet-key")
	r := f.respond(t, ResponderConfig{ServeConfig: ServeConfig{Key: key}})
	if c := r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestTraffic}, Key: key}); !c.OK() {
		t.Errorf("with the key: %v", c.Err())
	}
	c := r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestTraffic}, Key: []byte("0123456789abcdef-another-key")})
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("another key: %v", err)
	}
	c = r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestTraffic}})
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "the responder asks for its shared secret: give auth FILE") {
		t.Errorf("no key: %v", err)
	}
	c = r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestPingpong, Iters: 5}})
	if c.OK() || !strings.Contains(r.refusals(), "an ibv_rc_pingpong client, which cannot prove the shared secret") {
		t.Errorf("an ibv_rc_pingpong client: %v\n%s", c.Err(), r.refusals())
	}
	// OnPeer runs after the client's result: count once Respond returned.
	r.stop()
	if n := len(r.served); n != 1 {
		t.Errorf("%d served, want 1", n)
	}
	noneLeft(t, append(f.clients, f.server)...)
}

// Stopping: a test that ends within the grace period passes; one that
// would not is cut off, told so, and Respond returns once all is torn
// down. The grace is ten times the short test's duration: its set-up
// and its run come after stop is called, which under qemu-user on a
// loaded machine (make test-arm64) took more than 500 ms.
func TestRespondStop(t *testing.T) {
	f := newFakeFleet(2)
	const grace = 3 * time.Second
	r := f.respond(t, ResponderConfig{Grace: grace})
	quick, long := make(chan *Result), make(chan *Result)
	go func() {
		quick <- r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestLatency, Duration: 300 * time.Millisecond}})
	}()
	go func() {
		long <- r.connect(f.clients[1], ConnectConfig{Test: Test{Kind: TestBandwidth, Size: 4096, Duration: time.Minute}})
	}()
	if !eventually(2*time.Second, func() bool { return f.server.Resources().QPs == 2 }) {
		t.Fatal("the peers never got their queue pairs")
	}
	// The long test (a minute) is cut at the grace period: its result
	// says so below; without the cut, stop would wait out its minute.
	if err := r.stop(); err != nil {
		t.Errorf("Respond: %v", err)
	}
	if c := <-quick; !c.OK() {
		t.Errorf("the test that ends within the grace period: %v", c.Err())
	}
	c := <-long
	var remote *RemoteFailure
	if !errors.As(c.Err(), &remote) || !strings.Contains(remote.Message, "interrupted") {
		t.Errorf("the test cut off: %v", c.Err())
	}
	noneLeft(t, append(f.clients, f.server)...)
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	if k, err := LoadKey(write("good", "0123456789abcdef0123\n", 0o600)); err != nil || string(k) != "0123456789abcdef0123" {
		t.Errorf("LoadKey = %q, %v", k, err)
	}
	if _, err := LoadKey(write("open", "0123456789abcdef0123", 0o644)); err == nil || !strings.Contains(err.Error(), "is readable by others (mode 0644): chmod 600") {
		t.Errorf("mode 644: %v", err)
	}
	if _, err := LoadKey(write("short", "secret\n", 0o600)); err == nil || !strings.Contains(err.Error(), "a shared secret of 16 to 4096 bytes, not 6") {
		t.Errorf("short: %v", err)
	}
	if _, err := LoadKey(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file")
	}
}
