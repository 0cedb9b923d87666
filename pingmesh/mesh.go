// Package pingmesh probes a set of peers continuously and exports what it
// measured to Prometheus: the exporter's --collector.pingmesh. The
// targets come from a file in Prometheus' file_sd format (targets and
// labels such as rack, tor and rail), re-read when it changes; each
// target is probed at a rate (Config.Rate), the whole mesh within a bound
// (Config.MaxRate), through a Pinger: the UD ping of one queue pair to
// every target, which reports the network round trip with the
// responder's own delay taken out.
//
// Per target it exports probes sent and lost by size, the time of the
// last answer, losses in a row and whether the responder answers; RTT
// and responder delay histograms and errors by kind per target up to
// Config.MaxTargetSeries targets, per value of one label
// (Config.AggregateBy) beyond, so that the series a node exports stay
// bounded (see Series). A target's labels are exported prefixed target_
// so that they never clash with the labels of the node that probes.
//
// The collector never fails a scrape: a targets file that cannot be read
// keeps the targets of the last good one and is counted.
package pingmesh

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config says how to probe.
type Config struct {
	// Rate is the probes a second to each target (DefaultRate).
	Rate float64
	// MaxRate bounds the probes a second to all targets together
	// (DefaultMaxRate): with more targets than MaxRate/Rate each is
	// probed less often.
	MaxRate float64
	// Timeout is how long a probe waits for its answer before it is
	// lost (DefaultTimeout).
	Timeout time.Duration
	// Sizes are the payload sizes probes cycle through; 0 is the path
	// MTU (DefaultSizes).
	Sizes []int
	// MaxTargetSeries is how many targets get their own RTT and delay
	// histograms and error counters (DefaultMaxTargetSeries; negative:
	// none); with more targets these are summed per value of the label
	// AggregateBy (DefaultAggregateBy).
	MaxTargetSeries int
	AggregateBy     string
	// ReloadInterval is how often the targets file is checked for
	// changes (DefaultReloadInterval).
	ReloadInterval time.Duration
	// Buckets are the histograms' upper bounds in seconds
	// (DefaultBuckets).
	Buckets []float64
	// Skip, when set, leaves out the targets it returns true for: this
	// node itself, when the targets file lists every node (LocalTarget).
	Skip func(Target) bool
	// Logger receives the collector's messages (targets reloaded, a
	// file refused); nil discards them.
	Logger *slog.Logger
	// Now returns the time; nil is time.Now.
	Now func() time.Time
}

// Defaults. One probe a second to each target and a 1 s timeout find a
// black hole (3 probes lost in a row) in about 3 s; 500 probes a second
// in all keep a node's share of the mesh small (R-Pingmesh probes
// same-ToR peers at 10/s and others at 1/s).
const (
	DefaultRate            = 1.0
	DefaultMaxRate         = 500.0
	DefaultTimeout         = time.Second
	DefaultMaxTargetSeries = 100
	DefaultAggregateBy     = "tor"
	DefaultReloadInterval  = 5 * time.Second
)

// DefaultSizes: small probes miss loss that only hits packets over 1 KiB
// (Alibaba, Aegis, NSDI 2025), so probes cycle through 64 B, 512 B, 1 KiB
// and the path MTU.
var DefaultSizes = []int{64, 512, 1024, 0}

// Limits of a Config.
const (
	MaxRatePerTarget = 1000.0
	MaxTotalRate     = 100_000.0
	MaxTimeout       = time.Minute
	maxSizes         = 16
	MaxSize          = 1 << 16
)

