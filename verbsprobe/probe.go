// Package verbsprobe proves that an RDMA device can run a queue pair: it
// opens the device's uverbs interface (pure Go, no libibverbs), creates a
// protection domain, a completion queue and a reliable connected queue
// pair, connects the queue pair to itself (RESET→INIT→RTR→RTS), checks
// with QUERY_QP that it is ready to send and, with traffic, sends real
// data through it (SEND, RDMA WRITE, RDMA READ) and verifies every byte.
// Everything is torn down in order, on every path.
//
// Each step is timed and reported; a failure names the step, the errno
// and its likely cause. rxe (Soft-RoCE) is probed fully. mlx5 is probed
// up to a queue pair in RTS (its data path would need libmlx5's WQE and
// doorbell formats). Other drivers are probed up to the protection domain
// and reported as not supported.
//
// The kernel frees everything a process created in its uverbs context when
// the device is closed, so even a probe that is killed leaves nothing
// behind.
//
// Between two hosts, Serve on one and Connect on the other bring their
// queue pairs to RTS against each other over a small TCP exchange and run
// a test: traffic, bandwidth or latency, or ibv_rc_pingpong's loop with
// an ibv_rc_pingpong peer. The tests use a driver's data path only
// through two interfaces (posting work requests, polling completions:
// drivers.go), so a second driver's data path (mlx5's WQEs and doorbells)
// needs neither the exchange nor the command line changed.
package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Options says what to probe.
type Options struct {
	// Sysfs is the root the device is found under (sysfs.NewFS("/")).
	Sysfs  sysfs.FS
	Device string // the RDMA device, e.g. "rxe0"
	// Port is the port number, from 1; 0 means 1.
	Port uint32
	// GIDIndex is the source GID of the queue pair's address. AutoGID
	// chooses with the gid selector: RoCE v2 IPv4 first, then other RoCE
	// v2, then RoCE v1; on InfiniBand, no GRH (the port's LID). Note that
	// the zero value is index 0, not AutoGID.
	GIDIndex int
	// Traffic sends data through the queue pair and verifies it.
	Traffic bool
	// CompletionTimeout bounds the wait for each operation's
	// completions; 0 means DefaultCompletionTimeout.
	CompletionTimeout time.Duration
	// AddressWait bounds the wait for the chosen GID's IPv6 address to
	// finish duplicate address detection; 0 means DefaultAddressWait.
	AddressWait time.Duration
}

// AutoGID asks for the GID the selector chooses.
const AutoGID = -1

// DefaultCompletionTimeout is how long an operation's completions may
// take. On rxe they take tens of microseconds; a lost packet is retried
// for about half a second before the queue pair gives up.
const DefaultCompletionTimeout = 2 * time.Second

// Step names, in the order they run. Every step that runs is reported;
// the teardown steps run for the objects that exist, whatever failed.
const (
	StepOpen        = "open"         // find the uverbs device in sysfs, open it, GET_CONTEXT
	StepQueryDevice = "query_device" // QUERY_DEVICE
	StepQueryPort   = "query_port"   // QUERY_PORT; the port must be ACTIVE
	StepAddress     = "address"      // the GID (RoCE) or LID (InfiniBand) to connect to; waits for IPv6 DAD
	StepAllocPD     = "alloc_pd"     // ALLOC_PD
	StepCreateCQ    = "create_cq"    // CREATE_CQ with the driver's queue
	StepCreateQP    = "create_qp"    // CREATE_QP, RC, with the driver's queues
	StepInit        = "modify_qp_init"
	StepRTR         = "modify_qp_rtr" // connected to itself
	StepRTS         = "modify_qp_rts"
	StepQueryQP     = "query_qp" // QUERY_QP confirms RTS and the connection
	StepRegMR       = "reg_mr"   // traffic: REG_MR of mmapped buffers
	StepSend        = "send"     // a RECV and a SEND, payload verified
	StepRDMAWrite   = "rdma_write"
	StepRDMARead    = "rdma_read" // reads back what the write wrote
	StepDeregMR     = "dereg_mr"
	StepDestroyQP   = "destroy_qp"
	StepDestroyCQ   = "destroy_cq"
	StepDeallocPD   = "dealloc_pd"
	StepClose       = "close"
)

// Step is the outcome of one step.
type Step struct {
	Name     string
	OK       bool
	Duration time.Duration
	Detail   string     // what it found or made, e.g. "qpn 17"
	Err      *StepError // nil when OK
}

