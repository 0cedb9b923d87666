package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/grdma/grdma/uverbs"
)

// Steps of a probe between two hosts, besides the local probe's.
const (
	StepConnect = "connect" // client: TCP connect, hello, the peer's endpoint
	StepAccept  = "accept"  // server: a client's connection and hello
	StepWelcome = "welcome" // server: its endpoint, its queue pair in RTS
	StepFinish  = "finish"  // the sides' verdicts exchanged
)

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

// Connect probes the path to the peer that Serve answers at addr
// (host:port): both queue pairs are brought to RTS against each other,
// then test runs. timeout (0: DefaultPeerTimeout) bounds the connection,
// which is retried while refused, and every wait on the peer. The result
// lists this side's steps; a failure of the peer is a *RemoteFailure.
// Everything is torn down on every path, and ctx stops the probe.
//
// With TestPingpong the peer is an ibv_rc_pingpong server
// (`ibv_rc_pingpong -g N`), spoken to in its own exchange.
func Connect(ctx context.Context, opts Options, addr string, test Test, timeout time.Duration) *Result {
	test = test.WithDefaults()
	p := newProber(ctx, opts)
	p.session = newSession(RoleClient, addr, test, timeout)
	p.res.Role, p.res.Test, p.res.Peer = RoleClient, &test, &Peer{Host: addr}
	defer p.teardown()
	if err := test.Validate(); err != nil {
		p.record(StepConnect, 0, "", err)
		return p.res
	}
	p.runClient(ctx)
	return p.res
}

// Serve waits on ln for one peer (Connect, or an ibv_rc_pingpong client),
// brings its queue pair to RTS against the peer's and serves the test the
// peer asks for, within cfg's limits. It accepts connections until one
// sends a valid first message, a hello within the limits or an
// ibv_rc_pingpong address; each other one is told why if it is a grdma
// client, logged (cfg.Logf) and closed. Then ln is closed: the first
// valid peer wins. The peer may stay for its test's budget
// (Limits.Budget), then it is cut off (*OverstayError). An
// ibv_rc_pingpong client is answered with cfg.Pingpong's Size and Iters.
func Serve(ctx context.Context, opts Options, ln net.Listener, cfg ServeConfig) *Result {
	p := newProber(ctx, opts)
	p.serve = cfg
	p.session = newSession(RoleServer, "", cfg.Pingpong, cfg.Timeout)
	p.res.Role = RoleServer
	defer p.teardown()
	p.runServer(ctx, ln)
	return p.res
}

func newSession(role, host string, test Test, timeout time.Duration) *session {
	if timeout <= 0 {
		timeout = DefaultPeerTimeout
	}
	return &session{role: role, host: host, test: test, timeout: timeout, seed: rand.Uint64()}
}

func (p *prober) runClient(ctx context.Context) {
	connect := p.connectPeer
	if p.session.test.Kind == TestPingpong {
		connect = p.connectPingpongServer
	}
	if p.prologue(ctx) && p.connectQP(ctx, stepFunc{StepConnect, connect}, stepFunc{}) {
		p.finish(ctx, p.finishClient)
	}
}

func (p *prober) runServer(ctx context.Context, ln net.Listener) {
	welcome := p.welcome
	accept := stepFunc{StepAccept, func() (string, error) {
		detail, err := p.accept(ln)
		if err == nil && p.session.test.Kind == TestPingpong {
			welcome = p.welcomePingpong
		}
		return detail, err
	}}
	if !p.prologue(ctx, accept) {
		if p.res.Unsupported != "" {
			p.session.reportFailure(StepCreateCQ, errors.New(p.res.Unsupported))
		}
		return
	}
	ctx = p.ctx // the peer's budget, from its hello on
	if p.connectQP(ctx, stepFunc{}, stepFunc{StepWelcome, func() (string, error) { return welcome() }}) {
		p.finish(ctx, p.finishServer)
	}
}

// connectQP makes the queue pair and connects it to the peer's: the
// client exchanges endpoints before RTR (before), the server after RTS
// (after); an empty stepFunc is none.
func (p *prober) connectQP(ctx context.Context, before, after stepFunc) bool {
	steps := []stepFunc{{StepCreateCQ, p.createCQ}, {StepCreateQP, p.createQP}}
	if p.session.test.Pinned() > 0 { // connect moves no data: no memory
		steps = append(steps, stepFunc{StepRegMR, p.regMR})
	}
	steps = append(steps, stepFunc{StepInit, p.toInit})
	if before.fn != nil {
		steps = append(steps, before)
	}
	steps = append(steps, stepFunc{StepRTR, p.toRTR}, stepFunc{StepRTS, p.toRTS}, stepFunc{StepQueryQP, p.queryQP})
	if after.fn != nil {
		steps = append(steps, after)
	}
	return p.steps(ctx, steps)
}

