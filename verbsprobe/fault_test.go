package verbsprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Faults against the responder (issue 25): malformed and oversized
// messages, a silent or slow peer, a peer vanishing mid-test, a hundred
// connections at once, stopping under load. Each is refused or failed
// with a message that says why, and leaves no object on the fake device
// and no goroutine behind.

// rawPeer is a connection to the responder that the test writes itself.
type rawPeer struct {
	net.Conn
	rd *bufio.Reader
}

func (r *responder) raw(t *testing.T) *rawPeer {
	t.Helper()
	c, err := r.ln.Dial(context.Background(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawPeer{Conn: c, rd: bufio.NewReader(c)}
}

func (p *rawPeer) send(t *testing.T, m wireMessage) {
	t.Helper()
	b, _ := json.Marshal(m)
	if _, err := p.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// next reads the responder's next message; "" when it closed.
func (p *rawPeer) next() wireMessage {
	line, err := p.rd.ReadBytes('\n')
	if err != nil {
		return wireMessage{}
	}
	var m wireMessage
	json.Unmarshal(line, &m)
	return m
}

// waitRefused waits until the responder logged a refusal saying want.
func (r *responder) waitRefused(t *testing.T, want string) {
	t.Helper()
	if !eventually(5*time.Second, func() bool { return strings.Contains(r.refusals(), want) }) {
		t.Errorf("no refusal says %q:\n%s", want, r.refusals())
	}
}

func TestRespondMalformed(t *testing.T) {
	f := newFakeFleet(1)
	r := f.respond(t, ResponderConfig{ServeConfig: ServeConfig{Timeout: 300 * time.Millisecond}})
	for _, tt := range []struct {
		name, write, want string
	}{
		{"oversized", `{"type":"hello","x":"` + strings.Repeat("a", maxMessage+10), "a line longer than 65536 bytes"},
		{"not JSON", "{hello}\n", "not a grdma probe message"},
		{"bad endpoint", `{"type":"hello","grdma_probe":2,"test":{"kind":"connect"},"endpoint":{"ifname":"rxe0\u001b[2J","link_layer":"Ethernet"}}` + "\n",
			`the peer's ifname "rxe0\x1b[2J" is not a name a kernel gives`},
		{"no endpoint", `{"type":"hello","grdma_probe":2,"test":{"kind":"connect"}}` + "\n", "a hello without a test or an endpoint"},
		{"short pingpong", "0000:000011:abcdef\x00", "neither a grdma hello nor an ibv_rc_pingpong address"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			p := r.raw(t)
			go p.Write([]byte(tt.write))
			if tt.name == "short pingpong" {
				// 19 bytes of 52, then nothing: the first-message timeout.
				r.waitRefused(t, "no first message within 300ms")
				return
			}
			r.waitRefused(t, tt.want)
		})
	}
	// The responder still serves.
	if c := r.connect(f.clients[0], ConnectConfig{Test: Test{Kind: TestTraffic}}); !c.OK() {
		t.Errorf("after the malformed ones: %v", c.Err())
	}
	r.stop()
	noneLeft(t, append(f.clients, f.server)...)
}

// A peer that sends its hello and then stops talking, or vanishes, in the
// middle of a bw test: the responder fails it within its timeout and
// releases its queue pair.
func TestRespondSilentAndVanishingPeers(t *testing.T) {
	f := newFakeFleet(1)
	r := f.respond(t, ResponderConfig{ServeConfig: ServeConfig{Timeout: 500 * time.Millisecond}})
	for _, vanish := range []bool{false, true} {
		p := r.raw(t)
		e := testEndpoint()
		e.GID = f.clients[0].GID(1)
		p.send(t, wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &Test{Kind: TestBandwidth, Op: OpWrite, Duration: time.Minute}, Endpoint: &e})
		if m := p.next(); m.Type != msgWelcome {
			t.Fatalf("the responder answered %+v", m)
		}
		if vanish {
			p.Close()
		}
		// Silent: no progress; vanished: the connection is gone.
		if !eventually(5*time.Second, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.served) == map[bool]int{false: 1, true: 2}[vanish]
		}) {
			t.Fatalf("vanish %v: the responder still serves the peer", vanish)
		}
		res := r.served[len(r.served)-1]
		want := map[bool]string{false: "no word from the peer for 500ms", true: "the peer closed the connection"}[vanish]
		if s := res.Failed(); s == nil || s.Name != "bw_write" || !strings.Contains(s.Err.Error(), want) {
			t.Errorf("vanish %v: %s: %v, want %q", vanish, stepNames(res), res.Err(), want)
		}
	}
	if f.server.Resources().QPs != 0 {
		t.Errorf("queue pairs left: %+v", f.server.Resources())
	}
	r.stop()
	noneLeft(t, f.server)
}

// A hundred clients at once against peers 16: each is served, asking
// again while the responder is busy; then nothing is left, and the
// goroutines are what they were.
func TestRespondHundredAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a hundred probes")
	}
	before := runtime.NumGoroutine()
	fab := uverbstest.NewFabric()
	server := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: mustAddr("10.40.0.1")})
	f := &fakeFleet{server: server}
	for i := range 4 {
		f.clients = append(f.clients, fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: mustAddr(fmt.Sprintf("10.40.0.%d", i+2))}))
	}
	r := f.respond(t, ResponderConfig{MaxPeers: 16})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := r.connect(f.clients[i%4], ConnectConfig{Test: Test{Kind: TestTraffic}, Timeout: 60 * time.Second})
			if !c.OK() {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%d: %v", i, c.Err()))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of 100 failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	r.stop()
	if len(r.served) != 100 {
		t.Errorf("%d served", len(r.served))
	}
	busy := strings.Count(r.refusals(), "busy=true")
	t.Logf("100 clients, peers 16: %d busy answers on the way", busy)
	noneLeft(t, append(f.clients, f.server)...)
	if !eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= before+2 }) {
		t.Errorf("%d goroutines, %d before", runtime.NumGoroutine(), before)
	}
}

// Stopping with sixteen tests running: every one is cut off or passes,
// and everything is released.
func TestRespondStopUnderLoad(t *testing.T) {
	f := newFakeFleet(4)
	r := f.respond(t, ResponderConfig{Grace: 200 * time.Millisecond})
	results := make(chan *Result, 16)
	for i := range 16 {
		go func() {
			results <- r.connect(f.clients[i%4], ConnectConfig{Test: Test{Kind: TestBandwidth, Size: 4096, Duration: 30 * time.Second}})
		}()
	}
	if !eventually(10*time.Second, func() bool { return f.server.Resources().QPs == 16 }) {
		t.Fatalf("the peers never all ran: %+v", f.server.Resources())
	}
	r.stop()
	for range 16 {
		c := <-results
		var remote *RemoteFailure
		if !errors.As(c.Err(), &remote) || !strings.Contains(remote.Message, "interrupted") {
			t.Errorf("a peer cut off: %v", c.Err())
		}
	}
	noneLeft(t, append(f.clients, f.server)...)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
