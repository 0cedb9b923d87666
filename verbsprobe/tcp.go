package verbsprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grdma/grdma/ib"
)

// grdma's exchange over TCP (protocol.go): the client sends its hello
// (the test, its endpoint) once its queue pair is in INIT, the server
// answers with its welcome once its own is in RTS, the client runs the
// test and the server gives its verdict.

// PeerAddress returns host:port for "HOST", "HOST:PORT", "[IPv6]" or
// "[IPv6]:PORT", the port defaulting to DefaultPeerPort.
func PeerAddress(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty peer address")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host, or a bracketed or bare IPv6 address.
		host, port = s, strconv.Itoa(DefaultPeerPort)
		if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
			host = s[1 : len(s)-1]
		}
	}
	if host == "" {
		return "", fmt.Errorf("peer address %q has no host", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("peer address %q: port %q is not 1-65535", s, port)
	}
	return net.JoinHostPort(host, port), nil
}

// ListenAddress returns the address to listen on for "", ":PORT",
// "ADDR" or "ADDR:PORT", the port defaulting to DefaultPeerPort.
func ListenAddress(s string) (string, error) {
	if s == "" {
		return ":" + strconv.Itoa(DefaultPeerPort), nil
	}
	if s[0] == ':' {
		return PeerAddress("0.0.0.0" + s)
	}
	return PeerAddress(s)
}

func newSession(role, host string, test Test, timeout time.Duration) *session {
	if timeout <= 0 {
		timeout = DefaultPeerTimeout
	}
	return &session{role: role, host: host, test: test, timeout: timeout, seed: rand.Uint64()}
}

// endpoint is what the device tells a peer before its queue pair exists:
// its port and address, which decide whether the two can talk.
func (d *Device) endpoint() Endpoint {
	return (&Conn{dev: d}).Endpoint()
}

// peerPath is where a queue pair connects to its peer's: the peer's queue
// pair, at the smaller active MTU, with the RDMA READs both take.
func peerPath(d *Device, test Test, remote Endpoint, rdAtomic uint8) Path {
	p := Path{DestQPN: remote.QPN, DestPSN: remote.PSN, DGID: remote.GID, DLID: remote.LID,
		MTU: pathMTU(d.port.ActiveMTU, remote.ActiveMTU), RdAtomic: min(rdAtomic, max(remote.RdAtomic, 1)), RNRRetry: rnrRetry}
	if test.Kind == TestPingpong {
		p.MTU = min(d.port.ActiveMTU, ib.MTU1024) // ibv_rc_pingpong's default -m
		p.RNRRetry = 7                            // as ibv_rc_pingpong
	}
	if test.Kind == TestUDPingpong {
		p.QKey = udPingpongQKey
	}
	if test.Op == OpSend {
		p.RNRRetry = 7 // a receiver reposting may lag: retry forever, as perftest
	}
	return p
}

// peerSide is what both of grdma's and ibv_rc_pingpong's exchanges keep:
// the connection to the peer and the result's peer part.
type peerSide struct {
	s    *session
	peer *PeerResult
}

func (x *peerSide) link() *session                { return x.s }
func (x *peerSide) Role() string                  { return x.s.role }
func (x *peerSide) Test() Test                    { return x.s.test }
func (x *peerSide) Failed(step string, err error) { x.s.reportFailure(step, err) }
func (x *peerSide) Close() error                  { x.s.close(); return nil }

// takeRemote records the peer's endpoint and checks it fits.
func (x *peerSide) takeRemote(d *Device, remote Endpoint) (string, error) {
	s := x.s
	s.remote = remote
	pingpong := isPingpong(s.test.Kind)
	x.peer.Host, x.peer.Remote, x.peer.Pingpong = s.host, &remote, pingpong
	if !pingpong {
		if err := compatible(d.endpoint(), remote); err != nil {
			return "", err
		}
	}
	x.peer.PathMTU = peerPath(d, s.test, remote, 1).MTU
	return fmt.Sprintf("peer %s: %s, %s, qpn %d, path MTU %s", s.host, remote.Name(), addressOf(remote), remote.QPN, x.peer.PathMTU), nil
}