// Result is the outcome of a probe.
type Result struct {
	Device      string
	Port        uint32
	Driver      string // as sysfs names it: "rxe", "mlx5_core", ...
	VerbsDevice string // "uverbs0"
	LinkLayer   uverbs.LinkLayer
	// GIDIndex is the source GID of the queue pair's address, -1 when
	// the address has none (InfiniBand by LID) or none was chosen yet.
	GIDIndex int
	GID      gid.GID
	LID      uint16
	QPN      uint32
	Traffic  bool
	// GIDType is the type of the GID at GIDIndex.
	GIDType gid.Type
	Steps   []Step
	// Unsupported says why the probe stopped short without a failure: the
	// driver's data is unknown to grdma.
	Unsupported string

	// Between two hosts (Connect, Serve): this side's role, the test, the
	// peer, the path MTU both queue pairs use, and what was measured.
	Role         string
	Test         *Test
	Peer         *Peer
	PathMTU      uverbs.MTU
	Measurements []Measurement
	// Pinned is the bytes of memory this side registered (pinned) for
	// the test.
	Pinned int
}

// OK reports whether the probe did everything it was asked and every
// step passed.
func (r *Result) OK() bool { return r.Failed() == nil && r.Unsupported == "" }

// Failed returns the first step that failed, or nil.
func (r *Result) Failed() *Step {
	for i := range r.Steps {
		if !r.Steps[i].OK {
			return &r.Steps[i]
		}
	}
	return nil
}

// Duration is the time of all steps.
func (r *Result) Duration() time.Duration {
	var d time.Duration
	for _, s := range r.Steps {
		d += s.Duration
	}
	return d
}

// Err returns the first failure, or an *UnsupportedError, or nil.
func (r *Result) Err() error {
	if s := r.Failed(); s != nil {
		return s.Err
	}
	if r.Unsupported != "" {
		return &UnsupportedError{Device: r.Device, Reason: r.Unsupported}
	}
	return nil
}

// UnsupportedError means the probe could not check everything because
// grdma does not know the driver's data.
type UnsupportedError struct {
	Device string
	Reason string
}

func (e *UnsupportedError) Error() string { return e.Device + ": " + e.Reason }

// The queue pair's shape: small, one SGE, every send signalled.
const (
	queueDepth   = 16
	cqEntries    = 2 * queueDepth
	hopLimit     = 64
	minRNRTimer  = 12 // 0.64 ms
	ackTimeout   = 14 // 4.096 µs × 2^14 = 67 ms
	retryCount   = 7
	rnrRetry     = 3 // not 7 (infinite): a missing receive surfaces as an error
	rdAtomicSize = 1 // one outstanding RDMA READ each way
)

// prober runs one probe; its fields are the objects that exist, which
// teardown destroys.
type prober struct {
	ctx    context.Context // stops waits within a step
	opts   Options
	res    *Result
	dev    *sysfs.Device // see device
	c      *uverbs.Context
	port   uverbs.PortAttr
	driver *driver // nil: not a driver the probe knows
	pd     *uverbs.PD
	cq     probeCQ
	qp     probeQP
	mr     *memoryRegion
	// startPSN is the first packet sequence number, random (24 bits);
	// sending to itself, the queue pair's send and receive PSNs are equal.
	startPSN uint32
	// session is the probe's peer on another host; nil when the queue
	// pair is connected to itself.
	session    *session
	deviceAttr uverbs.DeviceAttr // QUERY_DEVICE's answer
	// serve is a server's policy; cancel ends the budget accept gave its
	// peer (ctx is then that budget's).
	serve  ServeConfig
	cancel context.CancelFunc
}

// connection is where the queue pair sends: to itself, or to a peer's
// queue pair (see Connect and Serve).
type connection struct {
	destQPN  uint32
	destPSN  uint32 // the peer's first send PSN: the receive PSN
	dgid     gid.GID
	dlid     uint16
	pathMTU  uverbs.MTU
	rdAtomic uint8 // RDMA READs outstanding each way
	rnrRetry uint8
}

// connection returns where the queue pair connects: its peer's queue pair
// when it has one, else itself.
func (p *prober) connection() connection {
	if p.session != nil {
		return p.session.connection(p)
	}
	return connection{destQPN: p.qp.QP().QPN, destPSN: p.startPSN, dgid: p.res.GID, dlid: p.res.LID,
		pathMTU: p.port.ActiveMTU, rdAtomic: rdAtomicSize, rnrRetry: rnrRetry}
}

// qpShape returns the completion queue's entries and the queue pair's
// capacities.
func (p *prober) qpShape() (cqe uint32, qpCap uverbs.QPCap) {
	if p.session != nil {
		return p.session.qpShape()
	}
	return cqEntries, uverbs.QPCap{MaxSendWR: queueDepth, MaxRecvWR: queueDepth, MaxSendSGE: 1, MaxRecvSGE: 1}
}

