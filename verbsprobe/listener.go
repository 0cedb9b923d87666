package verbsprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/output"
)

// ServeConfig is what a listener serves and what it allows.
type ServeConfig struct {
	// Pingpong is the Size and Iters an ibv_rc_pingpong client is
	// answered with (ibv_rc_pingpong's defaults when zero); with Kind
	// TestUDPingpong the clients are ibv_ud_pingpong's (their addresses
	// look alike).
	Pingpong Test
	// Timeout (0: DefaultPeerTimeout) bounds the wait for a peer, and
	// every wait on it after.
	Timeout time.Duration
	// Limits bound what a peer may ask for and how long it may stay.
	Limits Limits
	// Allow, when not empty, are the networks peers may connect from;
	// a connection from elsewhere is closed at once.
	Allow []netip.Prefix
	// Key, when set, is the shared secret a grdma client must prove it
	// holds (an HMAC of a challenge; the key never crosses the wire).
	// An ibv_rc_pingpong client, which cannot, is refused.
	Key []byte
	// OnRefused, when set, is told of each connection refused.
	OnRefused func(Refusal)
	// UD, when set, is the UD ping queue pair that TestUDPing hellos
	// register with (a responder's; Respond sets it from
	// ResponderConfig.UDPing). Without it they are refused.
	UD UDResponder
}

// pingpongTest is the test an ibv_*_pingpong client of cfg is served.
func (cfg ServeConfig) pingpongTest() Test {
	kind := TestPingpong
	if cfg.Pingpong.Kind == TestUDPingpong {
		kind = TestUDPingpong
	}
	return Test{Kind: kind, Size: cfg.Pingpong.Size, Iters: cfg.Pingpong.Iters}.WithDefaults()
}

// Refusal is a connection a listener or responder did not serve.
type Refusal struct {
	Peer string // its address
	// Reason says why, escaped (output.Escape): it may quote the peer.
	Reason string
	// Busy: a valid peer the responder could not serve at once (it was
	// told so, and tries again).
	Busy bool
}

