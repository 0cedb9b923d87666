package verbsprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/uverbs"
)

// Issue 23's findings in the probe between two hosts, each reproduced:
// the client decided what the listener pinned, the listener never
// enforced the declared duration, the peer's text reached the terminal
// raw, lastByte's atomic load was unaligned on arm64, the one-shot
// listener was spent by whatever connected first, and every test got
// remote read and write access.

// testEndpoint is a valid endpoint, as a client sends it.
func testEndpoint() Endpoint {
	g, _ := gid.Parse("::ffff:10.0.0.2")
	return Endpoint{Ifname: "rxe0", Port: 1, Driver: "rxe", LinkLayer: ib.LinkLayerEthernet, GIDIndex: 1, GID: g, GIDType: "RoCE v2",
		QPN: 17, PSN: 1, ActiveMTU: 1024, RdAtomic: 1}
}

func helloLine(t *testing.T, test Test) []byte {
	t.Helper()
	e := testEndpoint()
	b, err := json.Marshal(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &test, Endpoint: &e})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// A hello asking for 256 MiB traffic (1 GiB pinned before) is refused,
// naming both values; the listener's own size decides.
func TestHelloOverLimitsRefused(t *testing.T) {
	e := testEndpoint()
	hello := func(test Test) wireMessage {
		return wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &test, Endpoint: &e}
	}
	for _, tt := range []struct {
		limits Limits
		test   Test
		want   string // "" accepted
	}{
		{Limits{}, Test{Kind: TestTraffic, Size: MaxTestSize},
			"the test asks for size 268435456 bytes; the listener allows at most 16777216 bytes (its size)"},
		{Limits{}, Test{Kind: TestConnect, Size: MaxTestSize}, "the listener allows at most 16777216 bytes"},
		{Limits{MaxSize: 4096}, Test{Kind: TestBandwidth}, "size 65536 bytes; the listener allows at most 4096 bytes"},
		{Limits{MaxDuration: time.Minute}, Test{Kind: TestBandwidth, Duration: time.Hour},
			"the test asks for duration 1h0m0s; the listener allows at most 1m0s"},
		{Limits{}, Test{Kind: TestBandwidth, Size: DefaultMaxSize}, ""},
		{Limits{}, Test{Kind: TestTraffic}, ""},
	} {
		test, err := checkHello(hello(tt.test), tt.limits)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v with %+v: %v, want %q", tt.test, tt.limits, err, tt.want)
		}
		if err == nil && test.Pinned() > 4*DefaultMaxSize {
			t.Errorf("%+v pins %d bytes", test, test.Pinned())
		}
	}
	for _, m := range []wireMessage{
		{Type: msgDone},
		{Type: msgHello, Protocol: ProtocolVersion + 1, Test: &Test{}, Endpoint: &e},
		{Type: msgHello, Protocol: ProtocolVersion, Endpoint: &e},
		{Type: msgHello, Protocol: ProtocolVersion, Test: &Test{Kind: TestPingpong}, Endpoint: &e},
		{Type: msgHello, Protocol: ProtocolVersion, Test: &Test{Kind: "bulk"}, Endpoint: &e},
	} {
		if _, err := checkHello(m, Limits{}); err == nil {
			t.Errorf("%+v accepted", m)
		}
	}
}

// What each test pins: connect nothing, the others their messages, as
// the region is shaped.
func TestPinnedPerTest(t *testing.T) {
	for _, tt := range []struct {
		test Test
		want int
	}{
		{Test{Kind: TestConnect}.WithDefaults(), 0},
		{Test{Kind: TestTraffic}.WithDefaults(), 4 * payloadSize},
		{Test{Kind: TestTraffic, Size: 20000}, 4 * 20000},
		{Test{Kind: TestBandwidth}.WithDefaults(), 2 * 65536},
		{Test{Kind: TestLatency}.WithDefaults(), 4},
		{Test{Kind: TestPingpong}.WithDefaults(), 8192},
	} {
		if got := tt.test.Pinned(); got != tt.want {
			t.Errorf("%v size %d: pins %d, want %d", tt.test, tt.test.Size, got, tt.want)
		}
		if tt.test.Kind == TestConnect {
			continue
		}
		if sh := peerShape(&Device{}, tt.test); sh.Part*sh.Parts != tt.want {
			t.Errorf("%v: region %d × %d, Pinned says %d", tt.test, sh.Parts, sh.Part, tt.want)
		}
	}
}