// finish runs the test and, but for ibv_rc_pingpong's, which has none,
// the exchange of verdicts.
func (p *prober) finish(ctx context.Context, verdicts func() (string, error)) {
	if p.peerTest(ctx) && p.session.test.Kind != TestPingpong {
		p.step(ctx, StepFinish, verdicts)
	}
}

// endpoint is what this side tells its peer.
func (p *prober) endpoint() Endpoint {
	e := Endpoint{Ifname: p.opts.Device, Port: p.opts.Port, Driver: p.res.Driver, LinkLayer: p.port.LinkLayer.String(),
		GIDIndex: p.res.GIDIndex, GID: p.res.GID, LID: p.port.LID, PSN: p.startPSN, ActiveMTU: p.port.ActiveMTU.Bytes(),
		RdAtomic: p.rdAtomic()}
	if p.res.GIDIndex >= 0 {
		e.GIDType = p.res.GIDType.String()
	}
	if p.qp != nil {
		e.QPN = p.qp.QP().QPN
	}
	if p.mr != nil {
		e.Addr, e.RKey, e.Part = p.mr.mr.Addr, p.mr.mr.RKey, p.mr.part
	}
	return e
}

// rdAtomic is how many RDMA READs this side keeps outstanding (and takes
// from its peer): 16 for read tests, as far as the device allows, else 1.
func (p *prober) rdAtomic() uint8 {
	if s := p.session; s != nil && (s.test.Op == OpRead || s.test.Kind == TestTraffic) {
		n := uint32(16)
		if a := p.deviceAttr.MaxQPRdAtom; a > 0 && a < n {
			n = a
		}
		return uint8(n)
	}
	return rdAtomicSize
}

// connection connects to the peer's queue pair.
func (s *session) connection(p *prober) connection {
	c := connection{destQPN: s.remote.QPN, destPSN: s.remote.PSN, dgid: s.remote.GID, dlid: s.remote.LID,
		pathMTU: pathMTU(p.port.ActiveMTU, s.remote.ActiveMTU), rdAtomic: min(p.rdAtomic(), max(s.remote.RdAtomic, 1)),
		rnrRetry: rnrRetry}
	if s.test.Kind == TestPingpong {
		c.pathMTU = min(p.port.ActiveMTU, uverbs.MTU1024) // ibv_rc_pingpong's default -m
		c.rnrRetry = 7                                    // as ibv_rc_pingpong
	}
	if s.test.Op == OpSend {
		c.rnrRetry = 7 // a receiver reposting may lag: retry forever, as perftest
	}
	return c
}

// Queue shapes of the tests.
const (
	bwWindow    = 128 // outstanding requests of a bw test (perftest's tx depth)
	pingpongRX  = 500 // ibv_rc_pingpong's receive depth
	latencyRecv = 16
)

// qpShape sizes the queues for the test.
func (s *session) qpShape() (uint32, uverbs.QPCap) {
	send, recv := uint32(queueDepth), uint32(queueDepth)
	switch s.test.Kind {
	case TestBandwidth:
		send, recv = bwWindow, bwWindow
	case TestPingpong:
		recv = pingpongRX
	case TestLatency:
		recv = latencyRecv
	}
	return send + recv, uverbs.QPCap{MaxSendWR: send, MaxRecvWR: recv, MaxSendSGE: 1, MaxRecvSGE: 1}
}

// regionShape sizes the memory region for the test: traffic's four parts
// of Size bytes, else a source and a target of Size bytes.
func (s *session) regionShape() (part, count int) {
	if s.test.Kind == TestTraffic {
		return max(s.test.Size, payloadSize), regionCount
	}
	return s.test.Size, 2
}

// dial connects to the peer, retrying a refused connection until the
// timeout: the peer's listener may start a moment later.
func (s *session) dial(ctx context.Context) error {
	deadline := time.Now().Add(s.timeout)
	var d net.Dialer
	refused := &PeerError{Host: s.host, Doing: "connecting to", Err: fmt.Errorf("connection refused for %v: no `grdma probe DEV listen` there, or another port", s.timeout)}
	wasRefused := false
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		conn, err := d.DialContext(dctx, "tcp", s.host)
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

// connectPeer sends the hello and takes the server's endpoint.
func (p *prober) connectPeer() (string, error) {
	s := p.session
	if err := s.dial(p.ctx); err != nil {
		return "", err
	}
	if s.test.Kind == TestLatency && s.test.Op == OpSend {
		if err := p.postReceives(); err != nil {
			return "", err
		}
	}
	local := p.endpoint()
	if err := s.send(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &s.test, Seed: s.seed, Endpoint: &local}); err != nil {
		return "", err
	}
	if err := s.foreignAnswer("waiting for the queue pair of"); err != nil {
		return "", err
	}
	m, err := s.receive("waiting for the queue pair of")
	if errors.Is(err, errPeerClosed) || errors.Is(err, syscall.ECONNRESET) {
		return "", &PeerError{Host: s.host, Doing: "waiting for the queue pair of", Err: fmt.Errorf(
			"the peer closed the connection without answering: not a grdma probe listener, or one whose from does not allow this host? (ibv_rc_pingpong and perftest servers use port %d too: give pingpong to talk to ibv_rc_pingpong)", DefaultPeerPort)}
	}
	var remote *RemoteFailure
	if errors.As(err, &remote) && m.Endpoint != nil {
		// The server refused: say why in this side's words.
		if cerr := compatible(local, *m.Endpoint); cerr != nil {
			return "", cerr
		}
	}
	if err != nil {
		return "", err
	}
	if m.Type != msgWelcome || m.Endpoint == nil {
		return "", s.peerError("waiting for the queue pair of", fmt.Errorf("got a %q message, want a welcome", m.Type))
	}
	if m.Protocol != ProtocolVersion {
		return "", s.peerError("talking to", fmt.Errorf("the peer speaks grdma probe protocol %d, this side %d: use the same grdma on both", m.Protocol, ProtocolVersion))
	}
	return p.takeRemote(*m.Endpoint)
}

