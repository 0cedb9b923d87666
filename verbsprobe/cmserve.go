package verbsprobe

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// The passive side of a probe over the RDMA CM: a listener's requests
// (cmArrivals) become arrivals like a TCP peer's first message, admitted
// under the same limits, each served by a cmServer on the shared Device.

// cmArrived is a CM request whose hello was valid.
type cmArrived struct {
	ch    *cmChannel
	req   rdmacm.ConnRequest
	hello cmHello
}

// from is the peer's address, for logs and results.
func (a *arrival) from() string {
	if a.cm != nil {
		return a.cm.req.Addr.Dst.String()
	}
	return a.conn.RemoteAddr().String()
}

// reject refuses an arrival over the CM with why (busy: try again).
func (c *cmArrived) reject(busy bool, err error) {
	c.req.Conn.Reject(rdmacm.RejectConsumer, refusalData(busy, err.Error()))
	c.req.Conn.Destroy()
}

// cmArrivals is a CM listener's source of arrivals.
type cmArrivals struct {
	ch      *cmChannel
	l       rdmacm.Listener
	cfg     ServeConfig
	addr    netip.AddrPort // bound
	refused int
}

// listenCM binds and listens on l.Addr.
func listenCM(ch *cmChannel, l CMListen, cfg ServeConfig) (*cmArrivals, error) {
	ln, err := ch.CreateListener(rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, err
	}
	if err := ln.Bind(l.Addr); err != nil {
		ln.Destroy()
		return nil, fmt.Errorf("RDMA CM listener on %s: %w", l.Addr, err)
	}
	if err := ln.Listen(l.Backlog); err != nil {
		ln.Destroy()
		return nil, fmt.Errorf("RDMA CM listener on %s: %w", l.Addr, err)
	}
	a := &cmArrivals{ch: ch, l: ln, cfg: cfg, addr: l.Addr}
	if got, err := ln.QueryAddr(); err == nil && got.Src.IsValid() {
		a.addr = got.Src
	}
	return a, nil
}

func (a *cmArrivals) refuse(from string, busy bool, err error) {
	a.refused++
	if a.cfg.OnRefused != nil {
		a.cfg.OnRefused(Refusal{Peer: from, Reason: output.Escape("RDMA CM: " + err.Error()), Busy: busy})
	}
}

// next returns the next request whose hello the listener accepts;
// others are rejected (with grdma's reason in the REJ) and logged.
func (a *cmArrivals) next(ctx context.Context) (*arrival, error) {
	for {
		req, err := a.l.NextRequest(ctx)
		if err != nil {
			return nil, err
		}
		arr := &arrival{cm: &cmArrived{ch: a.ch, req: req}}
		from := req.Addr.Dst.String()
		if err := a.check(arr); err != nil {
			arr.cm.reject(false, err)
			a.refuse(from, false, err)
			continue
		}
		return arr, nil
	}
}

// check reads and checks a request's hello against the listener's
// policy.
func (a *cmArrivals) check(arr *arrival) error {
	c := arr.cm
	if len(a.cfg.Allow) > 0 && !Allowed(a.cfg.Allow, net.TCPAddrFromAddrPort(c.req.Addr.Dst)) {
		return errors.New("not in the listener's from")
	}
	if a.cfg.Key != nil {
		return errors.New("the listener asks for its shared secret (auth), which a probe over RDMA CM cannot prove: probe without cm, or a listener without auth")
	}
	if err := c.hello.UnmarshalBinary(c.req.Peer.PrivateData); err != nil {
		return err
	}
	test := c.hello.Test.WithDefaults()
	if err := test.Validate(); err != nil {
		return fmt.Errorf("a test this side cannot run: %w", err)
	}
	if err := a.cfg.Limits.Check(test); err != nil {
		return err
	}
	arr.test = test
	return nil
}

func (a *cmArrivals) close() error { return a.l.Destroy() }

// cmServer is the server of one CM request.
type cmServer struct {
	cmSide
	arr      *arrival
	cfg      ServeConfig
	cancel   context.CancelFunc
	ctl      net.Listener
	token    [16]byte
	accepted bool
}

