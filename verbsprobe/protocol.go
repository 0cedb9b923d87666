package verbsprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ProtocolVersion is the version of grdma's out-of-band exchange. A side
// refuses a peer of another version, naming both.
//
// The exchange is JSON, one object a line, over one TCP connection:
//
//	client → server  {"type":"hello","grdma_probe":2,"test":{...},"seed":N,"endpoint":{...}}
//	server → client  {"type":"challenge","nonce":"..."}                  (auth: a shared secret)
//	client → server  {"type":"auth","mac":"..."}                         (HMAC-SHA256 of nonce and hello)
//	server → client  {"type":"welcome","grdma_probe":2,"endpoint":{...}}   (its queue pair in RTS)
//	client → server  {"type":"progress","done":N}                        (bw and lat, every second)
//	client → server  {"type":"done","ok":true}                            (its test finished)
//	server → client  {"type":"verdict","ok":true,"detail":"..."}          (its checks)
//
// Either side sends {"type":"failed","step":"...","error":"..."} when its
// side fails, and then closes the connection. A responder that cannot
// serve a valid hello now (its peers or memory in use) answers
// {"type":"busy","error":"..."} and closes; the client tries again until
// its timeout. Version 2 added challenge, auth and busy.
const ProtocolVersion = 2

// Message types of the exchange.
const (
	msgHello     = "hello"
	msgChallenge = "challenge"
	msgAuth      = "auth"
	msgWelcome   = "welcome"
	msgBusy      = "busy"
	msgProgress  = "progress"
	msgDone      = "done"
	msgVerdict   = "verdict"
	msgFailed    = "failed"
)

// maxMessage bounds one line of the exchange.
const maxMessage = 64 << 10

