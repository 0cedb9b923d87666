package udping

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/uverbs"
)

// Prober sends UD pings from one queue pair to any number of targets,
// each at its own rate, all together within a bound, and streams a
// Result per probe. Targets are added and removed while it runs; each
// target's responder address is asked of its control channel (the
// Resolver) when it is added, and again when its probes go unanswered
// (the responder restarted: a new queue pair number and Q_Key).
type Prober struct {
	cfg     ProberConfig
	session uint64
	ep      *endpoint
	results chan Result
	source  TimestampSource

	mu      sync.Mutex
	ops     []op
	closed  bool
	running bool
	stopped bool // Run returned: no more ops
	// queued: ops holds something; asleep: Run is in (or entering) its
	// wait. An op wakes Run only when it sleeps: a Ping's caller asks
	// for its next one while Run still works on the last (see handedOff),
	// and an interrupt then cost Run a second turn and its wait a new
	// read deadline. Run sets asleep and then looks at queued, apply the
	// other way round: one of them sees the other's (sequentially
	// consistent atomics).
	queued, asleep atomic.Bool

	// Only Run's goroutine.
	targets   map[string]*target
	due       dueHeap
	pending   map[uint64]*pending
	order     []*pending // by send time: what expires first
	nextID    uint64
	slots     []*heldAH  // the address handle each send slot's send uses
	slotProbe []*pending // the probe each send slot's send carries
	bucket    bucket
	waiting   []*waiter      // Pings of resolved targets waiting for a token or a send slot
	resolve   chan struct{}  // resolutions running at once
	resolvers sync.WaitGroup // their goroutines: Run waits for them
	ntargets  atomic.Int64   // len(targets), for Add's bound
	held      map[*heldAH]bool
	runCtx    context.Context
	backoff   restartBackoff // Run's only
	swept     time.Time      // forgetUnused's last sweep
	// lastSend is when the last probe left: Spin polls after it.
	lastSend time.Time
	// handedOff: a Ping's result was handed to its caller since Run's
	// loop last yielded.
	handedOff bool

	stats proberCounters
}

// Resolver asks target's responder (over its control channel) for the
// address of its UD queue pair, telling it local, the prober's, so that
// the responder answers it. target is whatever the prober's caller named
// it by: "host:port" for grdma's responders.
type Resolver func(ctx context.Context, target string, local Address) (Address, error)

// ProberConfig is a prober's device port and policy.
type ProberConfig struct {
	Local   Local
	Resolve Resolver
	// MaxRate bounds the probes sent a second, all targets together:
	// probes due beyond it wait; 0 means DefaultProberRate.
	MaxRate float64
	// Timeout is how long a probe's replies are waited for; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// ResolveTimeout bounds each resolution; 0 means DefaultResolveTimeout.
	ResolveTimeout time.Duration
	// MaxTargets bounds the targets; 0 means DefaultMaxTargets.
	MaxTargets int
	// RefreshAfter is the probes in a row without any reply after which
	// the target's address is asked again; 0 means DefaultRefreshAfter.
	RefreshAfter int
	// Results is the room of the results channel; results the reader
	// leaves no room for are dropped and counted. 0 means
	// DefaultResults.
	Results int
	// Receives is how many receives are posted (each holds the largest
	// datagram: 4136 bytes registered); 0 means DefaultProberReceives.
	Receives int
	// Sends is how many probes may be on their way at once (each 4096
	// bytes registered); 0 means DefaultProberSends. A command pinging
	// one target needs few of either (RLIMIT_MEMLOCK).
	Sends int
	// Spin, when set, polls the completion queue for this long after
	// each probe while replies are awaited, before it sleeps on the
	// completion channel: a wake-up's latency then stays out of the
	// round trip, for a core's worth of CPU meanwhile. A busy-polling
	// baseline for benchmarks, as ibv_ud_pingpong polls.
	Spin time.Duration
}

// Defaults of a prober.
const (
	DefaultProberRate     = 1000
	DefaultTimeout        = 2 * time.Second
	DefaultResolveTimeout = 10 * time.Second
	DefaultMaxTargets     = 10000
	DefaultRefreshAfter   = 3
	DefaultResults        = 1024
	DefaultProberReceives = 128
	DefaultProberSends    = 64
	maxResolving          = 16
	maxResolveBackoff     = 30 * time.Second
)