// WithDefaults fills in the zero fields.
func (c Config) WithDefaults() Config {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.MaxRate == 0 {
		c.MaxRate = DefaultMaxRate
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Sizes == nil {
		c.Sizes = DefaultSizes
	}
	if c.MaxTargetSeries == 0 {
		c.MaxTargetSeries = DefaultMaxTargetSeries
	}
	if c.AggregateBy == "" {
		c.AggregateBy = DefaultAggregateBy
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = DefaultReloadInterval
	}
	if c.Buckets == nil {
		c.Buckets = DefaultBuckets
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case !(c.Rate > 0 && c.Rate <= MaxRatePerTarget):
		return fmt.Errorf("rate %v: more than 0 and at most %v probes a second to each target", c.Rate, MaxRatePerTarget)
	case !(c.MaxRate > 0 && c.MaxRate <= MaxTotalRate):
		return fmt.Errorf("max rate %v: more than 0 and at most %v probes a second in all", c.MaxRate, MaxTotalRate)
	case c.Timeout <= 0 || c.Timeout > MaxTimeout:
		return fmt.Errorf("timeout %v: more than 0 and at most %v", c.Timeout, MaxTimeout)
	case len(c.Sizes) == 0 || len(c.Sizes) > maxSizes:
		return fmt.Errorf("%d sizes: from 1 to %d", len(c.Sizes), maxSizes)
	case c.ReloadInterval <= 0:
		return fmt.Errorf("reload interval %v: more than 0", c.ReloadInterval)
	case !labelName.MatchString(c.AggregateBy) || len(c.AggregateBy) > 2 && c.AggregateBy[:2] == "__":
		return fmt.Errorf("aggregation label %q is not a label name of a targets file", c.AggregateBy)
	case !slices.IsSorted(c.Buckets) || len(c.Buckets) == 0:
		return fmt.Errorf("histogram buckets must be increasing")
	}
	for _, s := range c.Sizes {
		if s < 0 || s > MaxSize {
			return fmt.Errorf("size %d: from 1 to %d bytes, or 0 for the path MTU", s, MaxSize)
		}
	}
	return nil
}

// Interval is the time between two probes to one target when there are
// n targets: 1/Rate, or n/MaxRate when that is longer.
func (c Config) Interval(n int) time.Duration {
	perSecond := c.Rate
	if n > 0 && float64(n)*c.Rate > c.MaxRate {
		perSecond = c.MaxRate / float64(n)
	}
	return time.Duration(float64(time.Second) / perSecond)
}

// Series is how many series the collector exports for n targets, each
// with labels file_sd labels, in groups values of the aggregation label
// (beyond MaxTargetSeries), with sizes probe sizes: what to expect of a
// node's scrape (the README's figures at 1,000 targets).
func (c Config) Series(n, groups, sizes int) int {
	hist := len(c.Buckets) + 3 // buckets, +Inf, _sum, _count
	perTarget := 2*sizes + 3   // sent and lost by size, last success, consecutive lost, responder up
	detail := 2*hist + len(ErrorKinds)
	const fixed = 7 // targets, interval, skipped, file errors, ok and loaded, timestamps info
	if n <= c.MaxTargetSeries {
		return n*(perTarget+detail) + fixed
	}
	return n*perTarget + groups*detail + fixed
}

// Mesh is the pingmesh collector: it probes the targets of a targets
// file through a Pinger (Run) and is a prometheus.Collector of what it
// measured.
type Mesh struct {
	cfg    Config
	pinger Pinger
	file   *TargetsFile

	mu       sync.Mutex
	targets  map[string]*targetState // by HostPort
	names    []string                // file labels of the targets, sorted
	interval time.Duration
	queue    dueQueue
	skipped  float64
	source   string // "hardware", "software": of the last answer
	inflight chan struct{}
	changed  chan struct{} // the schedule changed (a reload)
}

// targetState is what the collector keeps of one target.
type targetState struct {
	t        Target
	hostPort string
	gone     bool // dropped from the file: answers still in flight are ignored

	next    time.Time
	index   int // in the due queue
	sizeIdx int

	sent, lost  map[int]float64 // by size
	errs        map[ErrorKind]float64
	lastSuccess time.Time
	consecutive int
	responder   int // -1 unknown, 0 down, 1 up
	rtt, delay  *histogram
}

// New returns a collector of the targets in file, probed through p.
// cfg is completed with its defaults; Validate it first.
func New(cfg Config, p Pinger, file *TargetsFile) *Mesh {
	cfg = cfg.WithDefaults()
	return &Mesh{
		cfg: cfg, pinger: p, file: file,
		targets:  map[string]*targetState{},
		inflight: make(chan struct{}, int(math.Ceil(cfg.MaxRate*cfg.Timeout.Seconds()))+16),
		changed:  make(chan struct{}, 1),
		interval: cfg.Interval(0),
	}
}

// Run reads the targets file, probes its targets until ctx ends and
// re-reads the file every Config.ReloadInterval. It returns once the
// probes in flight have ended.
func (m *Mesh) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	m.Reload()
	reload := time.NewTicker(m.cfg.ReloadInterval)
	defer reload.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.mu.Lock()
		wait := time.Hour
		if len(m.queue) > 0 {
			wait = m.queue[0].next.Sub(m.cfg.Now())
		}
		m.mu.Unlock()
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			m.Reload()
		case <-m.changed:
		case <-timer.C:
			for _, d := range m.due() {
				select {
				case m.inflight <- struct{}{}:
				default:
					m.mu.Lock()
					m.skipped++
					m.mu.Unlock()
					continue
				}
				wg.Go(func() {
					defer func() { <-m.inflight }()
					m.probe(ctx, d.ts, d.size)
				})
			}
		}
	}
}