func newCMServer(arr *arrival, cfg ServeConfig, peer *PeerResult) *cmServer {
	test := arr.test
	s := newSession(RoleServer, arr.from(), test, cfg.Timeout)
	s.seed = arr.cm.hello.Seed
	info := &CMInfo{GIDIndex: -1}
	peer.CM = info
	return &cmServer{cmSide: cmSide{peerSide: peerSide{s: s, peer: peer}, ch: arr.cm.ch, id: arr.cm.req.Conn, info: info,
		control: test.Kind != TestConnect}, arr: arr, cfg: cfg}
}

func (x *cmServer) Steps() ExchangeSteps {
	fin := StepDisconnect
	if x.control {
		fin = StepFinish
	}
	return ExchangeSteps{Begin: StepAccept, Ready: StepEstablish, Finish: fin}
}

// Begin takes the request: the device it came to must be d's; a test that
// moves data gets its control channel's listener.
func (x *cmServer) Begin(ctx context.Context, d *Device) (context.Context, string, error) {
	s, req := x.s, x.arr.cm.req
	ctx, x.cancel = withBudget(ctx, x.cfg.Limits, s.test, s.timeout)
	x.peer.Host, x.peer.Test = s.host, &s.test
	name, err := x.ch.deviceName(req.Addr.Device)
	if err != nil {
		return ctx, "", x.refuse(err)
	}
	port := uint32(req.Addr.Device.Port)
	if name != d.opts.Device || port != d.opts.Port {
		return ctx, "", x.refuse(fmt.Errorf("the request came to %s/%d; this side serves %s", name, port, d.Name()))
	}
	route, _ := x.id.QueryRoute()
	x.info.fill(req.Addr, route, name, port, d.opts)
	if x.info.GIDIndex < 0 {
		x.info.GIDIndex = d.addr.GIDIndex
	}
	if x.control {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(req.Addr.Src.Addr(), 0).String())
		if err != nil {
			return ctx, "", x.refuse(fmt.Errorf("no TCP port for the test's control channel: %w", err))
		}
		x.ctl = ln
		rand.Read(x.token[:])
		x.info.ControlPort = uint16(ln.Addr().(*net.TCPAddr).Port)
	}
	return ctx, fmt.Sprintf("peer %s over RDMA CM to %s, test %s%s", s.host, x.info.describe(), s.test, refusedNote(x.arr.refused)), nil
}

// refuse rejects the request with err, which it returns.
func (x *cmServer) refuse(err error) error {
	if !x.accepted {
		x.accepted = true // nothing more to tell
		x.id.Reject(rdmacm.RejectConsumer, refusalData(false, err.Error()))
	}
	return err
}

// Trade: the peer's queue pair came in the request.
func (x *cmServer) Trade(_ context.Context, c *Conn) (Path, string, error) {
	p := x.arr.cm.req.Peer
	remote := Endpoint{QPN: p.QPNum, GID: x.info.DGID, GIDIndex: -1}
	x.peer.Remote = &remote
	return Path{DestQPN: p.QPNum, DGID: x.info.DGID, MTU: x.info.PathMTU, RdAtomic: c.shape.RdAtomic, RNRRetry: 7}, "", nil
}

// Ready accepts (the REP: this queue pair, in RTS, armed) and waits for
// the client's RTU; a test that moves data then takes the client on its
// control channel and tells it this side's memory.
func (x *cmServer) Ready(ctx context.Context, c *Conn) (string, error) {
	w := cmWelcome{Token: x.token, Port: x.info.ControlPort}
	priv, _ := w.MarshalBinary()
	p := x.arr.cm.req.Peer
	rd := c.shape.RdAtomic
	start := time.Now()
	x.accepted = true
	if err := x.id.Accept(rdmacm.ConnParam{QPNum: c.QPN(), ResponderResources: max(min(p.ResponderResources, rd), 1),
		InitiatorDepth: max(min(p.InitiatorDepth, rd), 1), RetryCount: retryCount, RNRRetryCount: 7, PrivateData: priv}); err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, x.s.timeout)
	err := x.id.WaitEstablished(wctx)
	cancel()
	if err != nil {
		return "", err
	}
	x.info.took(CMStepEstablish, time.Since(start))
	if !x.control {
		return fmt.Sprintf("qpn %d, established", c.QPN()), nil
	}
	if err := x.takeControl(ctx, c); err != nil {
		return "", err
	}
	local := c.Endpoint()
	return fmt.Sprintf("qpn %d, established; control channel TCP %d, rkey %#x, %d × %d bytes", local.QPN, x.info.ControlPort, local.RKey, 2, local.Part), nil
}