// Run probes the device opts names. The result lists every step that ran;
// ctx stops the probe between steps (the teardown still runs).
func Run(ctx context.Context, opts Options) *Result {
	p := newProber(ctx, opts)
	defer p.teardown()
	p.run(ctx)
	return p.res
}

func newProber(ctx context.Context, opts Options) *prober {
	if opts.Port == 0 {
		opts.Port = 1
	}
	if opts.CompletionTimeout == 0 {
		opts.CompletionTimeout = DefaultCompletionTimeout
	}
	return &prober{
		ctx:      ctx,
		opts:     opts,
		res:      &Result{Device: opts.Device, Port: opts.Port, GIDIndex: AutoGID, Traffic: opts.Traffic},
		startPSN: rand.Uint32() & 0xffffff,
	}
}

// stepFunc is one step: it returns what it found or made, or why it
// failed.
type stepFunc struct {
	name string
	fn   func() (detail string, err error)
}

// prologue runs the steps every probe starts with, up to a protection
// domain, then more; false when one failed, or when the driver's queues
// are unknown to grdma (Result.Unsupported says so).
func (p *prober) prologue(ctx context.Context, more ...stepFunc) bool {
	if !p.steps(ctx, append([]stepFunc{
		{StepOpen, p.open},
		{StepQueryDevice, p.queryDevice},
		{StepQueryPort, p.queryPort},
		{StepAddress, p.chooseAddress},
		{StepAllocPD, p.allocPD},
	}, more...)) {
		return false
	}
	if p.driver == nil {
		p.res.Unsupported = fmt.Sprintf("driver %s not supported by the probe: its CREATE_CQ and CREATE_QP need driver data grdma does not know (checked up to ALLOC_PD)",
			p.res.Driver)
		return false
	}
	return true
}

func (p *prober) run(ctx context.Context) {
	if !p.prologue(ctx) {
		return
	}
	if !p.steps(ctx, []stepFunc{
		{StepCreateCQ, p.createCQ},
		{StepCreateQP, p.createQP},
		{StepInit, p.toInit},
		{StepRTR, p.toRTR},
		{StepRTS, p.toRTS},
		{StepQueryQP, p.queryQP},
	}) || !p.opts.Traffic {
		return
	}
	t, ok := newTraffic(p)
	if !ok {
		p.res.Unsupported = fmt.Sprintf("traffic on driver %s not supported by the probe: it needs the driver's data path (WQE format, doorbells), which grdma does not have; the queue pair reached RTS",
			p.res.Driver)
		return
	}
	p.steps(ctx, []stepFunc{
		{StepRegMR, p.regMR},
		{StepSend, t.send},
		{StepRDMAWrite, t.rdmaWrite},
		{StepRDMARead, t.rdmaRead},
	})
}

// steps runs steps in order until one fails; it reports whether all
// passed.
func (p *prober) steps(ctx context.Context, steps []stepFunc) bool {
	for _, s := range steps {
		if !p.step(ctx, s.name, s.fn) {
			return false
		}
	}
	return true
}

// step runs and records one step; it reports whether the step passed. A
// cancelled ctx fails the step before it runs.
func (p *prober) step(ctx context.Context, name string, fn func() (string, error)) bool {
	if ctx.Err() != nil {
		p.record(name, 0, "", interruption(ctx))
		return false
	}
	start := time.Now()
	detail, err := fn()
	p.record(name, time.Since(start), detail, err)
	return err == nil
}

func (p *prober) record(name string, d time.Duration, detail string, err error) {
	s := Step{Name: name, OK: err == nil, Duration: d, Detail: detail}
	if err != nil {
		s.Err = p.diagnose(name, err)
		if p.session != nil {
			p.session.reportFailure(name, err)
		}
	}
	p.res.Steps = append(p.res.Steps, s)
}

// teardown destroys what exists, queue pair first (the others cannot go
// while it uses them), and closes the device, each as a step.
func (p *prober) teardown() {
	ctx := context.Background()
	if p.qp != nil {
		p.step(ctx, StepDestroyQP, func() (string, error) { return "", p.qp.Destroy() })
		p.qp = nil
	}
	if p.cq != nil {
		p.step(ctx, StepDestroyCQ, func() (string, error) { return "", p.cq.Destroy() })
		p.cq = nil
	}
	if p.mr != nil {
		p.step(ctx, StepDeregMR, func() (string, error) { return "", p.mr.release(p.c) })
		p.mr = nil
	}
	if p.pd != nil {
		p.step(ctx, StepDeallocPD, func() (string, error) { return "", p.c.DeallocPD(*p.pd) })
		p.pd = nil
	}
	if p.c != nil {
		// Closing also frees whatever a failed destroy left.
		p.step(ctx, StepClose, func() (string, error) { return "", p.c.Close() })
		p.c = nil
	}
	if p.session != nil {
		p.session.close()
	}
	if p.cancel != nil {
		p.cancel()
	}
}