func addressOf(e Endpoint) string {
	if e.GIDIndex < 0 {
		return fmt.Sprintf("LID %#x", e.LID)
	}
	return fmt.Sprintf("GID %d %s", e.GIDIndex, e.GID)
}

// grdmaClient is the client of grdma's exchange (Connect).
type grdmaClient struct {
	peerSide
	key []byte // the responder's shared secret, if it asks
}

func (x *grdmaClient) Steps() ExchangeSteps {
	return ExchangeSteps{Trade: StepConnect, Finish: StepFinish}
}

func (x *grdmaClient) Begin(ctx context.Context, _ *Device) (context.Context, string, error) {
	return ctx, "", nil
}

// Trade connects to the server, sends the hello and takes its welcome;
// a busy responder is asked again until the timeout.
func (x *grdmaClient) Trade(ctx context.Context, c *Conn) (Path, string, error) {
	s := x.s
	local := c.Endpoint()
	hello, err := json.Marshal(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &s.test, Seed: s.seed, Endpoint: &local})
	if err != nil {
		return Path{}, "", err
	}
	m, err := x.helloRetrying(ctx, hello)
	if err != nil {
		return Path{}, "", err
	}
	detail, err := x.takeRemote(c.dev, *m.Endpoint)
	if err != nil {
		return Path{}, "", err
	}
	return peerPath(c.dev, s.test, *m.Endpoint, c.shape.RdAtomic), detail, nil
}

// helloRetrying says hello and returns the welcome, asking a busy
// responder again until the timeout.
func (x *grdmaClient) helloRetrying(ctx context.Context, hello []byte) (wireMessage, error) {
	s := x.s
	deadline := time.Now().Add(s.timeout)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		m, err := x.hello(ctx, hello)
		var busy *busyError
		if errors.As(err, &busy) && time.Now().Add(wait).Before(deadline) {
			s.close()
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return m, fmt.Errorf("interrupted waiting for %s: %w", s.host, ctx.Err())
			}
		}
		return m, err
	}
}

// hello connects, sends the hello (answering a challenge) and returns the
// welcome; a busy answer is a *busyError.
func (x *grdmaClient) hello(ctx context.Context, hello []byte) (wireMessage, error) {
	s := x.s
	const doing = "waiting for the queue pair of"
	if err := s.dial(ctx); err != nil {
		return wireMessage{}, err
	}
	if err := s.write(append(hello, '\n')); err != nil {
		return wireMessage{}, err
	}
	if err := s.foreignAnswer(doing); err != nil {
		return wireMessage{}, err
	}
	m, err := s.receive(doing)
	if err == nil && m.Type == msgChallenge {
		if x.key == nil {
			return m, &PeerError{Host: s.host, Doing: doing, Err: errors.New("the responder asks for its shared secret: give auth FILE")}
		}
		if err := s.send(wireMessage{Type: msgAuth, MAC: authMAC(x.key, m.Nonce, hello)}); err != nil {
			return m, err
		}
		m, err = s.receive(doing)
	}
	if errors.Is(err, errPeerClosed) || errors.Is(err, syscall.ECONNRESET) {
		return m, &PeerError{Host: s.host, Doing: doing, Err: fmt.Errorf(
			"the peer closed the connection without answering: not a grdma probe listener, or one whose from does not allow this host? (ibv_rc_pingpong and perftest servers use port %d too: give pingpong to talk to ibv_rc_pingpong)", DefaultPeerPort)}
	}
	var remote *RemoteFailure
	if errors.As(err, &remote) && m.Endpoint != nil {
		// The server refused: say why in this side's words.
		var local Endpoint
		if json.Unmarshal(hello, &wireMessage{Endpoint: &local}) == nil {
			if cerr := compatible(local, *m.Endpoint); cerr != nil {
				return m, cerr
			}
		}
	}
	switch {
	case err != nil:
		return m, err
	case m.Type == msgBusy:
		return m, &PeerError{Host: s.host, Doing: doing, Err: &busyError{errors.New(strings.TrimPrefix(m.Error, "busy: "))}}
	case m.Type != msgWelcome || m.Endpoint == nil:
		return m, s.peerError(doing, fmt.Errorf("got a %q message, want a welcome", m.Type))
	case m.Protocol != ProtocolVersion:
		return m, s.peerError("talking to", fmt.Errorf("the peer speaks grdma probe protocol %d, this side %d: use the same grdma on both", m.Protocol, ProtocolVersion))
	}
	return m, nil
}

