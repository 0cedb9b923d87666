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
	// answered with (ibv_rc_pingpong's defaults when zero).
	Pingpong Test
	// Timeout (0: DefaultPeerTimeout) bounds the wait for a peer, and
	// every wait on it after.
	Timeout time.Duration
	// Limits bound what a peer may ask for and how long it may stay.
	Limits Limits
	// Allow, when not empty, are the networks peers may connect from;
	// a connection from elsewhere is closed at once.
	Allow []netip.Prefix
	// Logf, when set, is told of each connection refused.
	Logf func(format string, args ...any)
}

// logf logs through Logf, escaped: what it says may come from a peer.
func (c ServeConfig) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf("%s", output.Escape(fmt.Sprintf(format, args...)))
	}
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
// once; more are closed until one is done.
const maxPending = 16

// arrival is a connection whose first message is a valid hello or an
// ibv_rc_pingpong address.
type arrival struct {
	conn     net.Conn
	rd       *bufio.Reader
	hello    *wireMessage // nil: an ibv_rc_pingpong client
	test     Test         // what the hello asks for, with defaults
	pingpong []byte       // the ibv_rc_pingpong client's address
	refused  int          // connections refused before it
}

// acceptFirst accepts connections on ln until one sends a valid first
// message, and returns it; ln is closed when it returns. Every other
// connection (not allowed, garbage, a hello over the limits, silence for
// timeout) is logged and closed, and counted in the arrival's refused. Their first
// messages are awaited concurrently, so a silent one holds up no other.
func acceptFirst(ctx context.Context, ln net.Listener, cfg ServeConfig, timeout time.Duration) (*arrival, error) {
	type outcome struct {
		a    *arrival
		from string
		err  error
	}
	var (
		results   = make(chan outcome)
		acceptErr = make(chan error, 1)
		done      = make(chan struct{})
		refused   atomic.Int32
		wg        sync.WaitGroup
		mu        sync.Mutex
		pending   = map[net.Conn]bool{}
		winner    net.Conn
	)
	defer func() {
		close(done)
		ln.Close()
		mu.Lock()
		for c := range pending {
			if c != winner {
				c.Close()
			}
		}
		mu.Unlock()
		wg.Wait()
	}()
	refuse := func(from string, err error) {
		refused.Add(1)
		cfg.logf("refused %s: %v", from, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			from := conn.RemoteAddr().String()
			if !Allowed(cfg.Allow, conn.RemoteAddr()) {
				conn.Close()
				refuse(from, errors.New("not in the allowed networks (from)"))
				continue
			}
			mu.Lock()
			full := len(pending) >= maxPending
			if !full {
				pending[conn] = true
			}
			mu.Unlock()
			if full {
				conn.Close()
				refuse(from, fmt.Errorf("%d connections already wait for their first message", maxPending))
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := readFirst(conn, cfg, timeout)
				select {
				case results <- outcome{a, from, err}:
				case <-done:
				}
			}()
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case r := <-results:
			if r.err == nil {
				winner = r.a.conn
				r.a.refused = int(refused.Load())
				return r.a, nil
			}
			mu.Lock()
			delete(pending, r.a.conn)
			mu.Unlock()
			r.a.conn.Close()
			refuse(r.from, r.err)
		case err := <-acceptErr:
			return nil, &PeerError{Host: ln.Addr().String(), Doing: "waiting for a peer on", Err: err}
		case <-deadline.C:
			return nil, &PeerError{Host: ln.Addr().String(), Doing: "waiting for a peer on",
				Err: fmt.Errorf("no peer connected within %v (give a longer timeout)%s", timeout, refusedNote(int(refused.Load())))}
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted waiting for a peer on %s: %w", ln.Addr(), ctx.Err())
		}
	}
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
// the listener accepts, or an ibv_rc_pingpong address. A hello it
// refuses is answered with a "failed" message saying why. The arrival
// is returned with the error too, for its connection.
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
		a.pingpong = b
		return a, nil
	}
	s := &session{conn: conn, rd: a.rd, timeout: timeout}
	m, err := s.readMessage()
	if err != nil {
		return a, firstMessageError(err, timeout)
	}
	test, err := checkHello(m, cfg.Limits)
	if err != nil {
		s.send(wireMessage{Type: msgFailed, Step: StepAccept, Error: "refused: " + err.Error(), Protocol: ProtocolVersion})
		return a, err
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
	if test.Kind == TestPingpong {
		return Test{}, errors.New("a test this side cannot run: pingpong is ibv_rc_pingpong's exchange, not a grdma test")
	}
	if err := l.Check(test); err != nil {
		return Test{}, err
	}
	return test, nil
}