// due is one probe to send now.
type due struct {
	ts   *targetState
	size int
}

// due pops the targets whose probe is due, schedules their next one and
// returns what to send.
func (m *Mesh) due() []due {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	var out []due
	for len(m.queue) > 0 && !m.queue[0].next.After(now) {
		ts := m.queue[0]
		out = append(out, due{ts, m.nextSize(ts)})
		ts.next = ts.next.Add(m.interval)
		if ts.next.Before(now) { // behind (a stopped clock, a loaded host): skip, do not burst
			ts.next = now.Add(m.interval)
		}
		heap.Fix(&m.queue, 0)
	}
	return out
}

// nextSize is the next size in the target's cycle: sizes at or above
// the path MTU (when the pinger knows it) are probed once, as the MTU.
func (m *Mesh) nextSize(ts *targetState) int {
	sizes := m.cfg.Sizes
	if pm, ok := m.pinger.(PathMTUer); ok {
		if mtu, known := pm.PathMTU(ts.hostPort); known && mtu > 0 {
			var eff []int
			atMTU := false
			for _, s := range sizes {
				switch {
				case s > 0 && s < mtu:
					eff = append(eff, s)
				case !atMTU:
					eff = append(eff, 0)
					atMTU = true
				}
			}
			sizes = eff
		}
	}
	s := sizes[ts.sizeIdx%len(sizes)]
	ts.sizeIdx++
	return s
}

// probe sends one probe and records its outcome.
func (m *Mesh) probe(ctx context.Context, ts *targetState, size int) {
	pctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	r, err := m.pinger.Ping(pctx, ts.hostPort, size)
	cancel()
	if ctx.Err() != nil {
		return // stopping: not the target's fault
	}
	if errors.Is(err, context.DeadlineExceeded) && r.Sent {
		err = fmt.Errorf("%w: %w", ErrLost, err)
	}
	m.record(ts, size, r, err)
}

// record counts a probe's outcome.
func (m *Mesh) record(ts *targetState, size int, r Reply, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts.gone {
		return
	}
	if r.Sent && r.Size > 0 {
		size = r.Size
	}
	switch {
	case err == nil:
		ts.sent[size]++
		ts.rtt.observe(m.cfg.Buckets, r.RTT.Seconds())
		ts.delay.observe(m.cfg.Buckets, r.ResponderDelay.Seconds())
		ts.lastSuccess = m.cfg.Now()
		ts.consecutive = 0
		ts.responder = 1
		m.source = "software"
		if r.Hardware {
			m.source = "hardware"
		}
	case errors.Is(err, ErrLost):
		ts.sent[size]++
		ts.lost[size]++
		ts.consecutive++
		ts.responder = 1 // its address was known: the control channel answered
	default:
		k := Kind(err)
		ts.errs[k]++
		if r.Sent {
			ts.sent[size]++
			ts.lost[size]++
			ts.consecutive++
		}
		switch k {
		case KindResolve, KindNoResponder, KindRefused:
			ts.responder = 0
		}
		m.cfg.Logger.Debug("probe failed", "target", ts.hostPort, "kind", string(k), "err", err)
	}
}