func TestBudget(t *testing.T) {
	const timeout = 10 * time.Second
	for _, tt := range []struct {
		limits Limits
		test   Test
		want   time.Duration
	}{
		{Limits{}, Test{Kind: TestConnect}.WithDefaults(), timeout},
		{Limits{}, Test{Kind: TestBandwidth, Duration: 100 * time.Millisecond}.WithDefaults(), 100*time.Millisecond + timeout},
		// 1000 exchanges of 2 bytes: 250 ms each at most.
		{Limits{}, Test{Kind: TestLatency}.WithDefaults(), 250*time.Second + 3814*time.Microsecond + timeout},
		// 5000 × 64 KiB at 1 MiB/s: 312.5 s, and a second to start.
		{Limits{}, Test{Kind: TestBandwidth}.WithDefaults(), 313500*time.Millisecond + timeout},
		// Iterations beyond any reason are capped.
		{Limits{MaxDuration: time.Minute}, Test{Kind: TestLatency, Size: 2, Iters: MaxTestIters}, time.Minute + timeout},
		{Limits{}, Test{Kind: TestBandwidth, Size: DefaultMaxSize, Iters: MaxTestIters}, MaxTestDuration + timeout},
	} {
		if got := tt.limits.Budget(tt.test, timeout); got.Round(time.Millisecond) != tt.want.Round(time.Millisecond) {
			t.Errorf("%v size %d iters %d duration %v: budget %v, want %v", tt.test, tt.test.Size, tt.test.Iters, tt.test.Duration, got, tt.want)
		}
	}
}

// pipeSessions connects a server and a client session over net.Pipe.
func pipeSessions(ctx context.Context, timeout time.Duration, test Test) (server, client *session) {
	a, b := net.Pipe()
	server = &session{role: RoleServer, host: "client:40000", timeout: timeout, test: test}
	client = &session{role: RoleClient, host: "server:18515", timeout: timeout, test: test}
	server.attach(ctx, a)
	client.attach(context.Background(), b)
	return server, client
}

// A client that declared 100 ms of bw and keeps sending progress is cut
// off once its budget (the duration and the timeout) is spent, and told
// so; before, the listener served it for as long as it liked.
func TestOverstayingClientCutOff(t *testing.T) {
	test := Test{Kind: TestBandwidth, Op: OpWrite, Size: 65536, Duration: 100 * time.Millisecond}
	const timeout = 400 * time.Millisecond
	ctx, cancel := withBudget(context.Background(), Limits{}, test, timeout)
	defer cancel()
	server, client := pipeSessions(ctx, timeout, test)
	defer server.close()
	defer client.close()
	rec := newRecorder(ctx, &Result{}, nil)
	rec.failed = server.reportFailure
	env := &testEnv{ctx: ctx, rec: rec, test: test, role: RoleServer, link: server}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the client: progress every 50 ms, forever
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if client.send(wireMessage{Type: msgProgress, Done: i}) != nil {
				return
			}
		}
	}()
	verdict := make(chan error, 1)
	go func() { // and what it hears
		defer wg.Done()
		for {
			if _, err := client.readMessage(); err != nil {
				verdict <- err
				return
			}
		}
	}()
	server.readInBackground()
	start := time.Now()
	ok := rec.step(ctx, test.stepName(), (&traffic{e: env}).serveBandwidth)
	took := time.Since(start)
	close(stop)
	var over *OverstayError
	if ok || !errors.As(rec.res.Steps[0].Err, &over) {
		t.Fatalf("after %v: step %+v, want an *OverstayError within the budget", took, rec.res.Steps[0])
	}
	want := "cut off: bw write ran past the 500ms this side allows it (declared duration 100ms of 65536 bytes, and the timeout)"
	if over.Error() != want {
		t.Errorf("verdict %q, want %q", over, want)
	}
	var remote *RemoteFailure
	if err := <-verdict; !errors.As(err, &remote) || remote.Step != "bw_write" || remote.Message != want {
		t.Errorf("the client heard %v", err)
	}
	server.close()
	client.close()
	wg.Wait()
}

