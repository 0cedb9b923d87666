package exporter

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit holds the connections of one listen address to a number.
// When a connection arrives at the limit, the one idle longest between
// two requests is closed to make room (HTTP lets a server close an idle
// keep-alive connection at any time; a client opens another), or, when
// none is idle, the new one waits for a connection to end. So clients
// that open connections and keep them cannot make the exporter hold more
// than the limit, nor keep Prometheus out for longer than it takes to
// answer their own requests. A connection that sends nothing is closed by
// the server's ReadHeaderTimeout.
type connLimit struct {
	slots chan struct{} // one per connection held
	idle  chan struct{} // a connection went idle: one may be closed

	mu      sync.Mutex
	conns   map[net.Conn]connState // by the accepted connection
	closing bool                   // shutting down
}

type connState struct {
	state http.ConnState
	since time.Time
}

func newConnLimit(n int) *connLimit {
	return &connLimit{slots: make(chan struct{}, n), idle: make(chan struct{}, 1), conns: map[net.Conn]connState{}}
}

// listener returns l with the limit applied to what it accepts.
func (cl *connLimit) listener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, cl: cl, done: make(chan struct{})}
}

// track is the server's ConnState hook.
func (cl *connLimit) track(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch s {
	case http.StateNew, http.StateActive, http.StateIdle:
		if s == http.StateNew && cl.closing {
			c.Close()
			return
		}
		cl.conns[c] = connState{s, time.Now()}
		if s == http.StateIdle {
			select {
			case cl.idle <- struct{}{}:
			default:
			}
		}
	default:
		delete(cl.conns, c)
	}
}

// closeIdlest closes the connection idle longest; false if none is idle.
func (cl *connLimit) closeIdlest() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var idlest net.Conn
	var since time.Time
	for c, st := range cl.conns {
		if st.state == http.StateIdle && (idlest == nil || st.since.Before(since)) {
			idlest, since = c, st.since
		}
	}
	if idlest == nil {
		return false
	}
	delete(cl.conns, idlest)
	idlest.Close()
	return true
}

// closeWithoutRequest closes, at shutdown, the connections that have not
// begun a request (a client that dialled ahead, a port scan): http.Server's
// Shutdown would count them busy for 5 s though no scrape is in flight.
// One accepted from then on is closed as it comes.
func (cl *connLimit) closeWithoutRequest() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.closing = true
	for c, st := range cl.conns {
		if st.state == http.StateNew {
			c.Close()
		}
	}
}

type limitListener struct {
	net.Listener
	cl        *connLimit
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
}

// Accept takes the next connection and a slot for it: a free one, or
// one that closing the idlest connection frees, now or as soon as a
// connection goes idle or ends.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.cl.slots <- struct{}{}:
			return &limitConn{Conn: c, slots: l.cl.slots}, nil
		default:
		}
		l.cl.closeIdlest()
		select {
		case l.cl.slots <- struct{}{}:
			return &limitConn{Conn: c, slots: l.cl.slots}, nil
		case <-l.cl.idle:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed, once.
type limitConn struct {
	net.Conn
	slots     chan struct{}
	closeOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { <-c.slots })
	return err
}
