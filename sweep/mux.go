package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// maxHandshakes bounds the connections the listener reads a first line
// from at once: a flood of connections costs goroutines and buffers up
// to this many, the rest wait in the kernel's backlog.
const maxHandshakes = 64

// firstLineWait bounds the wait for a connection's first line.
const firstLineWait = 10 * time.Second

// state is what the node's listener knows of the node's progress; the
// runner updates it, the listener answers from it.
type state struct {
	mu     sync.Mutex
	sweep  string
	about  string
	rank   int
	n      int
	broken bool
	round  int  // the round the node is in, from 1; past the last when done
	done   bool // all rounds run
	// expect is the hello the node waits for (it is B of its pair).
	expect *expectation
	// slot is the probe connection the node waits for (it serves a test).
	slot *slot
	// down: ranks found unreachable, and by whom.
	down map[int]string
	// skipped: rounds this node gave up, by partner, and why.
	skipped map[int]string
	// others: ranks that run other parameters, and the refusal.
	others map[int]string
}

type expectation struct {
	round, from int
	ch          chan handed
}

// handed is a hello the listener handed to the runner.
type handed struct {
	ctl *ctlConn
	m   message
}

// slot is a test this node serves: the one probe connection from the
// partner's addresses that asks for the planned test.
type slot struct {
	ips  []net.IP
	test verbsprobe.Test
	ch   chan net.Conn
}

func (s *state) downList() []int {
	return slices.Sorted(mapKeys(s.down))
}

// alive records a sign of life of rank r: it is not down.
func (s *state) alive(r int) {
	delete(s.down, r)
}

// merge takes in the ranks another node found unreachable.
func (s *state) merge(from int, down []int) {
	for _, r := range down {
		if r < 0 || r >= s.n || r == s.rank || r == from {
			continue
		}
		if _, known := s.down[r]; !known {
			s.down[r] = fmt.Sprintf("reported unreachable by %d", from)
		}
	}
}

// listener is the node's TCP port: control messages and probe
// connections.
type listener struct {
	ln      net.Listener
	st      *state
	timeout time.Duration
	sem     chan struct{}
	wg      sync.WaitGroup
	served  chan struct{} // closed when serve returns
}

func newListener(ln net.Listener, st *state, timeout time.Duration) *listener {
	return &listener{ln: ln, st: st, timeout: timeout, sem: make(chan struct{}, maxHandshakes), served: make(chan struct{})}
}

// serve accepts until the listener is closed.
func (l *listener) serve() {
	defer close(l.served)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l.sem <- struct{}{}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { <-l.sem }()
			l.handle(c)
		}()
	}
}

// close stops accepting and waits for the handshakes in progress, once
// serve has returned: a connection it accepted as the listener closed
// adds to wg, which must not race the Wait (the race detector saw it).
func (l *listener) close() {
	l.ln.Close()
	<-l.served
	l.wg.Wait()
}

// handle reads a connection's first line and routes it.
func (l *listener) handle(c net.Conn) {
	rd := bufio.NewReaderSize(c, 4096)
	c.SetReadDeadline(time.Now().Add(min(firstLineWait, l.timeout)))
	line, err := readLine(rd)
	if err != nil {
		c.Close()
		return
	}
	var kind struct {
		Sweep int             `json:"grdma_sweep"`
		Probe int             `json:"grdma_probe"`
		Type  string          `json:"type"`
		Test  json.RawMessage `json:"test"`
	}
	if json.Unmarshal(line, &kind) != nil || (kind.Sweep == 0 && kind.Probe == 0) {
		c.Close() // not ours: nothing to say
		return
	}
	if kind.Probe != 0 {
		var t verbsprobe.Test
		if kind.Type != "hello" || json.Unmarshal(kind.Test, &t) != nil || !l.handOver(c, rd, line, t) {
			c.Close()
		}
		return
	}
	ctl := newCtlConn(c, rd)
	m, err := parseMessage(line)
	if err != nil {
		ctl.send(message{Type: msgRefused, Error: err.Error()}, l.timeout)
		ctl.close()
		return
	}
	switch m.Type {
	case msgStatus:
		l.status(ctl, m)
	case msgHello:
		l.hello(ctl, m)
	default:
		ctl.close()
	}
}

// status answers a partner that asks how this node is doing.
func (l *listener) status(ctl *ctlConn, m message) {
	defer ctl.close()
	s := l.st
	s.mu.Lock()
	reply := message{Type: msgStatus, From: s.rank, Round: s.round, Done: s.done, Sweep: s.sweep, About: s.about}
	if m.From >= 0 && m.From < s.n && m.From != s.rank {
		s.alive(m.From)
		s.merge(m.From, m.Down)
	}
	reply.Down = s.downList()
	s.mu.Unlock()
	ctl.send(reply, l.timeout)
}