// Allowed reports whether addr (a TCP peer's address) is in allow; an
// empty list allows every address.
func Allowed(allow []netip.Prefix, addr net.Addr) bool {
	if len(allow) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// maxPending bounds the connections whose first message is awaited at
// once; more wait in the listen queue until one is done.
const maxPending = 64

// arrival is a connection whose first message is a valid hello or an
// ibv_rc_pingpong address.
type arrival struct {
	conn     net.Conn
	rd       *bufio.Reader
	hello    *wireMessage // nil: an ibv_rc_pingpong client
	test     Test         // what it asks for, with defaults
	pingpong []byte       // the ibv_rc_pingpong client's address
	refused  int          // connections refused before it (acceptFirst)
	release  func()       // gives back what admit reserved; nil: nothing
	// cm is a request over the RDMA CM (cmserve.go); conn and rd are
	// then nil.
	cm *cmArrived
}

// acceptor accepts connections and reads each one's first message
// concurrently (at most pending at once, each within timeout), so that a
// silent connection holds up no other. Every connection that is not a
// valid peer (not allowed, garbage, a hello it refuses, silence) is
// logged and closed, a grdma client told why.
type acceptor struct {
	ln      net.Listener
	cfg     ServeConfig
	timeout time.Duration
	pending int
	// admit, when set, decides whether a valid arrival may be served now
	// (a responder's capacity); its error is sent as a busy answer.
	admit   func(*arrival) error
	refused atomic.Int32
}

func (a *acceptor) refuse(from string, err error) {
	a.refused.Add(1)
	if a.cfg.OnRefused != nil {
		var busy *busyError
		a.cfg.OnRefused(Refusal{Peer: from, Reason: output.Escape(err.Error()), Busy: errors.As(err, &busy)})
	}
}

// loop hands each valid arrival to got until got returns false, ctx
// ends or ln fails; then it closes ln and every connection still being
// read, and returns once its goroutines are done (with ln's error, nil
// when it stopped for got or ctx).
func (a *acceptor) loop(ctx context.Context, got func(*arrival) bool) error {
	type outcome struct {
		arr  *arrival
		from string
		err  error
	}
	var (
		results   = make(chan outcome)
		acceptErr = make(chan error, 1)
		done      = make(chan struct{})
		wg        sync.WaitGroup
		mu        sync.Mutex
		waiting   = map[net.Conn]bool{}
	)
	defer func() {
		close(done)
		a.ln.Close()
		mu.Lock()
		for c := range waiting {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	// slots bounds the connections read at once: with all taken, accept
	// waits (the kernel's listen queue holds the next ones) rather than
	// turn them away.
	slots := make(chan struct{}, a.pending)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case slots <- struct{}{}:
			case <-done:
				return
			}
			conn, err := a.ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			from := conn.RemoteAddr().String()
			if !Allowed(a.cfg.Allow, conn.RemoteAddr()) {
				<-slots
				a.refuse(from, errors.New("not in the allowed networks (from)"))
				conn.Close()
				continue
			}
			mu.Lock()
			waiting[conn] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				arr, err := readFirst(conn, a.cfg, a.timeout)
				if err == nil && a.admit != nil {
					if err = a.admit(arr); err != nil {
						err = &busyError{err}
						if arr.hello != nil {
							s := &session{conn: conn, rd: arr.rd, timeout: a.timeout}
							s.send(wireMessage{Type: msgBusy, Protocol: ProtocolVersion, Error: err.Error()})
						}
					}
				}
				mu.Lock()
				delete(waiting, conn)
				mu.Unlock()
				select {
				case results <- outcome{arr, from, err}:
				case <-done:
					if err == nil && arr.release != nil {
						arr.release()
					}
					conn.Close()
				}
			}()
		}
	}()
	for {
		select {
		case r := <-results:
			if r.err != nil {
				// Logged before the peer sees it closed.
				a.refuse(r.from, r.err)
				r.arr.conn.Close()
				continue
			}
			if !got(r.arr) {
				return nil
			}
		case err := <-acceptErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// busyError is a valid peer a responder cannot serve now.
type busyError struct{ err error }

func (e *busyError) Error() string { return "busy: " + e.err.Error() }
func (e *busyError) Unwrap() error { return e.err }

// acceptFirst accepts connections on ln until one sends a valid first
// message, and returns it; ln is closed when it returns. Every other
// connection is logged and closed, and counted in the arrival's refused.
func acceptFirst(ctx context.Context, ln net.Listener, cfg ServeConfig, timeout time.Duration) (*arrival, error) {
	a := &acceptor{ln: ln, cfg: cfg, timeout: timeout, pending: maxPending}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var first *arrival
	err := a.loop(wait, func(arr *arrival) bool { first = arr; return false })
	switch {
	case first != nil:
		first.refused = int(a.refused.Load())
		return first, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted waiting for a peer on %s: %w", ln.Addr(), ctx.Err())
	case err != nil:
		return nil, &PeerError{Host: ln.Addr().String(), Doing: "waiting for a peer on", Err: err}
	}
	return nil, &PeerError{Host: ln.Addr().String(), Doing: "waiting for a peer on",
		Err: fmt.Errorf("no peer connected within %v (give a longer timeout)%s", timeout, refusedNote(int(a.refused.Load())))}
}

func refusedNote(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "; 1 connection refused"
	}
	return fmt.Sprintf("; %d connections refused", n)
}

// readFirst reads a connection's first message within timeout: a hello
// the listener accepts (its sender proving the shared secret when there
// is one), or an ibv_rc_pingpong address. A hello it refuses is answered
// with a "failed" message saying why. The arrival is returned with the
// error too, for its connection.
func readFirst(conn net.Conn, cfg ServeConfig, timeout time.Duration) (*arrival, error) {
	a := &arrival{conn: conn, rd: bufio.NewReaderSize(conn, 4096)}
	conn.SetReadDeadline(time.Now().Add(timeout))
	first, err := a.rd.Peek(1)
	if err != nil {
		return a, firstMessageError(err, timeout)
	}
	if first[0] != '{' {
		b := make([]byte, pingpongAddressLen)
		if _, err := io.ReadFull(a.rd, b); err != nil {
			return a, fmt.Errorf("neither a grdma hello nor an ibv_rc_pingpong address: %w", firstMessageError(err, timeout))
		}
		var pa PingpongAddress
		if err := pa.UnmarshalBinary(b); err != nil {
			return a, fmt.Errorf("neither a grdma hello nor an ibv_rc_pingpong address: %w", err)
		}
		if cfg.Key != nil {
			return a, errors.New("an ibv_rc_pingpong client, which cannot prove the shared secret (auth)")
		}
		a.pingpong = b
		a.test = cfg.pingpongTest()
		return a, nil
	}
	s := &session{conn: conn, rd: a.rd, timeout: timeout}
	line, err := s.readLine()
	if err != nil {
		return a, firstMessageError(err, timeout)
	}
	m, err := parseMessage(line)
	if err != nil {
		return a, err
	}
	refuse := func(err error) (*arrival, error) {
		s.send(wireMessage{Type: msgFailed, Step: StepAccept, Error: "refused: " + err.Error(), Protocol: ProtocolVersion})
		return a, err
	}
	test, err := checkHello(m, cfg.Limits)
	if err == nil && test.Kind == TestUDPing && cfg.UD == nil {
		err = errors.New("this side answers no UD ping: a `grdma probe DEV serve` responder does")
	}
	if err != nil {
		return refuse(err)
	}
	if cfg.Key != nil {
		if err := challenge(s, cfg.Key, line); err != nil {
			return refuse(err)
		}
	}
	a.hello, a.test = &m, test
	conn.SetReadDeadline(time.Time{})
	return a, nil
}

func firstMessageError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errPeerClosed):
		return errors.New("closed before its first message")
	case isTimeout(err):
		return fmt.Errorf("no first message within %v", timeout)
	}
	return err
}

// checkHello returns the test a hello asks for, with its defaults, or
// why the listener refuses it: not a hello of this protocol, a test it
// cannot run, or one over its limits.
func checkHello(m wireMessage, l Limits) (Test, error) {
	switch {
	case m.Type != msgHello:
		return Test{}, fmt.Errorf("a %q message, not a hello", m.Type)
	case m.Protocol != ProtocolVersion:
		return Test{}, fmt.Errorf("the peer speaks grdma probe protocol %d, this side %d: use the same grdma on both", m.Protocol, ProtocolVersion)
	case m.Test == nil || m.Endpoint == nil:
		return Test{}, errors.New("a hello without a test or an endpoint")
	}
	test := m.Test.WithDefaults()
	if err := test.Validate(); err != nil {
		return Test{}, fmt.Errorf("a test this side cannot run: %w", err)
	}
	if isPingpong(test.Kind) {
		return Test{}, fmt.Errorf("a test this side cannot run: %s is %s's exchange, not a grdma test", test.Kind, pingpongTool(test.Kind))
	}
	if err := l.Check(test); err != nil {
		return Test{}, err
	}
	return test, nil
}