// WithDefaults fills in the zero fields.
func (c ProberConfig) WithDefaults() ProberConfig {
	if c.MaxRate <= 0 {
		c.MaxRate = DefaultProberRate
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ResolveTimeout <= 0 {
		c.ResolveTimeout = DefaultResolveTimeout
	}
	if c.MaxTargets <= 0 {
		c.MaxTargets = DefaultMaxTargets
	}
	if c.RefreshAfter <= 0 {
		c.RefreshAfter = DefaultRefreshAfter
	}
	if c.Results <= 0 {
		c.Results = DefaultResults
	}
	if c.Receives <= 0 {
		c.Receives = DefaultProberReceives
	}
	if c.Sends <= 0 {
		c.Sends = DefaultProberSends
	}
	return c
}

// TargetConfig is how a target is probed.
type TargetConfig struct {
	// Rate is the probes a second; 0 means 1.
	Rate float64
	// Sizes are the probes' sizes in bytes, in turn; nil means
	// DefaultSizes, cut at the path MTU. Each is from HeaderSize to the
	// path MTU: larger sizes are refused once the path MTU is known
	// (OutcomeTooLarge).
	Sizes []int
	// Count stops after this many probes; 0 means never.
	Count int
}

// DefaultSizes are the sizes probes cycle through, after Aegis (NSDI
// 2025: loss that only hits packets over 1 KiB): the path MTU is added.
var DefaultSizes = []int{64, 512, 1024}

// MaxRate bounds a target's rate.
const MaxRate = 100000

// Outcome is what became of a probe.
type Outcome string

// Outcomes.
const (
	// OutcomeReply: the echo came (RTT), and mostly the report
	// (DelayKnown).
	OutcomeReply Outcome = "reply"
	// OutcomeTimeout: no reply within the timeout.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeEchoLost: the report came but not the echo: the probe
	// arrived, the way back lost a packet the size of the probe.
	OutcomeEchoLost Outcome = "echo_lost"
	// OutcomeResolve: the responder's address could not be had (Err says
	// why); no probe was sent.
	OutcomeResolve Outcome = "resolve"
	// OutcomeTooLarge: the configured size is over the path MTU; no
	// probe was sent.
	OutcomeTooLarge Outcome = "too_large"
	// OutcomeSendError: the probe could not be sent (Err), or its send
	// had not completed when its time was up (ErrSendIncomplete).
	OutcomeSendError Outcome = "send_error"
)

// Errors of a Result, for errors.Is: a probe sent and not answered, its
// echo lost, a size over the path MTU. A resolution that failed is a
// *ResolveError, wrapping the Resolver's error.
var (
	ErrTimeout = errors.New("no reply within the timeout")
	// ErrSendIncomplete: no reply, and the probe's send had not completed
	// either: it may never have left this node (rxe on 6.1 retries a
	// datagram a local firewall refuses for ever), so its loss is not the
	// network's.
	ErrSendIncomplete = errors.New("the probe's send had not completed: it may never have left this node")
	ErrEchoLost       = errors.New("the echo was lost: the responder's report came")
	ErrTooLarge       = errors.New("the probe is larger than the path MTU")
)

// ResolveError means a target's responder address could not be had.
type ResolveError struct {
	Target string
	Err    error
}

func (e *ResolveError) Error() string {
	return fmt.Sprintf("asking %s for its UD ping address: %v", e.Target, e.Err)
}
func (e *ResolveError) Unwrap() error { return e.Err }

// Result is one probe's outcome.
type Result struct {
	Target string
	// Seq numbers the target's probes from 1 (0 for a failed resolution).
	Seq  uint64
	Size int // the probe's bytes
	// Sent is when the probe left; zero when none did (OutcomeResolve,
	// OutcomeTooLarge, OutcomeSendError).
	Sent time.Time
	// Responder is the address probed.
	Responder Address
	Outcome   Outcome
	// RTT is the round trip as the prober saw it: from the probe's send
	// to its echo's arrival.
	RTT time.Duration
	// Delay is how long the responder held the probe (the report),
	// when DelayKnown.
	Delay      time.Duration
	DelayKnown bool
	// Timestamps says where the times come from.
	Timestamps TimestampSource
	// Err is nil for OutcomeReply, else why: ErrTimeout, ErrEchoLost,
	// ErrTooLarge, a *ResolveError, a send's error.
	Err error
}

// Network is the network's round trip: RTT without the responder's
// delay, or RTT when the delay is not known; 0 at least (a responder can
// report more: it is not trusted).
func (r Result) Network() time.Duration {
	if !r.DelayKnown {
		return r.RTT
	}
	return max(r.RTT-r.Delay, 0)
}

// ProberStats counts what a prober did.
type ProberStats struct {
	Sent, Echoes, Reports uint64
	Timeouts, EchoLost    uint64
	// Datagrams dropped: not a UD ping's or malformed; a UD ping's not
	// of this prober's probes or from another queue pair than the
	// target's; a reply already had.
	Malformed, Foreign, Duplicates uint64
	// Probes delayed by MaxRate or by no free send slot, each counted
	// once however long it waits.
	Throttled uint64
	// Results the reader left no room for.
	ResultsDropped uint64
	Resolves       uint64
	ResolveErrors  uint64
	SendErrors     uint64
	Restarts       uint64
}

type proberCounters struct {
	sent, echoes, reports, timeouts, echoLost, malformed, foreign, duplicates, throttled atomic.Uint64
	resultsDropped, resolves, resolveErrors, sendErrors, restarts                        atomic.Uint64
}

// target is a target and its schedule; Run's goroutine's.
type target struct {
	name    string
	cfg     TargetConfig
	addr    Address
	ah      *heldAH
	sizes   []int
	mtu     int
	next    time.Time
	index   int // in the due heap; -1 when not scheduled
	seq     uint64
	probes  int // scheduled probes sent, against cfg.Count
	sizeAt  int
	misses  int
	removed bool
	// throttled: its due probe was counted as held back (Throttled).
	throttled bool
	// resolving: a resolution runs; failures counts those that failed in
	// a row (the backoff).
	resolving bool
	failures  int
	retryAt   time.Time
	// onDemand: made by Ping, not scheduled; dropped when unused for
	// onDemandTTL. waiters are the Pings waiting for its address.
	onDemand bool
	waiters  []*waiter
	used     time.Time
}

// waiter is a Ping (or PathMTU) waiting for its result.
type waiter struct {
	ctx     context.Context
	target  string
	size    int  // 0: the path MTU
	pathMTU bool // PathMTU: the address is all it waits for
	ch      chan Result
	// throttled: counted as held back (Throttled).
	throttled bool
}

// onDemandTTL is how long a target made by Ping (its address, its
// address handle) is kept unused.
const onDemandTTL = 10 * time.Minute

// heldAH is an address handle and the sends using it: it is destroyed
// only when none is in flight (rxe fails a send whose handle is gone).
type heldAH struct {
	ah      uverbs.AH
	users   int
	retired bool
}

// pending is a probe awaiting its replies.
type pending struct {
	t         *target
	id, seq   uint64
	size      int
	addr      Address
	sent      time.Time
	rtt       time.Duration
	gotEcho   bool
	delay     time.Duration
	gotReport bool // the delay came: in a report, or in a FlagEchoDelay echo
	done      bool
	expiresAt time.Time
	waiter    *waiter // a Ping's, which takes the result instead of Results
	// sendOut: its send was posted and has not completed yet.
	sendOut bool
	// oneReply: the probe asked for one reply (FlagEchoDelay); only
	// then may its echo carry the delay.
	oneReply bool
}

// op is a change Run applies: a target added or removed, a resolution
// done.
type op struct {
	add      *target
	remove   string
	resolved *resolution
	ping     *waiter
}

type resolution struct {
	name string
	addr Address
	ah   uverbs.AH
	err  error
}

// NewProber makes the prober's queue pair on cfg.Local. Run probes; Close
// releases it.
func NewProber(cfg ProberConfig) (*Prober, error) {
	cfg = cfg.WithDefaults()
	if cfg.Resolve == nil {
		return nil, errors.New("udping: a prober needs a Resolver")
	}
	ep, err := newEndpoint(cfg.Local, NewQKey(), cfg.Receives, cfg.Sends)
	if err != nil {
		return nil, fmt.Errorf("udping: the prober's queue pair: %w", err)
	}
	source, _ := cfg.Local.TimestampSource()
	return &Prober{cfg: cfg, session: rand.Uint64(), ep: ep, results: make(chan Result, cfg.Results), source: source,
		targets: map[string]*target{}, pending: map[uint64]*pending{}, slots: make([]*heldAH, cfg.Sends), slotProbe: make([]*pending, cfg.Sends),
		bucket: newBucket(cfg.MaxRate), resolve: make(chan struct{}, maxResolving), held: map[*heldAH]bool{},
		runCtx: context.Background()}, nil
}

// Address is the prober's queue pair, which responders must be told.
func (p *Prober) Address() Address {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ep.address()
}

// Timestamps says where the prober's times come from.
func (p *Prober) Timestamps() TimestampSource { return p.source }

// Results is the stream of results; it is closed when Run returns.
func (p *Prober) Results() <-chan Result { return p.results }

// Add starts probing target (it replaces a target of that name). The
// first probe goes as soon as its responder's address is known.
func (p *Prober) Add(name string, cfg TargetConfig) error {
	if cfg.Rate == 0 {
		cfg.Rate = 1
	}
	switch {
	case name == "":
		return errors.New("udping: a target needs a name")
	case cfg.Rate < 0 || cfg.Rate > MaxRate:
		return fmt.Errorf("udping: rate %g: from 0 to %d probes a second", cfg.Rate, MaxRate)
	case cfg.Count < 0:
		return fmt.Errorf("udping: count %d", cfg.Count)
	}
	for _, s := range cfg.Sizes {
		if s < HeaderSize || s > MaxDatagram {
			return fmt.Errorf("udping: size %d: from %d to %d bytes", s, HeaderSize, MaxDatagram)
		}
	}
	cfg.Sizes = slices.Clone(cfg.Sizes)
	return p.apply(op{add: &target{name: name, cfg: cfg, index: -1}})
}

// Remove stops probing target; its probes still out give no result, but
// its results already in the Results channel stay there.
func (p *Prober) Remove(name string) { p.apply(op{remove: name}) }

func (p *Prober) apply(o op) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stopped {
		return errors.New("udping: the prober is closed, or stopped")
	}
	if o.add != nil {
		n := 0
		for _, q := range p.ops {
			if q.add != nil {
				n++
			}
		}
		if int(p.ntargets.Load())+n >= p.cfg.MaxTargets {
			return fmt.Errorf("udping: %d targets, the prober's limit", p.cfg.MaxTargets)
		}
	}
	p.ops = append(p.ops, o)
	p.queued.Store(true)
	// Run's wait ends, or the next one does: Run never sleeps with an
	// op queued.
	if p.asleep.Load() {
		p.ep.interrupt()
	}
	return nil
}