func (x *grdmaClient) Ready(context.Context, *Conn) (string, error) { return "", nil }

// Finish tells the server the test is over and takes its verdict.
func (x *grdmaClient) Finish(context.Context, *Result) (string, error) {
	s := x.s
	if err := s.send(wireMessage{Type: msgDone, OK: true}); err != nil {
		return "", err
	}
	m, err := s.expect(msgVerdict, "waiting for the verdict of")
	if err != nil {
		return "", err
	}
	if !m.OK {
		return "", &RemoteFailure{Step: m.Step, Message: m.Error}
	}
	return "the peer: " + m.Detail, nil
}

// dial connects to the peer, retrying a refused connection until the
// timeout: the peer's listener may start a moment later.
func (s *session) dial(ctx context.Context) error {
	deadline := time.Now().Add(s.timeout)
	dialer := s.dialer
	if dialer == nil {
		dialer = (&net.Dialer{}).DialContext
	}
	refused := &PeerError{Host: s.host, Doing: "connecting to", Err: fmt.Errorf("connection refused for %v: no `grdma probe DEV listen` there, or another port", s.timeout)}
	wasRefused := false
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		conn, err := dialer(dctx, "tcp", s.host)
		cancel()
		if err == nil {
			s.attach(ctx, conn)
			return nil
		}
		var dnsErr *net.DNSError
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted connecting to %s: %w", s.host, ctx.Err())
		case errors.As(err, &dnsErr):
			return &PeerError{Host: s.host, Doing: "resolving", Err: fmt.Errorf("unknown host %s", dnsErr.Name)}
		case errors.Is(err, syscall.ECONNREFUSED):
			wasRefused = true
			if time.Until(deadline) < 100*time.Millisecond {
				return refused
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		case wasRefused && time.Now().After(deadline):
			// The last retry started too late (a loaded machine): the host
			// answered, it refused.
			return refused
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			return &PeerError{Host: s.host, Doing: "connecting to", Err: fmt.Errorf("no answer within %v: a wrong address, or a firewall dropping TCP", s.timeout)}
		}
		return &PeerError{Host: s.host, Doing: "connecting to", Err: err}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// grdmaServer is the server of grdma's exchange for a client whose hello
// arrived.
type grdmaServer struct {
	peerSide
	arr *arrival
	cfg ServeConfig
	// cancel ends the budget Begin gave the peer.
	cancel context.CancelFunc
}

func (x *grdmaServer) Steps() ExchangeSteps {
	return ExchangeSteps{Begin: StepAccept, Ready: StepWelcome, Finish: StepFinish}
}

// Begin takes the client's hello: the test, its endpoint, which must fit
// this side's. The peer has the test's budget from now on.
func (x *grdmaServer) Begin(ctx context.Context, d *Device) (context.Context, string, error) {
	s, m := x.s, x.arr.hello
	ctx, x.cancel = withBudget(ctx, x.cfg.Limits, x.arr.test, s.timeout)
	s.host = x.arr.conn.RemoteAddr().String()
	s.test, s.seed = x.arr.test, m.Seed
	x.peer.Host, x.peer.Test = s.host, &s.test
	s.attachReader(ctx, x.arr.conn, x.arr.rd)
	local := d.endpoint()
	refuse := func(err error) (context.Context, string, error) {
		s.failedSent = true
		s.send(wireMessage{Type: msgFailed, Step: StepAccept, Error: err.Error(), Endpoint: &local, Protocol: ProtocolVersion})
		return ctx, "", err
	}
	if err := compatible(local, *m.Endpoint); err != nil {
		return refuse(err)
	}
	detail, err := x.takeRemote(d, *m.Endpoint)
	if err != nil {
		return refuse(err)
	}
	return ctx, detail + ", test " + s.test.String() + refusedNote(x.arr.refused), nil
}

func (x *grdmaServer) Trade(_ context.Context, c *Conn) (Path, string, error) {
	return peerPath(c.dev, x.s.test, x.s.remote, c.shape.RdAtomic), "", nil
}

// Ready sends this side's endpoint: the queue pair is in RTS, the test
// armed.
func (x *grdmaServer) Ready(_ context.Context, c *Conn) (string, error) {
	local := c.Endpoint()
	if err := x.s.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &local}); err != nil {
		return "", err
	}
	if c.mr == nil {
		return fmt.Sprintf("qpn %d, no memory region", local.QPN), nil
	}
	return fmt.Sprintf("qpn %d, rkey %#x, %d × %d bytes", local.QPN, local.RKey, 2, local.Part), nil
}