// Control characters from the peer are escaped before anything keeps
// them: an OSC 52 clipboard write, a cursor move over FAIL, a title.
func TestPeerTextQuoted(t *testing.T) {
	evil := "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[1A\x1b[2K[ok  ] PASS\r\u202e\u009b2J\xff"
	server, client := pipeSessions(context.Background(), time.Second, Test{})
	defer server.close()
	defer client.close()
	go server.send(wireMessage{Type: msgFailed, Step: "bw\x1b[2J", Error: evil})
	_, err := client.expect(msgVerdict, "waiting for the verdict of")
	var remote *RemoteFailure
	if !errors.As(err, &remote) {
		t.Fatalf("got %v", err)
	}
	for _, s := range []string{err.Error(), remote.Step, remote.Message} {
		if s != output.Escape(s) {
			t.Errorf("%q keeps what a terminal acts on", s)
		}
	}
	// (JSON carries invalid UTF-8 as U+FFFD.)
	if want := `\x1b]52;c;cm0gLXJmIH4=\x07\x1b[1A\x1b[2K[ok  ] PASS\x0d\xe2\x80\xae\xc2\x9b2J` + "\ufffd"; remote.Message != want {
		t.Errorf("quoted as %s, want %s", remote.Message, want)
	}
	if remote.Step != `"bw\x1b[2J"` {
		t.Errorf("step %s", remote.Step)
	}
	long := strings.Repeat("x", 5000)
	if q := peerText(long); len(q) > maxPeerText+len("…") {
		t.Errorf("%d bytes kept of 5000", len(q))
	}

	// Names must be what a kernel gives.
	for _, bad := range []func(*Endpoint){
		func(e *Endpoint) { e.Ifname = "rxe0\x1b[2J" },
		func(e *Endpoint) { e.Ifname = "" },
		func(e *Endpoint) { e.Ifname = strings.Repeat("a", 65) },
		func(e *Endpoint) { e.Driver = "rxe\n[ok  ] PASS" },
		func(e *Endpoint) { e.GIDType = "RoCE v3" },
	} {
		e := testEndpoint()
		bad(&e)
		server, client := pipeSessions(context.Background(), time.Second, Test{})
		go server.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &e})
		_, err := client.expect(msgWelcome, "waiting for the queue pair of")
		var pt *PeerTextError
		if !errors.As(err, &pt) || strings.ContainsAny(err.Error(), "\x1b\x07\n") {
			t.Errorf("%+v: %v", e, err)
		}
		server.close()
		client.close()
	}
	// A link layer by a name no kernel gives.
	server, client = pipeSessions(context.Background(), time.Second, Test{})
	go server.conn.Write([]byte(`{"type":"welcome","grdma_probe":2,"endpoint":{"ifname":"rxe0","link_layer":"Ether\u0007net"}}` + "\n"))
	_, err = client.expect(msgWelcome, "waiting for the queue pair of")
	var pt *PeerTextError
	if !errors.As(err, &pt) || pt.Field != "link layer" || strings.ContainsAny(err.Error(), "\x07") {
		t.Errorf("a link layer of another name: %v", err)
	}
	server.close()
	client.close()
	e := testEndpoint()
	e.Ifname, e.Driver = "mlx5_0", "mlx5_core"
	if err := e.validate(); err != nil {
		t.Errorf("a real endpoint refused: %v", err)
	}
}

// lastByte's atomic load is aligned on the address: a 2-byte lat part
// (its default) at any offset, which was a SIGBUS on arm64 (make test
// runs this under qemu-aarch64).
func TestLastByteUnaligned(t *testing.T) {
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer uverbs.FreeBuffer(buf)
	for off := range 8 {
		for n := 1; n <= 9; n++ {
			b := buf[off : off+n]
			for i := range b {
				b[i] = byte(off*16 + i)
			}
			b[n-1] = 0x80 | byte(n)
			if got := lastByte(b, n-1); got != 0x80|byte(n) {
				t.Errorf("offset %d, size %d: %#x, want %#x", off, n, got, 0x80|byte(n))
			}
			if got := lastByte(b, 0); got != b[0] {
				t.Errorf("offset %d, size %d, byte 0: %#x, want %#x", off, n, got, b[0])
			}
		}
	}
}