// Stats returns the prober's counters.
func (p *Prober) Stats() ProberStats {
	s := &p.stats
	return ProberStats{Sent: s.sent.Load(), Echoes: s.echoes.Load(), Reports: s.reports.Load(), Timeouts: s.timeouts.Load(),
		EchoLost: s.echoLost.Load(), Malformed: s.malformed.Load(), Foreign: s.foreign.Load(), Duplicates: s.duplicates.Load(),
		Throttled: s.throttled.Load(), ResultsDropped: s.resultsDropped.Load(), Resolves: s.resolves.Load(),
		ResolveErrors: s.resolveErrors.Load(), SendErrors: s.sendErrors.Load(), Restarts: s.restarts.Load()}
}

// Run probes until ctx ends, then closes the results channel. A queue
// pair that fails is made again (and every target asked again: the
// responders knew the old one); when that fails, Run returns the error.
func (p *Prober) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running || p.closed {
		p.mu.Unlock()
		return errors.New("udping: the prober runs already, or is closed")
	}
	p.running = true
	p.mu.Unlock()
	defer close(p.results)
	defer p.stop()
	rctx, stopResolving := context.WithCancel(ctx)
	defer p.resolvers.Wait() // after stopResolving: their Resolvers end with rctx
	defer stopResolving()
	p.runCtx = rctx
	// One AfterFunc for the whole Run, not a context per wait: it ends
	// the wait of the queue pair current then (the loop checks ctx
	// after a restart made another).
	defer context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.ep.interrupt()
		p.mu.Unlock()
	})()
	for ctx.Err() == nil {
		if p.handedOff {
			// A Ping's caller has its result: let it ask for its next
			// one before this loop sleeps, or its op wakes the loop
			// again (a second trip through the poller a ping).
			p.handedOff = false
			runtime.Gosched()
		}
		p.takeOps(rctx)
		now := time.Now()
		p.expire(now)
		p.sendDue(rctx, now)
		deadline := p.nextWake(now)
		var spin time.Time
		if p.cfg.Spin > 0 && len(p.pending) > 0 {
			spin = p.lastSend.Add(p.cfg.Spin)
		}
		var wcs []uverbs.WC
		var err error
		if p.asleep.Store(true); !p.queued.Load() {
			wcs, err = p.ep.wait(deadline, spin)
		}
		p.asleep.Store(false)
		now = time.Now()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = p.handle(wcs, now)
		}
		if err == nil {
			err = p.stalled(time.Now())
		}
		if err != nil {
			// A queue pair that keeps failing (a local firewall refusing
			// RoCE makes every send complete in error, or never complete)
			// is made again less and less often: each remake asks every
			// target's responder again over TCP.
			if d := p.backoff.next(time.Now()); d > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(d):
				}
			}
			if rerr := p.restart(rctx); rerr != nil {
				return fmt.Errorf("udping: the prober's queue pair failed (%v) and could not be made again: %w", err, rerr)
			}
		}
	}
	return nil
}