// takeControl waits for the client on the control channel: the first
// connection whose hello has the token and the test of the request (any
// other is closed), then answers with this side's memory.
func (x *cmServer) takeControl(ctx context.Context, c *Conn) error {
	s := x.s
	deadline := time.Now().Add(s.timeout)
	stop := context.AfterFunc(ctx, func() { x.ctl.Close() })
	defer stop()
	x.ctl.(*net.TCPListener).SetDeadline(deadline)
	for {
		conn, err := x.ctl.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return interruption(ctx)
			}
			return &PeerError{Host: s.host, Doing: "waiting on the control channel for", Err: fmt.Errorf("no connection to TCP port %d within %v (a firewall passing RDMA but not TCP?)", x.info.ControlPort, s.timeout)}
		}
		m, ok := x.controlHello(conn, deadline)
		if !ok {
			conn.Close()
			continue
		}
		x.ctl.Close()
		s.attachReader(ctx, conn, m.rd)
		s.remote = *m.msg.Endpoint
		local := c.Endpoint()
		return s.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &local})
	}
}

type controlHello struct {
	msg wireMessage
	rd  *bufio.Reader
}

// controlHello reads a control connection's hello: the request's token
// and test, an endpoint.
func (x *cmServer) controlHello(conn net.Conn, deadline time.Time) (controlHello, bool) {
	rd := bufio.NewReaderSize(conn, 4096)
	conn.SetReadDeadline(deadline)
	probe := &session{conn: conn, rd: rd, timeout: x.s.timeout}
	line, err := probe.readLine()
	if err != nil {
		return controlHello{}, false
	}
	m, err := parseMessage(line)
	if err != nil || m.Type != msgHello || m.Endpoint == nil || m.Test == nil || subtle.ConstantTimeCompare(m.Token, x.token[:]) != 1 {
		return controlHello{}, false
	}
	if m.Test.WithDefaults() != x.s.test || m.Seed != x.s.seed {
		return controlHello{}, false
	}
	conn.SetReadDeadline(time.Time{})
	return controlHello{msg: m, rd: rd}, true
}

// Finish gives the verdict over the control channel, then waits for the
// client's DISCONNECT and answers it.
func (x *cmServer) Finish(ctx context.Context, res *Result) (string, error) {
	if x.control {
		g := &grdmaServer{peerSide: x.peerSide}
		if _, err := g.Finish(ctx, res); err != nil {
			return "", err
		}
	}
	if err := x.disconnect(ctx, false); err != nil {
		return "", err
	}
	return "disconnected", nil
}

// Failed tells the peer: a reject before the REP, the control channel
// after.
func (x *cmServer) Failed(step string, err error) {
	if !x.accepted {
		x.refuse(fmt.Errorf("%s: %w", step, err))
		return
	}
	x.peerSide.Failed(step, err)
}

func (x *cmServer) Close() error {
	if x.ctl != nil {
		x.ctl.Close()
	}
	if x.cancel != nil {
		x.cancel()
	}
	return x.cmSide.Close()
}

// ServeCM waits on the RDMA CM at l.Addr for one probe over the CM (the
// first request with a valid hello: others are rejected, logged, and it
// keeps waiting), serves the test it asks for on the device the request
// came to (opts.Device when given: requests to other devices are
// rejected), and returns this side's result. The listener is destroyed
// once a peer is taken; nothing is left behind.
func ServeCM(ctx context.Context, opts Options, cfg ServeConfig, l CMListen) *Result {
	return serveCM(ctx, opts, cfg, l, nil)
}

func serveCM(ctx context.Context, opts Options, cfg ServeConfig, l CMListen, open func() (*cmChannel, error)) *Result {
	res := newResult(opts)
	res.Peer = &PeerResult{Role: RoleServer, Host: l.Addr.String()}
	if open == nil {
		open = func() (*cmChannel, error) { return openCM(l.Open, opts.Sysfs) }
	}
	x := &cmListenExchange{open: open, l: l, cfg: cfg, peer: res.Peer}
	return probe(ctx, opts, x, res)
}