// wireMessage is one line of the exchange; Type says which fields count.
type wireMessage struct {
	Type     string    `json:"type"`
	Protocol int       `json:"grdma_probe,omitempty"`
	Test     *Test     `json:"test,omitempty"`
	Seed     uint64    `json:"seed,omitempty"`
	Endpoint *Endpoint `json:"endpoint,omitempty"`
	Done     int       `json:"done,omitempty"`
	OK       bool      `json:"ok,omitempty"`
	Step     string    `json:"step,omitempty"`
	Error    string    `json:"error,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	Nonce    []byte    `json:"nonce,omitempty"` // challenge
	MAC      []byte    `json:"mac,omitempty"`   // auth
	// Token names a probe over the RDMA CM on its control channel: the
	// one the server's CM reply offered (cm.go).
	Token []byte `json:"token,omitempty"`
}

// Roles of the two sides.
const (
	RoleClient = "client" // Connect: asks for the test and runs it
	RoleServer = "server" // Serve: answers
)

// session is a probe's link to its peer on another host.
type session struct {
	role    string
	host    string
	conn    net.Conn
	rd      *bufio.Reader
	timeout time.Duration
	test    Test
	seed    uint64 // the payloads' pattern
	remote  Endpoint
	// failedSent is set once this side has told the peer it failed.
	failedSent bool
	// gotDone is set once a server has read its client's "done".
	gotDone bool
	// incoming, while a server serves a test, carries the client's
	// messages, read by a goroutine.
	incoming chan received
	quit     chan struct{} // closed by close: the reader goroutine stops
	ctx      context.Context
	stopCtx  func() bool
	// dialer, when set, makes the client's connection instead of TCP.
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// received is a message read, or why none could be.
type received struct {
	msg wireMessage
	err error
}

// attach makes conn the session's connection; ctx's end unblocks a read
// on it. Writes stay possible: an interrupted side still tells its peer.
func (s *session) attach(ctx context.Context, conn net.Conn) {
	s.attachReader(ctx, conn, bufio.NewReaderSize(conn, 4096))
}

// attachReader is attach with the reader that already read from conn.
func (s *session) attachReader(ctx context.Context, conn net.Conn, rd *bufio.Reader) {
	s.ctx, s.conn, s.rd = ctx, conn, rd
	s.stopCtx = context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
}

func (s *session) close() {
	if s.quit != nil {
		close(s.quit)
		s.quit = nil
	}
	if s.stopCtx != nil {
		s.stopCtx()
	}
	if s.conn != nil {
		s.conn.Close()
	}
}

// send writes one message within the timeout.
func (s *session) send(m wireMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.conn.Write(append(b, '\n')); err != nil {
		return s.peerError("writing to", err)
	}
	return nil
}

// receive reads one message within the timeout; a "failed" message from
// the peer is a *RemoteFailure.
func (s *session) receive(doing string) (wireMessage, error) {
	if s.incoming != nil { // a goroutine reads: take its next message
		select {
		case r, ok := <-s.incoming:
			switch {
			case !ok:
				return wireMessage{}, s.peerError(doing, errPeerClosed)
			case r.err != nil:
				return r.msg, s.peerError(doing, r.err)
			}
			return r.msg, nil
		case <-time.After(s.timeout):
			return wireMessage{}, s.peerError(doing, fmt.Errorf("no answer within %v", s.timeout))
		}
	}
	s.conn.SetReadDeadline(time.Now().Add(s.timeout))
	m, err := s.readMessage()
	if err != nil {
		return m, s.peerError(doing, err)
	}
	return m, nil
}

func (s *session) readMessage() (wireMessage, error) {
	line, err := s.readLine()
	if err != nil {
		return wireMessage{}, err
	}
	return parseMessage(line)
}

// parseMessage decodes one line of the exchange and makes the peer's text
// safe to print before anything keeps it; a "failed" message is a
// *RemoteFailure.
func parseMessage(line []byte) (wireMessage, error) {
	var m wireMessage
	if err := json.Unmarshal(line, &m); err != nil {
		var pt *PeerTextError
		if errors.As(err, &pt) {
			return wireMessage{}, pt
		}
		return wireMessage{}, fmt.Errorf("not a grdma probe message (%v): %.60q", err, line)
	}
	m.Step, m.Error, m.Detail = peerStep(m.Step), peerText(m.Error), peerText(m.Detail)
	if m.Endpoint != nil {
		if err := m.Endpoint.validate(); err != nil {
			return wireMessage{}, err
		}
	}
	if m.Type == msgFailed {
		return m, &RemoteFailure{Step: m.Step, Message: m.Error}
	}
	return m, nil
}

func (s *session) readLine() ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := s.rd.ReadLine()
		line = append(line, part...)
		switch {
		case errors.Is(err, io.EOF) && len(line) == 0:
			return nil, errPeerClosed
		case err != nil:
			return nil, err
		case len(line) > maxMessage:
			return nil, fmt.Errorf("a line longer than %d bytes: not a grdma probe peer", maxMessage)
		case !isPrefix:
			return line, nil
		}
	}
}

// peerError wraps err with the peer's address and what this side was
// doing; a timeout says how long it waited.
func (s *session) peerError(doing string, err error) error {
	var remote *RemoteFailure
	if errors.As(err, &remote) {
		return err
	}
	if s.ctx != nil && s.ctx.Err() != nil {
		var over *OverstayError
		if errors.As(context.Cause(s.ctx), &over) {
			return over
		}
		return fmt.Errorf("interrupted %s %s: %w", doing, s.host, s.ctx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("no answer within %v", s.timeout)
	}
	return &PeerError{Host: s.host, Doing: doing, Err: err}
}

// expect reads the next message, which must be of type want.
func (s *session) expect(want, doing string) (wireMessage, error) {
	m, err := s.receive(doing)
	if err != nil {
		return m, err
	}
	if m.Type != want {
		return m, s.peerError(doing, fmt.Errorf("got a %q message, want %q: a grdma of another protocol?", m.Type, want))
	}
	return m, nil
}

// reportFailure tells the peer, once, that this side failed at step.
func (s *session) reportFailure(step string, err error) {
	if s.conn == nil || s.failedSent {
		return
	}
	s.failedSent = true
	var remote *RemoteFailure
	var pe *PeerError
	if errors.As(err, &remote) || errors.As(err, &pe) {
		return // the peer knows, or cannot be told
	}
	s.send(wireMessage{Type: msgFailed, Step: step, Error: err.Error()})
}

// readInBackground starts delivering the peer's messages on s.incoming,
// for a side that must watch the queues and the connection at once.
func (s *session) readInBackground() {
	incoming, quit := make(chan received, 16), make(chan struct{})
	s.incoming, s.quit = incoming, quit
	s.conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(incoming)
		for {
			m, err := s.readMessage()
			select {
			case incoming <- received{m, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// watcher follows the messages readInBackground delivers: the peer's
// last sign of life and its "done".
type watcher struct {
	s         *session
	lastHeard time.Time
	done      *wireMessage
	// quiet: the peer sends nothing while this side runs the test (a
	// client), so silence means nothing.
	quiet bool
}

// check takes the messages that arrived; it fails when the peer failed,
// went away, or was silent for the timeout.
func (w *watcher) check(doing string) error {
	for {
		select {
		case r, ok := <-w.s.incoming:
			if err := w.take(doing, r, ok); err != nil {
				return err
			}
		default:
			if !w.quiet && time.Since(w.lastHeard) > w.s.timeout {
				return w.s.peerError(doing, fmt.Errorf("no word from the peer for %v", w.s.timeout))
			}
			return nil
		}
	}
}

// untilDone waits, without polling, for the peer's "done": it fails when
// the peer failed, went away or was silent for the timeout, or ctx ended.
func (w *watcher) untilDone(ctx context.Context, doing string) error {
	for w.done == nil {
		silence := time.NewTimer(w.s.timeout - time.Since(w.lastHeard))
		select {
		case r, ok := <-w.s.incoming:
			silence.Stop()
			if err := w.take(doing, r, ok); err != nil {
				return err
			}
		case <-silence.C:
			return w.s.peerError(doing, fmt.Errorf("no word from the peer for %v", w.s.timeout))
		case <-ctx.Done():
			silence.Stop()
			if err := interruption(ctx); !errors.Is(err, context.Canceled) {
				return err
			}
			return fmt.Errorf("interrupted %s the peer: %w", doing, ctx.Err())
		}
	}
	return nil
}

// take takes one message the reader delivered.
func (w *watcher) take(doing string, r received, ok bool) error {
	if !ok {
		return w.s.peerError(doing, errPeerClosed)
	}
	if r.err != nil {
		return w.s.peerError(doing, r.err)
	}
	w.lastHeard = time.Now()
	switch r.msg.Type {
	case msgDone:
		m := r.msg
		w.done, w.s.gotDone = &m, true
	case msgProgress:
	default:
		return w.s.peerError(doing, fmt.Errorf("unexpected %q message", r.msg.Type))
	}
	return nil
}

// heard notes a sign of life that came through the queues.
func (w *watcher) heard() { w.lastHeard = time.Now() }

// ticker paces a client's progress messages.
type ticker struct {
	s    *session
	next time.Time
}

const progressEvery = time.Second

// tick sends a progress message once a second. When the peer cannot be
// written to, its own failure, if it sent one before it closed, says
// more than the write's error.
func (t *ticker) tick(done int) error { return t.tickAt(done, time.Now()) }

// tickAt is tick at now, a time the caller read.
func (t *ticker) tickAt(done int, now time.Time) error {
	if now.After(t.next) {
		t.next = now.Add(progressEvery)
		if err := t.s.send(wireMessage{Type: msgProgress, Done: done}); err != nil {
			if rf := t.s.failureSent(); rf != nil {
				return rf
			}
			return err
		}
	}
	return nil
}

// failureSent returns the peer's failure if the reader delivers one
// within a moment (it may be reading it while this side fails to
// write), or nil.
func (s *session) failureSent() error {
	if s.incoming == nil {
		return nil
	}
	wait := time.NewTimer(200 * time.Millisecond)
	defer wait.Stop()
	for {
		select {
		case r, ok := <-s.incoming:
			var rf *RemoteFailure
			if !ok {
				return nil
			}
			if errors.As(r.err, &rf) {
				return rf
			}
			if r.err != nil {
				return nil
			}
		case <-wait.C:
			return nil
		}
	}
}