// Spacing of the remakes of a failing queue pair (restartBackoff).
const (
	restartFirstDelay = 100 * time.Millisecond
	restartMaxDelay   = 10 * time.Second
	restartQuiet      = time.Minute
)

// restartBackoff spaces the remakes of a queue pair: the first failure
// after a quiet minute is remade at once, then each next one waits twice
// as long as the one before, from restartFirstDelay up to
// restartMaxDelay (so a node whose sends always fail still remakes it,
// and counts a restart, every 10 s).
type restartBackoff struct {
	last  time.Time // when the last remake was done
	delay time.Duration
}

// next is how long to wait before the remake asked for at now.
func (b *restartBackoff) next(now time.Time) time.Duration {
	switch {
	case b.last.IsZero() || now.Sub(b.last) > restartQuiet:
		b.delay = 0
	case b.delay == 0:
		b.delay = restartFirstDelay
	default:
		b.delay = min(2*b.delay, restartMaxDelay)
	}
	b.last = now.Add(b.delay)
	return b.delay
}

// stop ends Run: what waits is told, and nothing more is taken.
func (p *Prober) stop() {
	p.mu.Lock()
	p.stopped = true
	ops := p.ops
	p.ops = nil
	p.mu.Unlock()
	gone := errors.New("udping: the prober stopped")
	for _, o := range ops {
		if o.ping != nil {
			o.ping.ch <- Result{Target: o.ping.target, Timestamps: p.source, Err: gone}
		}
		if o.resolved != nil && o.resolved.err == nil {
			p.cfg.Local.Context.DestroyAH(o.resolved.ah)
		}
	}
	for _, t := range p.targets {
		for _, w := range t.waiters {
			w.ch <- Result{Target: t.name, Timestamps: p.source, Err: gone}
		}
		t.waiters = nil
	}
	for _, w := range p.waiting {
		p.result(w, Result{Target: w.target, Timestamps: p.source, Err: gone})
	}
	p.waiting = nil
	for _, pd := range p.pending {
		if pd.waiter != nil {
			p.result(pd.waiter, Result{Target: pd.t.name, Seq: pd.seq, Size: pd.size, Timestamps: p.source, Err: gone})
		}
	}
}

// takeOps applies what Add, Remove and resolutions asked.
func (p *Prober) takeOps(ctx context.Context) {
	p.mu.Lock()
	ops := p.ops
	p.ops = nil
	p.queued.Store(false)
	p.mu.Unlock()
	for _, o := range ops {
		switch {
		case o.add != nil:
			t := o.add
			if old := p.targets[t.name]; old != nil {
				if old.onDemand && old.ah != nil { // what Ping learnt serves
					t.addr, t.ah, t.mtu = old.addr, old.ah, old.mtu
					old.ah = nil
				}
				t.waiters, old.waiters = old.waiters, nil
				p.drop(old)
			}
			p.targets[t.name] = t
			p.ntargets.Store(int64(len(p.targets)))
			if t.ah == nil {
				p.startResolve(ctx, t)
				break
			}
			t.sizes, t.next = Sizes(t.cfg.Sizes, t.mtu), time.Now()
			p.schedule(t)
		case o.remove != "":
			if t := p.targets[o.remove]; t != nil {
				p.drop(t)
			}
		case o.resolved != nil:
			p.resolved(o.resolved)
		case o.ping != nil:
			p.takePing(ctx, o.ping)
		}
	}
}

// Ping sends one probe of size bytes (0: the path MTU) to target and
// waits for its result, within ctx and the prober's Timeout. The target's
// address is asked for once and kept (a target of Add shares it); a
// target only Pinged is forgotten after 10 minutes unused. Many Pings may
// run at once, from any goroutines; the result does not go to Results.
// Run must be running. The error is the result's Err, or ctx's.
func (p *Prober) Ping(ctx context.Context, target string, size int) (Result, error) {
	if size != 0 && (size < HeaderSize || size > MaxDatagram) {
		err := fmt.Errorf("udping: size %d: from %d to %d bytes, or 0 for the path MTU", size, HeaderSize, MaxDatagram)
		return Result{Target: target, Size: size, Outcome: OutcomeTooLarge, Timestamps: p.source, Err: err}, err
	}
	return p.wait(ctx, &waiter{ctx: ctx, target: target, size: size, ch: make(chan Result, 1)})
}