func (p *prober) open() (string, error) {
	c, err := uverbs.Open(p.opts.Sysfs, p.opts.Device)
	if err != nil {
		return "", p.openError(err)
	}
	p.c = c
	p.res.Driver, p.res.VerbsDevice = c.Driver, c.Verbs.Name
	if d, ok := drivers[c.Driver]; ok {
		p.driver = &d
	}
	return fmt.Sprintf("/dev/infiniband/%s, driver %s", c.Verbs.Name, c.Driver), nil
}

// openError says what could not be opened: a device that does not exist,
// or else what sysfs knows of it.
func (p *prober) openError(err error) error {
	dev, devErr := p.device()
	if sysfs.IsGone(devErr) {
		return &sysfs.NotFoundError{Device: p.opts.Device}
	}
	p.res.Driver = dev.Driver
	if vd, err := p.opts.Sysfs.VerbsDeviceFor(p.opts.Device); err == nil {
		p.res.VerbsDevice = vd.Name
	}
	var ud *uverbs.UnsupportedDriverError
	if errors.As(err, &ud) {
		p.res.Unsupported = fmt.Sprintf("driver %s not supported by the probe: %s", dev.Driver, ud.Reason)
	}
	return err
}

// device reads the RDMA device's sysfs attributes, once; only diagnoses
// need them.
func (p *prober) device() (sysfs.Device, error) {
	if p.dev == nil {
		dev, err := p.opts.Sysfs.Device(p.opts.Device)
		if err != nil {
			return sysfs.Device{}, err
		}
		p.dev = &dev
	}
	return *p.dev, nil
}

func (p *prober) queryDevice() (string, error) {
	attr, err := p.c.QueryDevice()
	if err != nil {
		return "", err
	}
	p.deviceAttr = attr
	if p.opts.Port > uint32(attr.PhysPortCnt) {
		return "", &sysfs.NotFoundError{Device: p.opts.Device, Port: p.opts.Port}
	}
	return fmt.Sprintf("vendor %#x, %d port(s), max_qp_wr %d, max_cqe %d", attr.VendorID, attr.PhysPortCnt, attr.MaxQPWr, attr.MaxCQE), nil
}

// PortNotActiveError means the port cannot carry traffic.
type PortNotActiveError struct {
	Device string
	Port   uint32
	State  uint8 // enum ib_port_state
}

func (e *PortNotActiveError) Error() string {
	return fmt.Sprintf("port %s/%d is %s, not ACTIVE", e.Device, e.Port, portStateName(e.State))
}

func portStateName(s uint8) string {
	names := [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("state %d", s)
}

const portActive = 4 // IB_PORT_ACTIVE

func (p *prober) queryPort() (string, error) {
	var err error
	if p.port, err = p.c.QueryPort(uint8(p.opts.Port)); err != nil {
		return "", err
	}
	p.res.LinkLayer = p.port.LinkLayer
	if p.port.State != portActive {
		return "", &PortNotActiveError{Device: p.opts.Device, Port: p.opts.Port, State: p.port.State}
	}
	return fmt.Sprintf("ACTIVE, %s, active MTU %s", p.port.LinkLayer, p.port.ActiveMTU), nil
}

func (p *prober) allocPD() (string, error) {
	pd, err := p.c.AllocPD()
	if err != nil {
		return "", err
	}
	p.pd = &pd
	return fmt.Sprintf("pd %d", pd.Handle), nil
}

func (p *prober) createCQ() (string, error) {
	var err error
	cqe, _ := p.qpShape()
	if p.cq, err = p.driver.createCQ(p.c, cqe); err != nil {
		return "", err
	}
	return fmt.Sprintf("cq %d, %d entries", p.cq.CQ().Handle, p.cq.CQ().CQE), nil
}

func (p *prober) createQP() (string, error) {
	cq := p.cq.CQ()
	_, qpCap := p.qpShape()
	init := uverbs.QPInit{PD: *p.pd, SendCQ: cq, RecvCQ: cq, Type: uverbs.QPTypeRC, SignalAll: true, Cap: qpCap}
	var err error
	if p.qp, err = p.driver.createQP(p.c, init); err != nil {
		return "", err
	}
	qp := p.qp.QP()
	p.res.QPN = qp.QPN
	return fmt.Sprintf("RC qpn %d, %d send and %d receive requests", qp.QPN, qp.Cap.MaxSendWR, qp.Cap.MaxRecvWR), nil
}

func (p *prober) toInit() (string, error) {
	attr := uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: uint8(p.opts.Port), AccessFlags: p.access()}
	return "", p.c.ModifyQP(p.qp.QP(), &attr, uverbs.QPAttrsResetToInit)
}