// listenLoopback is a TCP listener on 127.0.0.1.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// logs collects what a listener logs.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) refused(r Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("refused %s: %s", r.Peer, r.Reason))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A port scan, an HTTP GET, garbage, a silent connection and a hello
// over the limits no longer spend the one-shot listener: each is logged
// and closed (the grdma one told why), and the valid client that comes
// after them is served; then the listener stops listening.
func TestAcceptKeepsWaiting(t *testing.T) {
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	var log logs
	type got struct {
		a   *arrival
		err error
	}
	done := make(chan got, 1)
	go func() {
		a, err := acceptFirst(context.Background(), ln, ServeConfig{OnRefused: log.refused}, 5*time.Second)
		done <- got{a, err}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	dial().Close() // a port scan
	silent := dial()
	defer silent.Close()
	get := dial()
	defer get.Close()
	fmt.Fprintf(get, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	garbage := dial()
	garbage.Write([]byte(strings.Repeat("\x00\xff", 40)))
	defer garbage.Close()
	notHello := dial()
	notHello.Write([]byte(`{"type":"done","ok":true}` + "\n"))
	defer notHello.Close()
	big := dial()
	defer big.Close()
	big.Write(helloLine(t, Test{Kind: TestTraffic, Size: MaxTestSize}))
	reply, err := bufio.NewReader(big).ReadString('\n')
	var m wireMessage
	if err != nil || json.Unmarshal([]byte(reply), &m) != nil || m.Type != msgFailed ||
		m.Error != "refused: the test asks for size 268435456 bytes; the listener allows at most 16777216 bytes (its size)" {
		t.Fatalf("the 256 MiB hello was answered %q, %v", reply, err)
	}
	// The refusals so far are logged before the valid client comes.
	if !eventually(2*time.Second, func() bool { return strings.Count(log.String(), "refused ") >= 4 }) {
		t.Fatalf("logged:\n%s", &log)
	}
	good := dial()
	defer good.Close()
	good.Write(helloLine(t, Test{Kind: TestLatency}))
	r := <-done
	if r.err != nil || r.a == nil || r.a.hello == nil || r.a.test != (Test{Kind: TestLatency}).WithDefaults() {
		t.Fatalf("acceptFirst = %+v, %v\nlogged:\n%s", r.a, r.err, &log)
	}
	defer r.a.conn.Close()
	if r.a.refused < 4 {
		t.Errorf("%d refused, want at least the closed, garbage, not-a-hello and 256 MiB ones\n%s", r.a.refused, &log)
	}
	for _, want := range []string{"closed before its first message", "neither a grdma hello nor an ibv_rc_pingpong address",
		`a "done" message, not a hello`, "size 268435456 bytes"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("nothing logged says %q:\n%s", want, &log)
		}
	}
	// The listener is closed: a second client is refused at once instead
	// of waiting for its timeout.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the listener still accepts after its peer arrived")
	}
}

func eventually(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

// from: a connection from elsewhere is closed unread; the timeout says
// how many were refused.
func TestAcceptAllowList(t *testing.T) {
	ln := listenLoopback(t)
	var log logs
	cfg := ServeConfig{OnRefused: log.refused, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	done := make(chan error, 1)
	go func() {
		_, err := acceptFirst(context.Background(), ln, cfg, 500*time.Millisecond)
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(helloLine(t, Test{}))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "no peer connected within 500ms (give a longer timeout); 1 connection refused") {
		t.Errorf("acceptFirst: %v", err)
	}
	if !strings.Contains(log.String(), "not in the allowed networks (from)") {
		t.Errorf("logged: %s", &log)
	}
	for addr, want := range map[string]bool{"10.1.2.3:5": true, "[::ffff:10.1.2.3]:5": true, "127.0.0.1:5": false, "[fd00::1]:5": false} {
		if got := Allowed(cfg.Allow, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))); got != want {
			t.Errorf("Allowed(%s) = %v", addr, got)
		}
	}
	if !Allowed(nil, ln.Addr()) {
		t.Error("an empty list refuses")
	}
}