// PathMTU returns the path MTU to target's responder, asking for its
// address if it is not known yet (as Ping does).
func (p *Prober) PathMTU(ctx context.Context, target string) (int, error) {
	r, err := p.wait(ctx, &waiter{ctx: ctx, target: target, pathMTU: true, ch: make(chan Result, 1)})
	return r.Size, err
}

// Lookup returns the address of target's responder and the path MTU to
// it, asking for them if they are not known yet (as Ping does).
func (p *Prober) Lookup(ctx context.Context, target string) (Address, int, error) {
	r, err := p.wait(ctx, &waiter{ctx: ctx, target: target, pathMTU: true, ch: make(chan Result, 1)})
	return r.Responder, r.Size, err
}

func (p *Prober) wait(ctx context.Context, w *waiter) (Result, error) {
	if w.target == "" {
		return Result{}, errors.New("udping: a target needs a name")
	}
	if err := p.apply(op{ping: w}); err != nil {
		return Result{Target: w.target}, err
	}
	select {
	case r := <-w.ch:
		return r, r.Err
	case <-ctx.Done():
		return Result{Target: w.target, Size: w.size, Timestamps: p.source}, ctx.Err()
	}
}

// takePing starts a Ping: its target's address is asked for first if need
// be.
func (p *Prober) takePing(ctx context.Context, w *waiter) {
	t := p.targets[w.target]
	if t == nil {
		if len(p.targets) >= p.cfg.MaxTargets {
			w.ch <- Result{Target: w.target, Timestamps: p.source,
				Err: fmt.Errorf("udping: %d targets, the prober's limit", p.cfg.MaxTargets)}
			return
		}
		t = &target{name: w.target, index: -1, onDemand: true}
		p.targets[t.name] = t
		p.ntargets.Store(int64(len(p.targets)))
	}
	t.used = time.Now()
	if t.ah == nil {
		t.waiters = append(t.waiters, w)
		p.startResolve(ctx, t)
		return
	}
	p.serve(t, w)
}

// serve answers a waiter of a resolved target: its path MTU, or a probe
// (once a token and a send slot are free).
func (p *Prober) serve(t *target, w *waiter) {
	if w.pathMTU {
		w.ch <- Result{Target: t.name, Size: t.mtu, Responder: t.addr, Timestamps: p.source}
		return
	}
	p.waiting = append(p.waiting, w)
}

// sendWaiting sends the probes of the Pings waiting, as far as tokens and
// send slots allow; those whose context ended are dropped.
func (p *Prober) sendWaiting(now time.Time) {
	for len(p.waiting) > 0 {
		w := p.waiting[0]
		t := p.targets[w.target]
		if w.ctx.Err() != nil || t == nil || t.ah == nil {
			p.waiting = p.waiting[1:]
			continue
		}
		if p.bucket.until(now) > 0 || len(p.ep.freeSends) == 0 {
			if !w.throttled {
				w.throttled = true
				p.stats.throttled.Add(1)
			}
			return
		}
		p.waiting = p.waiting[1:]
		size := w.size
		if size == 0 {
			size = t.mtu
		}
		t.used = now
		p.send(t, size, w, now)
	}
}

// drop forgets a target: its probes out, its schedule, its address
// handle (once no send uses it).
func (p *Prober) drop(t *target) {
	for _, w := range t.waiters {
		w.ch <- Result{Target: t.name, Timestamps: p.source, Err: errors.New("udping: the target was removed")}
	}
	t.waiters = nil
	t.removed = true
	delete(p.targets, t.name)
	p.ntargets.Store(int64(len(p.targets)))
	if t.index >= 0 {
		heap.Remove(&p.due, t.index)
	}
	for id, pd := range p.pending {
		if pd.t == t {
			pd.done = true
			delete(p.pending, id)
			p.result(pd.waiter, Result{Target: t.name, Seq: pd.seq, Size: pd.size, Timestamps: p.source,
				Err: errors.New("udping: the target was removed")})
		}
	}
	p.release(t.ah)
	t.ah = nil
}

// release retires an address handle: destroyed now or when its last send
// completes.
func (p *Prober) release(h *heldAH) {
	if h == nil {
		return
	}
	h.retired = true
	if h.users == 0 {
		p.destroyAH(h)
	}
}

// hold keeps track of an address handle until destroyAH.
func (p *Prober) hold(ah uverbs.AH) *heldAH {
	h := &heldAH{ah: ah}
	p.held[h] = true
	return h
}

func (p *Prober) destroyAH(h *heldAH) {
	if p.held[h] {
		delete(p.held, h)
		p.cfg.Local.Context.DestroyAH(h.ah)
	}
}

// sendDone is a send slot's send completed (or will never): its address
// handle is destroyed once retired and unused.
func (p *Prober) sendDone(slot int) {
	if slot < 0 || slot >= len(p.slots) || p.slots[slot] == nil {
		return
	}
	h := p.slots[slot]
	p.slots[slot] = nil
	if h.users--; h.retired && h.users == 0 {
		p.destroyAH(h)
	}
}