// Reload re-reads the targets file if it changed and applies it: targets
// that stay keep their counters, new ones start, those gone stop. A file
// that cannot be read keeps the targets in use.
func (m *Mesh) Reload() {
	changed, err := m.file.Reload()
	if err != nil {
		m.cfg.Logger.Warn("targets file not loaded; the last good targets stay in use", "file", m.file.Path, "err", err)
		return
	}
	if !changed {
		return
	}
	targets := m.file.Targets()
	if m.cfg.Skip != nil {
		targets = slices.DeleteFunc(targets, func(t Target) bool {
			if m.cfg.Skip(t) {
				m.cfg.Logger.Info("not probing this node itself", "target", t.Address)
				return true
			}
			return false
		})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	m.interval = m.cfg.Interval(len(targets))
	keep := map[string]*targetState{}
	names := map[string]bool{}
	added := 0
	for _, t := range targets {
		hp := t.HostPort()
		ts := m.targets[hp]
		if ts == nil {
			ts = &targetState{hostPort: hp, sent: map[int]float64{}, lost: map[int]float64{}, errs: map[ErrorKind]float64{},
				responder: -1, rtt: newHistogram(len(m.cfg.Buckets)), delay: newHistogram(len(m.cfg.Buckets))}
			added++
		}
		ts.t = t
		keep[hp] = ts
		for k := range t.Labels {
			names[k] = true
		}
	}
	for hp, ts := range m.targets {
		if keep[hp] == nil {
			ts.gone = true
		}
	}
	m.targets = keep
	m.names = slices.Sorted(maps.Keys(names))
	// The queue is rebuilt: each target keeps its phase, new ones are
	// spread over one interval so that the mesh does not probe in bursts.
	m.queue = m.queue[:0]
	for _, ts := range m.targets {
		if ts.next.IsZero() { // new
			ts.next = now.Add(time.Duration(rand.Int64N(int64(m.interval) + 1)))
		} else if ts.next.Sub(now) > m.interval {
			ts.next = now.Add(m.interval)
		}
		m.queue = append(m.queue, ts)
	}
	heap.Init(&m.queue)
	m.cfg.Logger.Info("targets loaded", "file", m.file.Path, "targets", len(m.targets), "added", added, "interval", m.interval)
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Describe sends nothing: the label names come from the targets file,
// so the collector is unchecked.
func (m *Mesh) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of every target.
func (m *Mesh) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	extra := make([]string, len(m.names))
	for i, n := range m.names {
		extra[i] = "target_" + n
	}
	d := func(f interface {
		Desc(...string) *prometheus.Desc
	}) *prometheus.Desc {
		return f.Desc(extra...)
	}
	dRTT, dDelay, dSent, dLost := d(famRTT), d(famDelay), d(famSent), d(famLost)
	dLast, dCons, dUp, dErr := d(famLastSuccess), d(famConsecutive), d(famResponderUp), d(famErrors)
	values := func(ts *targetState) []string {
		v := make([]string, len(m.names))
		for i, n := range m.names {
			v[i] = ts.t.Labels[n]
		}
		return v
	}
	perTarget := len(m.targets) <= m.cfg.MaxTargetSeries
	groups := map[string]*targetState{}
	for _, key := range slices.Sorted(maps.Keys(m.targets)) {
		ts := m.targets[key]
		hp := ts.t.Address // as the file has it: unique, since host:port is
		lv := values(ts)
		with := func(first ...string) []string { return append(first, lv...) }
		for _, size := range slices.Sorted(maps.Keys(ts.sent)) {
			s := strconv.Itoa(size)
			if size == 0 {
				s = "mtu"
			}
			ch <- prometheus.MustNewConstMetric(dSent, prometheus.CounterValue, ts.sent[size], with(hp, s)...)
			ch <- prometheus.MustNewConstMetric(dLost, prometheus.CounterValue, ts.lost[size], with(hp, s)...)
		}
		last := 0.0
		if !ts.lastSuccess.IsZero() {
			last = float64(ts.lastSuccess.UnixMilli()) / 1000
		}
		ch <- prometheus.MustNewConstMetric(dLast, prometheus.GaugeValue, last, with(hp)...)
		ch <- prometheus.MustNewConstMetric(dCons, prometheus.GaugeValue, float64(ts.consecutive), with(hp)...)
		if ts.responder >= 0 {
			ch <- prometheus.MustNewConstMetric(dUp, prometheus.GaugeValue, float64(ts.responder), with(hp)...)
		}
		if perTarget {
			ch <- ts.rtt.metric(dRTT, m.cfg.Buckets, with(hp))
			ch <- ts.delay.metric(dDelay, m.cfg.Buckets, with(hp))
			for _, k := range ErrorKinds {
				ch <- prometheus.MustNewConstMetric(dErr, prometheus.CounterValue, ts.errs[k], with(hp, string(k))...)
			}
			continue
		}
		key := ts.t.Labels[m.cfg.AggregateBy]
		g := groups[key]
		if g == nil {
			g = &targetState{errs: map[ErrorKind]float64{}, rtt: newHistogram(len(m.cfg.Buckets)), delay: newHistogram(len(m.cfg.Buckets)),
				t: Target{Labels: map[string]string{}}}
			if key != "" {
				g.t.Labels[m.cfg.AggregateBy] = key
			}
			groups[key] = g
		}
		g.rtt.add(ts.rtt)
		g.delay.add(ts.delay)
		for k, v := range ts.errs {
			g.errs[k] += v
		}
	}
	// Beyond MaxTargetSeries: one series per value of the aggregation
	// label, target empty (targets without the label sum into the
	// series where it is empty too).
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		lv := values(g)
		ch <- g.rtt.metric(dRTT, m.cfg.Buckets, append([]string{""}, lv...))
		ch <- g.delay.metric(dDelay, m.cfg.Buckets, append([]string{""}, lv...))
		for _, k := range ErrorKinds {
			ch <- prometheus.MustNewConstMetric(dErr, prometheus.CounterValue, g.errs[k], append([]string{"", string(k)}, lv...)...)
		}
	}
	ch <- prometheus.MustNewConstMetric(famTargets.Desc(), prometheus.GaugeValue, float64(len(m.targets)))
	ch <- prometheus.MustNewConstMetric(famInterval.Desc(), prometheus.GaugeValue, m.interval.Seconds())
	ch <- prometheus.MustNewConstMetric(famSkipped.Desc(), prometheus.CounterValue, m.skipped)
	st := m.file.Status()
	ch <- prometheus.MustNewConstMetric(famFileErrors.Desc(), prometheus.CounterValue, st.Errors)
	ok := 0.0
	if st.LastOK {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(famFileOK.Desc(), prometheus.GaugeValue, ok)
	if !st.LoadedAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(famFileLoaded.Desc(), prometheus.GaugeValue, float64(st.LoadedAt.UnixMilli())/1000)
	}
	if m.source != "" {
		ch <- prometheus.MustNewConstMetric(famTimestamps.Desc(), prometheus.GaugeValue, 1, m.source)
	}
}

// dueQueue orders targets by their next probe.
type dueQueue []*targetState

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *dueQueue) Push(x any) { ts := x.(*targetState); ts.index = len(*q); *q = append(*q, ts) }
func (q *dueQueue) Pop() any {
	old := *q
	ts := old[len(old)-1]
	*q = old[:len(old)-1]
	return ts
}
