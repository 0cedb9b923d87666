package verbsprobe

import (
	"context"
	"fmt"
)

// An Exchange connects a Conn's queue pair to its peer's: it learns the
// peer's queue pair and tells the peer this one, over whatever it speaks
// (nothing for a queue pair connected to itself, grdma's TCP exchange,
// ibv_rc_pingpong's, RDMA CM). A probe calls it in this order, each call
// a step named by Steps (a call without a name runs unrecorded), and
// stops at the first failure:
//
//	Begin   before anything is made on the device: a server waits for
//	        its peer and learns the test
//	Trade   the queue pair is in INIT: learn the peer's (the Path) and
//	        tell it this one; a client's first word to its peer
//	Ready   the queue pair is in RTS: tell the peer; a server's first
//	        word about its queue pair
//	Finish  the test ran: exchange the sides' verdicts
//	Close   always, last
//
// Failed is called for each failed step, for the exchange to tell its
// peer. An exchange that chooses the device (RDMA CM's active side, whose
// device is the one its route resolved to) also implements
// DeviceChooser; one that gives the queue pair's transitions their
// attributes (RDMA CM's INIT_QP_ATTR) also implements QPAttrSource.
type Exchange interface {
	Steps() ExchangeSteps
	// Role is RoleClient, RoleServer, or "" for a queue pair connected
	// to itself.
	Role() string
	// Begin returns the context for the rest of the probe: a server's
	// ends when its peer has had its budget (Limits.Budget).
	Begin(ctx context.Context, dev *Device) (context.Context, string, error)
	// Test is what the probe runs once the queue pairs are in RTS, known
	// after Begin.
	Test() Test
	Trade(ctx context.Context, c *Conn) (Path, string, error)
	Ready(ctx context.Context, c *Conn) (string, error)
	Finish(ctx context.Context, res *Result) (string, error)
	Failed(step string, err error)
	Close() error
}

// ExchangeSteps are the step names of an Exchange's calls; "" runs the
// call unrecorded.
type ExchangeSteps struct {
	Begin, Trade, Ready, Finish string
}

// DeviceChooser is an Exchange that chooses the device port to probe
// from: RDMA CM's active side knows it only once the route to its peer
// is resolved. ChooseDevice runs first, as a step named by its first
// result's Choose; it returns the device port (Options' Device and Port
// set, the rest as given), whose Device the probe then opens.
type DeviceChooser interface {
	ChooseDevice(ctx context.Context, opts Options) (Options, string, error)
}

// Steps of a probe between two hosts, besides the local probe's.
const (
	StepConnect = "connect" // client: TCP connect, hello, the peer's endpoint
	StepAccept  = "accept"  // server: a client's connection and hello
	StepWelcome = "welcome" // server: its endpoint, its queue pair in RTS
	StepFinish  = "finish"  // the sides' verdicts exchanged
)

// probeRun is one probe: a Conn on a Device, connected by an Exchange,
// then a test; its fields are what exists, which the teardown releases.
type probeRun struct {
	rec  *recorder
	dev  *Device
	x    Exchange
	conn *Conn
	test Test
}

// probe opens opts' device (or the one x chooses), runs x's probe on it
// and closes it: a one-shot probe, on this host alone or with a peer.
func probe(ctx context.Context, opts Options, x Exchange, res *Result) *Result {
	opts = withDefaults(opts)
	rec := newRecorder(ctx, res, nil)
	rec.failed = x.Failed
	defer x.Close()
	if dc, ok := x.(DeviceChooser); ok {
		var chosen Options
		name := StepResolve
		if n, ok := x.(interface{ chooseStep() string }); ok {
			name = n.chooseStep() // a CM listener's: its peer's request
		}
		if !rec.step(ctx, name, func() (detail string, err error) {
			chosen, detail, err = dc.ChooseDevice(ctx, opts)
			return detail, err
		}) {
			return res
		}
		opts = withDefaults(chosen)
		res.Device, res.Port = opts.Device, opts.Port
	}
	dev := openDevice(rec, opts)
	if dev == nil {
		return res
	}
	defer dev.close(rec)
	run(rec, dev, x)
	return res
}

// StepResolve is the step of a DeviceChooser: the device port its peer
// is reached from.
const StepResolve = "resolve"

// run runs x's probe on dev, a Device opened before (and closed after)
// by the caller; the result is rec's. A responder runs one per peer on
// one Device.
func run(rec *recorder, dev *Device, x Exchange) {
	p := &probeRun{rec: rec, dev: dev, x: x}
	p.run()
}