// startResolve asks the target's responder for its address in the
// background, at most maxResolving at once.
func (p *Prober) startResolve(ctx context.Context, t *target) {
	if t.resolving {
		return
	}
	t.resolving = true
	p.stats.resolves.Add(1)
	ep := p.ep
	local := ep.address()
	name := t.name
	p.resolvers.Add(1)
	go func() {
		defer p.resolvers.Done()
		select {
		case p.resolve <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-p.resolve }()
		rctx, cancel := context.WithTimeout(ctx, p.cfg.ResolveTimeout)
		addr, err := p.cfg.Resolve(rctx, name, local)
		cancel()
		r := &resolution{name: name, addr: addr, err: err}
		if err == nil && ctx.Err() != nil {
			return // Run is stopping: no address handle to make
		}
		if err == nil {
			if err = addr.Validate(); err != nil {
				r.err = fmt.Errorf("the responder's address: %w", err)
			} else if r.ah, err = ep.ah(addr.GID); err != nil {
				r.err = fmt.Errorf("an address handle to %s: %w", addr.GID, err)
			}
		}
		if p.apply(op{resolved: r}) != nil && r.err == nil {
			p.cfg.Local.Context.DestroyAH(r.ah) // closed meanwhile
		}
	}()
}

// resolved takes a resolution: the target is probed at the address from
// now on (a new address handle), or the failure is a result and asked
// again later.
func (p *Prober) resolved(r *resolution) {
	t := p.targets[r.name]
	if t == nil || !t.resolving {
		if r.err == nil {
			p.cfg.Local.Context.DestroyAH(r.ah)
		}
		return
	}
	t.resolving = false
	now := time.Now()
	if r.err != nil {
		p.stats.resolveErrors.Add(1)
		t.failures++
		t.retryAt = now.Add(min(time.Second<<min(t.failures-1, 5), maxResolveBackoff))
		res := Result{Target: t.name, Outcome: OutcomeResolve, Err: &ResolveError{Target: t.name, Err: r.err}, Timestamps: p.source}
		for _, w := range t.waiters {
			w.ch <- res
		}
		t.waiters = nil
		if t.onDemand {
			if t.ah == nil {
				p.drop(t) // the next Ping asks again
			}
			return
		}
		p.emit(res)
		if t.ah == nil {
			t.next = t.retryAt
			p.schedule(t)
		}
		return
	}
	t.failures, t.misses = 0, 0
	p.release(t.ah)
	t.addr, t.ah = r.addr, p.hold(r.ah)
	t.mtu = min(p.cfg.Local.MTU.Bytes(), r.addr.MTU.Bytes())
	t.sizes = Sizes(t.cfg.Sizes, t.mtu)
	for _, w := range t.waiters {
		p.serve(t, w)
	}
	t.waiters = nil
	if t.onDemand {
		return
	}
	if t.next.IsZero() || t.index < 0 {
		t.next = now
	}
	p.schedule(t)
}

// Sizes are the sizes a target's probes cycle through at path MTU mtu:
// the configured ones, or DefaultSizes below the MTU and the MTU.
func Sizes(configured []int, mtu int) []int {
	if configured != nil {
		return configured
	}
	var sizes []int
	for _, s := range DefaultSizes {
		if s < mtu {
			sizes = append(sizes, s)
		}
	}
	return append(sizes, mtu)
}

func (p *Prober) schedule(t *target) {
	if t.removed || t.onDemand || (t.cfg.Count > 0 && t.probes >= t.cfg.Count) {
		return
	}
	if t.index >= 0 {
		heap.Fix(&p.due, t.index)
		return
	}
	heap.Push(&p.due, t)
}

// sendDue sends the probes that are due, as far as the rate bound and the
// send slots allow; targets waiting for a new resolution are asked again.
func (p *Prober) sendDue(ctx context.Context, now time.Time) {
	p.sendWaiting(now)
	p.forgetUnused(now)
	for p.due.Len() > 0 {
		t := p.due[0]
		if t.next.After(now) {
			return
		}
		if t.ah == nil { // not resolved: time to ask again
			heap.Pop(&p.due)
			p.startResolve(ctx, t)
			continue
		}
		if p.bucket.until(now) > 0 || len(p.ep.freeSends) == 0 {
			if !t.throttled {
				t.throttled = true
				p.stats.throttled.Add(1)
			}
			return
		}
		t.throttled = false
		p.probe(t, now)
		if t.cfg.Count > 0 && t.probes >= t.cfg.Count {
			heap.Pop(&p.due)
			continue
		}
		interval := time.Duration(float64(time.Second) / t.cfg.Rate)
		t.next = t.next.Add(interval)
		if t.next.Before(now.Add(-interval)) {
			t.next = now.Add(interval) // far behind: no burst to catch up
		}
		heap.Fix(&p.due, 0)
	}
}

// probe sends t's next scheduled probe.
func (p *Prober) probe(t *target, now time.Time) {
	size := t.sizes[t.sizeAt%len(t.sizes)]
	t.sizeAt++
	t.probes++
	p.send(t, size, nil, now)
}