// hello answers a partner that asks for a round: hands the connection to
// the runner when it waits for exactly this, or says why not.
func (l *listener) hello(ctl *ctlConn, m message) {
	s := l.st
	s.mu.Lock()
	reply := message{From: s.rank, Round: s.round}
	if m.To != s.rank || m.From < 0 || m.From >= s.n || m.From == s.rank {
		reply.Type, reply.Error = msgRefused, fmt.Sprintf("the partner asked for rank %d from rank %d, this node is rank %d", m.To, m.From, s.rank)
	} else {
		if m.Sweep == s.sweep {
			s.alive(m.From)
			s.merge(m.From, m.Down)
		}
		e := s.expect
		switch {
		case e != nil && e.round == m.Round && e.from == m.From:
			// The runner answers: ready, or why not.
			select {
			case e.ch <- handed{ctl, m}:
				s.expect = nil
				s.mu.Unlock()
				return
			default:
			}
			reply.Type, reply.Error = msgGone, "a second hello for the same round"
		case m.Sweep != s.sweep:
			reply.Type, reply.Error = msgRefused, mismatch(s.about, m.About)
			s.others[m.From] = reply.Error
		case s.done || m.Round < s.round || (m.Round == s.round && e == nil):
			reply.Type = msgGone
			reply.Error = fmt.Sprintf("rank %d went past round %d", s.rank, m.Round)
			if why, ok := s.skipped[m.Round]; ok {
				reply.Error = why
			}
			if s.broken {
				reply.Type, reply.Error, reply.Broken = msgRefused, "its device failed at start", true
			}
		default:
			reply.Type = msgWait
		}
	}
	reply.Down = s.downList()
	s.mu.Unlock()
	ctl.send(reply, l.timeout)
	ctl.close()
}

// mismatch is the refusal of a partner that runs other parameters.
func mismatch(mine, theirs string) string {
	return fmt.Sprintf("parameters differ: this node runs %s; the partner runs %s", mine, theirs)
}

// handOver gives a probe connection to the slot that waits for it: from
// the partner's address and asking for the planned test.
func (l *listener) handOver(c net.Conn, rd *bufio.Reader, line []byte, t verbsprobe.Test) bool {
	s := l.st
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slot
	if sl == nil || !sameTest(t, sl.test) || !sameIP(c.RemoteAddr(), sl.ips) {
		return false
	}
	c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(append(line, '\n')), rd)}
	select {
	case sl.ch <- pc:
		s.slot = nil
		return true
	default:
		return false
	}
}

// sameTest reports whether a probe client's test is the planned one:
// equal once both have their defaults, a duration making the count moot
// (verbsprobe.Connect fills in an iters count beside a duration).
func sameTest(a, b verbsprobe.Test) bool {
	norm := func(t verbsprobe.Test) verbsprobe.Test {
		t = t.WithDefaults()
		if t.Duration > 0 {
			t.Iters = 0
		}
		return t
	}
	return norm(a) == norm(b)
}

func sameIP(a net.Addr, ips []net.IP) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	for _, ip := range ips {
		if ta.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// prefixConn replays what the listener read before handing it over.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// slotListener is what a test's server accepts its one connection from.
type slotListener struct {
	ch       chan net.Conn // from the listener (handOver)
	addr     net.Addr
	mu       sync.Mutex
	deadline time.Time
	kick     chan struct{} // the deadline changed
	closed   chan struct{}
	once     sync.Once
}

func newSlotListener(ch chan net.Conn, addr net.Addr) *slotListener {
	return &slotListener{ch: ch, addr: addr, kick: make(chan struct{}, 1), closed: make(chan struct{})}
}

// errDeadline is Accept's error past the deadline: a net.Error whose
// Timeout is true, as a TCP listener's.
var errDeadline error = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

// Accept returns the partner's connection, or fails at the deadline or
// once closed.
func (s *slotListener) Accept() (net.Conn, error) {
	for {
		s.mu.Lock()
		dl := s.deadline
		s.mu.Unlock()
		var expire <-chan time.Time
		var t *time.Timer
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return nil, errDeadline
			}
			t = time.NewTimer(d)
			expire = t.C
		}
		select {
		case c := <-s.ch:
			stopTimer(t)
			return c, nil
		case <-s.closed:
			stopTimer(t)
			return nil, net.ErrClosed
		case <-expire:
			return nil, errDeadline
		case <-s.kick:
			stopTimer(t)
		}
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// SetDeadline bounds Accept, as a TCP listener's (verbsprobe.Serve
// bounds its wait for the peer with it).
func (s *slotListener) SetDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Close ends a waiting Accept.
func (s *slotListener) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *slotListener) Addr() net.Addr { return s.addr }