// cmListenExchange waits for the first valid request (as the device
// chooser: the request names the device), then is its cmServer.
type cmListenExchange struct {
	*cmServer
	open func() (*cmChannel, error)
	ch   *cmChannel
	l    CMListen
	cfg  ServeConfig
	peer *PeerResult
}

func (x *cmListenExchange) chooseStep() string { return StepRequest }

// StepRequest is a CM listener's wait for its peer's connection request.
const StepRequest = "request"

func (x *cmListenExchange) ChooseDevice(ctx context.Context, opts Options) (Options, string, error) {
	ch, err := x.open()
	if err != nil {
		return opts, "", err
	}
	x.ch = ch
	a, err := listenCM(ch, x.l, x.cfg)
	if err != nil {
		return opts, "", err
	}
	defer a.close()
	timeout := x.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultPeerTimeout
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		arr, err := a.next(wait)
		switch {
		case err != nil && ctx.Err() != nil:
			return opts, "", fmt.Errorf("interrupted waiting for a peer over RDMA CM on %s: %w", a.addr, ctx.Err())
		case err != nil && wait.Err() != nil:
			return opts, "", &PeerError{Host: a.addr.String(), Doing: "waiting over RDMA CM for a peer on",
				Err: fmt.Errorf("no peer connected within %v (give a longer timeout)%s", timeout, refusedNote(a.refused))}
		case err != nil:
			return opts, "", err
		}
		name, err := ch.deviceName(arr.cm.req.Addr.Device)
		port := uint32(arr.cm.req.Addr.Device.Port)
		if err == nil && opts.Device != "" && (name != opts.Device || port != max(opts.Port, 1)) {
			err = fmt.Errorf("the request came to %s/%d; this side serves %s/%d", name, port, opts.Device, max(opts.Port, 1))
		}
		if err != nil {
			arr.cm.reject(false, err)
			a.refuse(arr.from(), false, err)
			continue
		}
		arr.refused = a.refused
		x.cmServer = newCMServer(arr, x.cfg, x.peer)
		opts.Device, opts.Port = name, port
		route, _ := arr.cm.req.Conn.QueryRoute()
		var ci CMInfo
		ci.fill(arr.cm.req.Addr, route, name, port, opts)
		if ci.GIDIndex >= 0 {
			opts.GIDIndex = ci.GIDIndex
		}
		return opts, fmt.Sprintf("a request from %s to %s/%d", arr.from(), name, port), nil
	}
}

func (x *cmListenExchange) Role() string { return RoleServer }

func (x *cmListenExchange) Steps() ExchangeSteps {
	if x.cmServer == nil {
		return ExchangeSteps{}
	}
	return x.cmServer.Steps()
}

func (x *cmListenExchange) link() *session {
	if x.cmServer == nil {
		return nil
	}
	return x.cmServer.link()
}

func (x *cmListenExchange) Failed(step string, err error) {
	if x.cmServer != nil {
		x.cmServer.Failed(step, err)
	}
}

func (x *cmListenExchange) QPAttr(ctx context.Context, c *Conn, attr uverbs.QPAttr, mask uverbs.QPAttrMask) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	return x.cmServer.QPAttr(ctx, c, attr, mask)
}

func (x *cmListenExchange) Close() error {
	if x.cmServer != nil {
		x.cmServer.Close()
	}
	if x.ch != nil {
		x.ch.Close()
	}
	return nil
}

// CMDevice is the device port the RDMA CM binds connections over addr, an
// address of this host, to (rdmacm's Choose: a loopback connection, no
// queue pairs, nothing left): where a responder for addr must run. open
// nil opens the CM below fsys.
func CMDevice(ctx context.Context, open func() (*rdmacm.Channel, error), fsys sysfs.FS, addr netip.Addr) (string, uint32, error) {
	if open == nil {
		open = func() (*rdmacm.Channel, error) { return locator.OpenRDMACM(fsys, nil) }
	}
	ch, err := open()
	if err != nil {
		return "", 0, err
	}
	defer ch.Close()
	c, err := ch.Choose(ctx, addr)
	if err != nil {
		return "", 0, err
	}
	name, err := locator.CMDevice(fsys, c.Device)
	return name, uint32(c.Device.Port), err
}