// Finish takes the client's "done" (unless the test did) and sends the
// verdict: every check of this side passed. Reading it first leaves
// nothing unread when the connection closes (which would reset it under
// the verdict) and suits a transport without buffers.
func (x *grdmaServer) Finish(_ context.Context, res *Result) (string, error) {
	if !x.s.gotDone {
		if _, err := x.s.expect(msgDone, "waiting for the done of"); err != nil {
			return "", err
		}
		x.s.gotDone = true
	}
	var details []string
	for _, st := range res.Steps {
		if st.Name == x.s.test.stepName() || isTrafficStep(st.Name) {
			details = append(details, st.Detail)
		}
	}
	detail := joinLines(details...)
	if detail == "" {
		detail = "queue pair in RTS"
	}
	return "", x.s.send(wireMessage{Type: msgVerdict, OK: true, Detail: detail})
}

func (x *grdmaServer) Close() error {
	if x.cancel != nil {
		x.cancel()
	}
	return x.peerSide.Close()
}

func isTrafficStep(name string) bool {
	return name == StepSend || name == StepRDMAWrite || name == StepRDMARead
}

// serverFor is the exchange of a peer whose first message arrived: grdma's
// or ibv_rc_pingpong's.
func serverFor(arr *arrival, cfg ServeConfig, peer *PeerResult) Exchange {
	if arr.cm != nil {
		return newCMServer(arr, cfg, peer)
	}
	s := newSession(RoleServer, arr.conn.RemoteAddr().String(), cfg.Pingpong, cfg.Timeout)
	if arr.hello == nil {
		return &pingpongServer{peerSide: peerSide{s: s, peer: peer}, arr: arr, cfg: cfg}
	}
	return &grdmaServer{peerSide: peerSide{s: s, peer: peer}, arr: arr, cfg: cfg}
}

// listenExchange waits on a listener for its first valid peer (acceptFirst)
// and then is that peer's exchange.
type listenExchange struct {
	Exchange // the peer's, once one arrived
	ln       net.Listener
	cfg      ServeConfig
	peer     *PeerResult
}

func (x *listenExchange) Steps() ExchangeSteps {
	if x.Exchange == nil {
		return ExchangeSteps{Begin: StepAccept}
	}
	return x.Exchange.Steps()
}

func (x *listenExchange) Role() string { return RoleServer }

func (x *listenExchange) Begin(ctx context.Context, d *Device) (context.Context, string, error) {
	timeout := x.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultPeerTimeout
	}
	arr, err := acceptFirst(ctx, x.ln, x.cfg, timeout)
	if err != nil {
		return ctx, "", err
	}
	x.Exchange = serverFor(arr, x.cfg, x.peer)
	return x.Exchange.Begin(ctx, d)
}

func (x *listenExchange) link() *session {
	if l, ok := x.Exchange.(linked); ok {
		return l.link()
	}
	return nil
}

func (x *listenExchange) Failed(step string, err error) {
	if x.Exchange != nil {
		x.Exchange.Failed(step, err)
	}
}

func (x *listenExchange) Close() error {
	x.ln.Close()
	if x.Exchange != nil {
		return x.Exchange.Close()
	}
	return nil
}