// access is what the queue pair and memory region let the peer do: write
// into them for write tests, read them for read tests, both for traffic
// (and for traffic on this host alone, which writes and reads itself),
// nothing remote otherwise (ibv_rc_pingpong's choice).
func (p *prober) access() uverbs.Access {
	if p.session == nil {
		if p.opts.Traffic {
			return uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
		}
		return uverbs.AccessLocalWrite
	}
	return testAccess(p.session.test)
}

// testAccess is the access a test between two hosts needs.
func testAccess(t Test) uverbs.Access {
	a := uverbs.AccessLocalWrite
	switch {
	case t.Kind == TestTraffic:
		a |= uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	case t.Op == OpWrite:
		a |= uverbs.AccessRemoteWrite
	case t.Op == OpRead:
		a |= uverbs.AccessRemoteRead
	}
	return a
}

// addressVector addresses the queue pair's destination: a GID (with a
// GRH) and LID. Its source GID is the probe's chosen GID.
func (p *prober) addressVector(to connection) uverbs.AddressVector {
	av := uverbs.AddressVector{PortNum: uint8(p.opts.Port), DLID: to.dlid}
	if p.res.GIDIndex >= 0 {
		av.IsGlobal, av.DGID, av.SGIDIndex, av.HopLimit = 1, to.dgid, uint8(p.res.GIDIndex), hopLimit
	}
	return av
}

func (p *prober) toRTR() (string, error) {
	qp, to := p.qp.QP(), p.connection()
	attr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: to.pathMTU, DestQPN: to.destQPN, RQPSN: to.destPSN,
		MaxDestRdAtomic: to.rdAtomic, MinRNRTimer: minRNRTimer, AV: p.addressVector(to)}
	if err := p.c.ModifyQP(qp, &attr, uverbs.QPAttrsInitToRTR); err != nil {
		return "", err
	}
	return fmt.Sprintf("to qpn %d, path MTU %s", to.destQPN, attr.PathMTU), nil
}

func (p *prober) toRTS() (string, error) {
	to := p.connection()
	attr := uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: ackTimeout, RetryCnt: retryCount, RNRRetry: to.rnrRetry,
		SQPSN: p.startPSN, MaxRdAtomic: to.rdAtomic}
	return "", p.c.ModifyQP(p.qp.QP(), &attr, uverbs.QPAttrsRTRToRTS)
}

// QPMismatchError means QUERY_QP disagrees with what the probe set.
type QPMismatchError struct {
	Attribute string
	Got, Want string
}

func (e *QPMismatchError) Error() string {
	return fmt.Sprintf("QUERY_QP: %s is %s, want %s", e.Attribute, e.Got, e.Want)
}

func (p *prober) queryQP() (string, error) {
	qp := p.qp.QP()
	attr, err := p.c.QueryQP(qp, uverbs.QPAttrAll)
	if err != nil {
		return "", err
	}
	to := p.connection()
	want := p.addressVector(to)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"state", attr.State, uverbs.QPStateRTS},
		{"dest_qp_num", attr.DestQPN, to.destQPN},
		{"path_mtu", attr.PathMTU, to.pathMTU},
		{"sq_psn", attr.SQPSN, p.startPSN},
		{"port_num", attr.AV.PortNum, want.PortNum},
		{"is_global", attr.AV.IsGlobal, want.IsGlobal},
		{"sgid_index", attr.AV.SGIDIndex, want.SGIDIndex},
		{"dgid", gid.GID(attr.AV.DGID), gid.GID(want.DGID)},
	} {
		if c.got != c.want {
			return "", &QPMismatchError{Attribute: c.name, Got: fmt.Sprint(c.got), Want: fmt.Sprint(c.want)}
		}
	}
	return fmt.Sprintf("%s, connected to qpn %d", attr.State, attr.DestQPN), nil
}

// randomPayload fills b with bytes that differ from run to run, so that
// stale memory cannot pass for a transfer.
func randomPayload(b []byte) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := i; j < i+8 && j < len(b); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}