func (p *probeRun) run() {
	rec, x := p.rec, p.x
	ctx := rec.ctx
	if !rec.run(x.Steps().Begin, func() (detail string, err error) {
		ctx, detail, err = x.Begin(ctx, p.dev)
		return detail, err
	}) {
		return
	}
	rec.ctx = ctx // a server's peer has its budget from now on
	p.test = x.Test()
	if p.dev.driver == nil {
		rec.res.Unsupported = p.dev.unsupportedDriver()
		if x.Role() == RoleServer {
			x.Failed(StepCreateCQ, fmt.Errorf("%s", rec.res.Unsupported))
		}
		return
	}
	impl := testFor(p.test, x.Role())
	p.conn = p.dev.newConn(impl.shape(p.dev, p.test))
	defer p.conn.close(rec)
	env := &testEnv{ctx: rec.ctx, rec: rec, conn: p.conn, test: p.test, role: x.Role(), link: linkOf(x)}
	connected := p.connect(env, impl)
	if rec.res.Peer != nil {
		rec.res.Peer.Pinned = p.conn.pinned()
	}
	if !connected {
		return
	}
	if impl.run != nil && !impl.run(env) {
		return
	}
	if name := x.Steps().Finish; name != "" {
		rec.step(rec.ctx, name, func() (string, error) { return x.Finish(rec.ctx, rec.res) })
	}
}

// connect makes the Conn's objects and connects its queue pair through
// the exchange: RESET→INIT, the trade, RTR, RTS, QUERY_QP, ready. The
// test arms the Conn (receives, memory) just before the exchange shows
// the queue pair to the peer: a client's trade, a server's ready.
func (p *probeRun) connect(env *testEnv, impl testImpl) bool {
	rec, x, c, steps := p.rec, p.x, p.conn, p.x.Steps()
	src, _ := x.(QPAttrSource)
	arm := func(role string) error {
		if x.Role() != role || impl.arm == nil {
			return nil
		}
		return impl.arm(env)
	}
	var path Path
	all := []stepFunc{{StepCreateCQ, c.createCQ}, {StepCreateQP, func() (string, error) {
		detail, err := c.createQP()
		if err == nil {
			rec.res.QPN = c.QPN()
		}
		return detail, err
	}}}
	if c.shape.Parts > 0 {
		all = append(all, stepFunc{StepRegMR, c.regMR})
	}
	all = append(all, stepFunc{StepInit, func() (string, error) { return c.toInit(rec.ctx, src) }})
	for _, s := range all {
		if !rec.step(rec.ctx, s.name, s.fn) {
			return false
		}
	}
	if !rec.run(steps.Trade, func() (detail string, err error) {
		if err := arm(RoleClient); err != nil {
			return "", err
		}
		path, detail, err = x.Trade(rec.ctx, c)
		return detail, err
	}) {
		return false
	}
	after := []stepFunc{
		{StepRTR, func() (string, error) { return c.toRTR(rec.ctx, path, src) }},
		{StepRTS, func() (string, error) { return c.toRTS(rec.ctx, src) }},
		{StepQueryQP, c.queryQP},
	}
	if c.ud() {
		after = append(after, stepFunc{StepCreateAH, c.createAH})
	}
	if !rec.steps(after) {
		return false
	}
	return rec.run(steps.Ready, func() (string, error) {
		if err := arm(RoleServer); err != nil {
			return "", err
		}
		return x.Ready(rec.ctx, c)
	})
}

// selfExchange connects a queue pair to itself: the probe of one host.
type selfExchange struct{ traffic bool }

func (selfExchange) Steps() ExchangeSteps { return ExchangeSteps{} }
func (selfExchange) Role() string         { return "" }
func (selfExchange) Begin(ctx context.Context, _ *Device) (context.Context, string, error) {
	return ctx, "", nil
}
func (x selfExchange) Test() Test {
	if x.traffic {
		return Test{Kind: TestTraffic}
	}
	return Test{Kind: TestConnect}
}
func (selfExchange) Trade(_ context.Context, c *Conn) (Path, string, error) {
	return c.selfPath(), "", nil
}
func (selfExchange) Ready(context.Context, *Conn) (string, error)    { return "", nil }
func (selfExchange) Finish(context.Context, *Result) (string, error) { return "", nil }
func (selfExchange) Failed(string, error)                            {}
func (selfExchange) Close() error                                    { return nil }