func TestParseFrom(t *testing.T) {
	for word, want := range map[string]string{
		"10.0.0.0/24": "10.0.0.0/24", "10.0.0.7/24": "10.0.0.0/24", "10.0.0.2": "10.0.0.2/32", "fd00::/64": "fd00::/64",
		"::ffff:10.0.0.2": "10.0.0.2/32", "hosta": "invalid Prefix", "node-01.cluster": "invalid Prefix",
	} {
		if p, err := ParseFrom(word); err != nil || p.String() != want {
			t.Errorf("ParseFrom(%q) = %v, %v; want %s", word, p, err, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0/8", "-host", "a..b", "host_1", ""} {
		if _, err := ParseFrom(bad); err == nil {
			t.Errorf("ParseFrom(%q) accepted", bad)
		}
	}
	allow, err := ResolveAllow(context.Background(), []string{"10.0.0.0/24", "localhost"})
	if err != nil || len(allow) < 2 || allow[0].String() != "10.0.0.0/24" {
		t.Errorf("ResolveAllow = %v, %v", allow, err)
	}
}

// The queue pair and memory region let the peer do what the test needs
// and nothing more (they had remote read and write for every test).
func TestAccessPerTest(t *testing.T) {
	local, write, read := uverbs.AccessLocalWrite, uverbs.AccessRemoteWrite, uverbs.AccessRemoteRead
	for _, tt := range []struct {
		test Test
		want uverbs.Access
	}{
		{Test{Kind: TestConnect}, local},
		{Test{Kind: TestTraffic}, local | write | read},
		{Test{Kind: TestBandwidth, Op: OpWrite}, local | write},
		{Test{Kind: TestLatency, Op: OpWrite}, local | write},
		{Test{Kind: TestBandwidth, Op: OpRead}, local | read},
		{Test{Kind: TestLatency, Op: OpRead}, local | read},
		{Test{Kind: TestBandwidth, Op: OpSend}, local},
		{Test{Kind: TestLatency, Op: OpSend}, local},
		{Test{Kind: TestPingpong}, local},
	} {
		if got := testAccess(tt.test); got != tt.want {
			t.Errorf("%v: access %#x, want %#x", tt.test, got, tt.want)
		}
	}
	if got := selfShape(nil, Test{Kind: TestTraffic}).Access; got != local|write|read {
		t.Errorf("traffic on this host alone: %#x", got)
	}
	if got := selfShape(nil, Test{Kind: TestConnect}).Access; got != local {
		t.Errorf("the probe without traffic: %#x", got)
	}
}

// An ibv_rc_pingpong server's 52-byte address is named as such however
// its bytes arrive (the NotGrdma flake: read as JSON when it came in
// pieces).
func TestForeignAnswer(t *testing.T) {
	addr, _ := PingpongAddress{QPN: 0x11, PSN: 0xabcdef}.MarshalBinary()
	for name, chunks := range map[string][]int{"whole": {52}, "in pieces": {1, 3, 20, 28}, "bytewise": nil} {
		t.Run(name, func(t *testing.T) {
			server, client := pipeSessions(context.Background(), 2*time.Second, Test{})
			defer server.close()
			defer client.close()
			go func() {
				if chunks == nil {
					for i := range addr {
						server.conn.Write(addr[i : i+1])
					}
					return
				}
				at := 0
				for _, n := range chunks {
					server.conn.Write(addr[at : at+n])
					at += n
					time.Sleep(5 * time.Millisecond)
				}
			}()
			err := client.foreignAnswer("waiting for the queue pair of")
			if err == nil || !strings.Contains(err.Error(), "it is an ibv_rc_pingpong server") || !strings.Contains(err.Error(), "give pingpong") {
				t.Errorf("%v", err)
			}
		})
	}
	server, client := pipeSessions(context.Background(), time.Second, Test{})
	go server.conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	if err := client.foreignAnswer("waiting for the queue pair of"); err == nil || !strings.Contains(err.Error(), `not a grdma probe listener: it answered "HTTP/1.1 400`) {
		t.Errorf("an HTTP server: %v", err)
	}
	server.close()
	client.close()
	server, client = pipeSessions(context.Background(), time.Second, Test{})
	defer server.close()
	defer client.close()
	go server.send(wireMessage{Type: msgWelcome})
	if err := client.foreignAnswer("waiting"); err != nil {
		t.Errorf("a grdma answer: %v", err)
	}
}