// send sends a probe of size bytes to t, for a Ping's waiter w or (nil)
// the Results stream.
func (p *Prober) send(t *target, size int, w *waiter, now time.Time) {
	t.seq++
	if size > t.mtu {
		p.result(w, Result{Target: t.name, Seq: t.seq, Size: size, Responder: t.addr, Outcome: OutcomeTooLarge,
			Timestamps: p.source, Err: fmt.Errorf("%w: %d bytes, the path MTU %d", ErrTooLarge, size, t.mtu)})
		return
	}
	p.bucket.take(now)
	slot, out, _ := p.ep.sendBuf(size)
	p.nextID++
	id := p.nextID
	clear(out[HeaderSize:])
	var flags uint32
	if size <= EchoDelayMax && t.addr.EchoDelay {
		flags = FlagEchoDelay // one reply: the echo carries the delay
	}
	PutHeader(out, Header{Kind: KindProbe, Session: p.session, ID: id, Flags: flags})
	h := t.ah
	h.users++
	p.slots[slot] = h
	sent := time.Now() // T1: before the send (see the package doc)
	if err := p.ep.send(slot, size, &h.ah, t.addr); err != nil {
		h.users--
		p.slots[slot] = nil
		p.stats.sendErrors.Add(1)
		p.result(w, Result{Target: t.name, Seq: t.seq, Size: size, Responder: t.addr, Outcome: OutcomeSendError,
			Timestamps: p.source, Err: err})
		return
	}
	p.stats.sent.Add(1)
	p.lastSend = sent
	pd := &pending{t: t, id: id, seq: t.seq, size: size, addr: t.addr, sent: sent, expiresAt: sent.Add(p.cfg.Timeout), waiter: w,
		sendOut: true, oneReply: flags&FlagEchoDelay != 0}
	p.slotProbe[slot] = pd
	if w != nil {
		if d, ok := w.ctx.Deadline(); ok && d.Before(pd.expiresAt) {
			pd.expiresAt = d
		}
	}
	p.pending[id] = pd
	p.order = append(p.order, pd)
}

// forgetUnused drops the targets Ping made that have not been used for
// onDemandTTL, with nothing waiting.
func (p *Prober) forgetUnused(now time.Time) {
	if now.Sub(p.swept) < time.Minute {
		return
	}
	p.swept = now
	for _, t := range p.targets {
		if t.onDemand && len(t.waiters) == 0 && now.Sub(t.used) > onDemandTTL {
			p.drop(t)
		}
	}
}

// nextWake is when Run must look again: the next probe due, the next
// expiry, a retry, the send watchdog. With every send slot in use a
// probe due waits for a send's completion, which wakes nobody (see
// endpoint): Run looks for it itself (pollSends).
func (p *Prober) nextWake(now time.Time) time.Time {
	wake := now.Add(time.Minute)
	full := len(p.ep.freeSends) == 0
	if len(p.waiting) > 0 {
		wake = now.Add(max(p.bucket.until(now), time.Millisecond))
		if full {
			wake = maxTime(wake, p.pollSends(now))
		}
	}
	if p.due.Len() > 0 {
		next := p.due[0].next
		probe := p.due[0].ah != nil // else a resolution to retry
		if d := p.bucket.until(now); d > 0 && probe {
			next = maxTime(next, now.Add(d))
		}
		if probe && full {
			next = maxTime(next, p.pollSends(now))
		}
		wake = minTime(wake, next)
	}
	for _, pd := range p.order {
		if !pd.done {
			wake = minTime(wake, pd.expiresAt)
			break
		}
	}
	if at := p.ep.oldestSend(); !at.IsZero() {
		wake = minTime(wake, at.Add(p.sendStall()))
	}
	return wake
}

// pollSends is when Run looks for a send's completion again while every
// send slot is in use and a probe waits for one: in a millisecond, less
// and less often the longer the oldest send has waited (sends that never
// complete are the watchdog's), at most every 100 ms.
func (p *Prober) pollSends(now time.Time) time.Time {
	d := time.Millisecond
	if at := p.ep.oldestSend(); !at.IsZero() {
		d = min(max(d, now.Sub(at)), 100*time.Millisecond)
	}
	return now.Add(d)
}

// MinSendStall is the least time a send may go without its completion
// before the prober's queue pair is taken as wedged (ProberConfig.Timeout
// when longer): a send completes once it left, within microseconds; a
// host that stalls for a moment must not remake a healthy queue pair.
const MinSendStall = 2 * time.Second

// sendStall is how long a send may wait for its completion.
func (p *Prober) sendStall() time.Duration { return max(p.cfg.Timeout, MinSendStall) }

// errSendStalled: a send had no completion within sendStall.
var errSendStalled = errors.New("a send has had no completion")