// takeRemote records the peer's endpoint and checks it fits.
func (p *prober) takeRemote(remote Endpoint) (string, error) {
	s := p.session
	s.remote = remote
	p.res.Peer = &Peer{Host: s.host, Endpoint: remote, Pingpong: s.test.Kind == TestPingpong}
	if s.test.Kind != TestPingpong {
		if err := compatible(p.endpoint(), remote); err != nil {
			return "", err
		}
	}
	p.res.PathMTU = s.connection(p).pathMTU
	return fmt.Sprintf("peer %s: %s, %s, qpn %d, path MTU %s", s.host, remote.Name(), addressOf(remote), remote.QPN, p.res.PathMTU), nil
}

func addressOf(e Endpoint) string {
	if e.GIDIndex < 0 {
		return fmt.Sprintf("LID %#x", e.LID)
	}
	return fmt.Sprintf("GID %d %s", e.GIDIndex, e.GID)
}

// accept waits for a client and reads its hello (or an ibv_rc_pingpong
// client's address).
func (p *prober) accept(ln net.Listener) (string, error) {
	s := p.session
	arr, refused, err := acceptFirst(p.ctx, ln, p.serve, s.timeout)
	if err != nil {
		return "", err
	}
	s.host = arr.conn.RemoteAddr().String()
	test := arr.test
	if arr.hello == nil {
		test = Test{Kind: TestPingpong, Size: s.test.Size, Iters: s.test.Iters}.WithDefaults()
	}
	// The peer has its test's budget, from now to its verdict.
	ctx, cancel := withBudget(p.ctx, p.serve.Limits, test, s.timeout)
	p.ctx, p.cancel = ctx, cancel
	s.attachReader(p.ctx, arr.conn, arr.rd)
	note := ""
	if refused > 0 {
		note = refusedNote(refused)
	}
	if arr.hello == nil {
		detail, err := p.acceptPingpong(test, arr.pingpong)
		return detail + note, err
	}
	m := arr.hello
	local := p.endpoint()
	refuse := func(err error) (string, error) {
		s.failedSent = true
		s.send(wireMessage{Type: msgFailed, Step: StepAccept, Error: err.Error(), Endpoint: &local, Protocol: ProtocolVersion})
		return "", err
	}
	s.test, s.seed = test, m.Seed
	p.res.Test = &test
	if err := compatible(local, *m.Endpoint); err != nil {
		return refuse(err)
	}
	detail, err := p.takeRemote(*m.Endpoint)
	if err != nil {
		return refuse(err)
	}
	return detail + ", test " + test.String() + note, nil
}

// welcome prepares the test and sends this side's endpoint: the queue
// pair is in RTS, receives are posted.
func (p *prober) welcome() (string, error) {
	s := p.session
	if err := p.prepareServer(); err != nil {
		return "", err
	}
	local := p.endpoint()
	if err := s.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &local}); err != nil {
		return "", err
	}
	if p.mr == nil {
		return fmt.Sprintf("qpn %d, no memory region", local.QPN), nil
	}
	return fmt.Sprintf("qpn %d, rkey %#x, %d × %d bytes", local.QPN, local.RKey, 2, local.Part), nil
}

// finishClient tells the server the test is over and takes its verdict.
func (p *prober) finishClient() (string, error) {
	s := p.session
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

// finishServer sends the verdict: every check of this side passed.
func (p *prober) finishServer() (string, error) {
	var details []string
	for _, st := range p.res.Steps {
		if st.Name == p.session.test.stepName() || isTrafficStep(st.Name) {
			details = append(details, st.Detail)
		}
	}
	detail := joinLines(details...)
	if detail == "" {
		detail = "queue pair in RTS"
	}
	return "", p.session.send(wireMessage{Type: msgVerdict, OK: true, Detail: detail})
}

func isTrafficStep(name string) bool {
	return name == StepSend || name == StepRDMAWrite || name == StepRDMARead
}