// stalled says, when the oldest send waiting for its completion has
// waited longer than sendStall, that the queue pair is wedged: a kernel
// that refuses the datagrams at output and retries them for ever (rxe on
// 6.1 behind a firewall dropping RoCE) never completes them, and the
// send queue, once full, sends nothing more. Made again, it counts a
// restart as a queue pair whose sends complete in error does.
func (p *Prober) stalled(now time.Time) error {
	at := p.ep.oldestSend()
	if at.IsZero() || now.Sub(at) <= p.sendStall() {
		return nil
	}
	return fmt.Errorf("%w for %v", errSendStalled, now.Sub(at).Round(time.Millisecond))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// expire gives the results of the probes whose time is up.
func (p *Prober) expire(now time.Time) {
	i := 0
	for ; i < len(p.order); i++ {
		pd := p.order[i]
		if pd.done {
			continue
		}
		if pd.expiresAt.After(now) {
			break
		}
		p.finish(pd)
	}
	p.order = p.order[i:]
}

// finish gives a probe's result with what came.
func (p *Prober) finish(pd *pending) {
	pd.done = true
	delete(p.pending, pd.id)
	r := Result{Target: pd.t.name, Seq: pd.seq, Size: pd.size, Sent: pd.sent, Responder: pd.addr, Timestamps: p.source}
	switch {
	case pd.gotEcho:
		r.Outcome, r.RTT, r.Delay, r.DelayKnown = OutcomeReply, pd.rtt, pd.delay, pd.gotReport
	case pd.gotReport:
		r.Outcome, r.Err = OutcomeEchoLost, ErrEchoLost
		p.stats.echoLost.Add(1)
	case pd.sendOut:
		// Not the network's loss: a wedged queue pair (the send
		// watchdog remakes it), this node's fault.
		r.Outcome, r.Err, r.Sent = OutcomeSendError, ErrSendIncomplete, time.Time{}
	default:
		r.Outcome, r.Err = OutcomeTimeout, ErrTimeout
		p.stats.timeouts.Add(1)
	}
	t := pd.t
	if !t.removed {
		switch r.Outcome {
		case OutcomeTimeout:
			t.misses++
			if t.misses >= p.cfg.RefreshAfter && !t.resolving {
				t.misses = 0
				p.startResolve(p.runCtx, t)
			}
		case OutcomeSendError: // says nothing of the responder
		default:
			t.misses = 0
		}
	}
	p.result(pd.waiter, r)
}

// result gives a result to its Ping's waiter, or to Results (but for a
// target removed: its probes give none).
func (p *Prober) result(w *waiter, r Result) {
	if w != nil {
		select {
		case w.ch <- r:
			p.handedOff = true
		default:
		}
		return
	}
	if t := p.targets[r.Target]; t == nil || t.removed {
		return
	}
	p.emit(r)
}

func (p *Prober) emit(r Result) {
	select {
	case p.results <- r:
	default:
		p.stats.resultsDropped.Add(1)
	}
}

// handle takes a batch of completions that came by now.
func (p *Prober) handle(wcs []uverbs.WC, now time.Time) error {
	var failed error
	for _, wc := range wcs {
		if wc.WRID&sendFlag != 0 {
			slot := int(wc.WRID &^ sendFlag)
			if slot >= 0 && slot < len(p.slotProbe) && p.slotProbe[slot] != nil {
				p.slotProbe[slot].sendOut = false
				p.slotProbe[slot] = nil
			}
			p.sendDone(slot)
			p.ep.sent(slot)
			if wc.Status != uverbs.WCSuccess {
				p.stats.sendErrors.Add(1)
				failed = &completionError{wc}
			}
			continue
		}
		if wc.Status != uverbs.WCSuccess {
			failed = &completionError{wc}
			continue
		}
		slot := int(wc.WRID)
		if b, ok := p.ep.received(slot, wc.ByteLen); ok {
			p.reply(b, wc.SrcQP, now)
		} else {
			p.stats.malformed.Add(1)
		}
		if err := p.ep.postRecv(slot); err != nil {
			failed = err
		}
	}
	return failed
}

// reply takes an echo or a report: it must answer a probe of this
// session still awaited, from the queue pair and GID that probe went to,
// as long as the probe (an echo) or a header (a report).
func (p *Prober) reply(b []byte, srcQP uint32, now time.Time) {
	g, err := uverbs.ParseGRH(b)
	if err != nil {
		p.stats.malformed.Add(1)
		return
	}
	h, err := ParseHeader(b[uverbs.GRHSize:])
	if err != nil || h.Kind == KindProbe {
		p.stats.malformed.Add(1)
		return
	}
	pd := p.pending[h.ID]
	if h.Session != p.session || pd == nil || srcQP != pd.addr.QPN || gid.GID(g.SGID) != pd.addr.GID {
		p.stats.foreign.Add(1)
		return
	}
	switch h.Kind {
	case KindEcho:
		if pd.gotEcho {
			p.stats.duplicates.Add(1)
			return
		}
		// An echo carries the delay only when its probe asked: one that
		// did not would else end the probe without its report.
		if h.Length != pd.size || h.Flags&FlagEchoDelay != 0 && !pd.oneReply {
			p.stats.malformed.Add(1)
			return
		}
		pd.gotEcho, pd.rtt = true, now.Sub(pd.sent)
		p.stats.echoes.Add(1)
		if h.Flags&FlagEchoDelay != 0 { // the one reply: no report follows
			pd.gotReport, pd.delay = true, h.Delay
		}
	case KindReport:
		if pd.gotReport {
			p.stats.duplicates.Add(1)
			return
		}
		pd.gotReport, pd.delay = true, h.Delay
		p.stats.reports.Add(1)
	}
	if pd.gotEcho && pd.gotReport {
		p.finish(pd)
	}
}

// restart makes the queue pair again and asks every target again.
func (p *Prober) restart(ctx context.Context) error {
	p.stats.restarts.Add(1)
	for _, pd := range p.pending {
		pd.done = true
	}
	clear(p.pending)
	clear(p.slotProbe)
	p.order = nil
	for i := range p.slots {
		p.sendDone(i)
	}
	p.mu.Lock() // apply and Run's AfterFunc interrupt p.ep
	p.ep.close()
	p.mu.Unlock()
	ep, err := newEndpoint(p.cfg.Local, NewQKey(), p.cfg.Receives, p.cfg.Sends)
	if err != nil {
		return err // p.ep stays, closed: Close closes it again, harmlessly
	}
	p.mu.Lock()
	p.ep = ep
	p.mu.Unlock()
	for _, t := range p.targets {
		t.resolving = false
		p.startResolve(ctx, t)
	}
	return nil
}

// Close releases the queue pair and the address handles. Run must have
// returned, or not run.
func (p *Prober) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for h := range p.held {
		p.destroyAH(h)
	}
	for _, o := range p.ops {
		if o.resolved != nil && o.resolved.err == nil {
			p.cfg.Local.Context.DestroyAH(o.resolved.ah)
		}
	}
	p.ops = nil
	return p.ep.close()
}

// dueHeap orders targets by their next probe.
type dueHeap []*target

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	t := x.(*target)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *dueHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
