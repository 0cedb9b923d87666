// Package pingmesh probes a set of peers continuously and exports what it
// measured to Prometheus: the exporter's --collector.pingmesh. The
// targets come from a file in Prometheus' file_sd format (targets and
// labels such as rack, tor and rail), re-read when it changes, and are
// handed to a UD prober (package udping: one queue pair to every target,
// each at Config.Rate, all within a bound, sizes cycling 64/512/1024 and
// the path MTU), whose results the collector aggregates: the network
// round trip with the responder's own delay taken out, the delay, losses.
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
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/grdma/grdma/udping"
	"github.com/prometheus/client_golang/prometheus"
)

// Prober is what the collector probes through: udping.Prober, which
// schedules each target's probes and streams their results (Run is the
// caller's to start), or a fake in tests.
type Prober interface {
	Add(target string, cfg udping.TargetConfig) error
	Remove(target string)
	Results() <-chan udping.Result
}

// Config says how to probe.
type Config struct {
	// Rate is the probes a second to each target (DefaultRate).
	Rate float64
	// MaxRate bounds the probes a second to all targets together
	// (DefaultMaxRate): with more targets than MaxRate/Rate each is
	// probed less often.
	MaxRate float64
	// Timeout is how long a probe waits for its answer before it is
	// lost (DefaultTimeout): the prober's, given here for Validate.
	Timeout time.Duration
	// Sizes are the payload sizes probes cycle through; nil is
	// udping.DefaultSizes and the path MTU.
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
// black hole (5 probes lost in a row, the alert's threshold) in about
// 6 s; 500 probes a second in all keep a node's share of the mesh small
// (R-Pingmesh probes same-ToR peers at 10/s and others at 1/s).
const (
	DefaultRate            = 1.0
	DefaultMaxRate         = 500.0
	DefaultTimeout         = time.Second
	DefaultMaxTargetSeries = 100
	DefaultAggregateBy     = "tor"
	DefaultReloadInterval  = 5 * time.Second
)

// Limits of a Config.
const (
	MaxRatePerTarget = 1000.0
	MaxTotalRate     = 100_000.0
	MaxTimeout       = time.Minute
	maxSizes         = 16
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
	case len(c.Sizes) > maxSizes:
		return fmt.Errorf("%d sizes: at most %d", len(c.Sizes), maxSizes)
	case c.ReloadInterval <= 0:
		return fmt.Errorf("reload interval %v: more than 0", c.ReloadInterval)
	case !labelName.MatchString(c.AggregateBy) || len(c.AggregateBy) > 2 && c.AggregateBy[:2] == "__":
		return fmt.Errorf("aggregation label %q is not a label name of a targets file", c.AggregateBy)
	case !slices.IsSorted(c.Buckets) || len(c.Buckets) == 0:
		return fmt.Errorf("histogram buckets must be increasing")
	}
	for _, s := range c.Sizes {
		if s < udping.HeaderSize || s > udping.MaxDatagram {
			return fmt.Errorf("size %d: from %d to %d bytes (and at most the path MTU)", s, udping.HeaderSize, udping.MaxDatagram)
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
	perTarget := 2*sizes + 4   // sent and lost by size, echo lost, last success, lost in a row, responder up
	detail := 2*hist + len(ErrorKinds)
	// targets, interval, results ignored, file errors, ok and loaded,
	// timestamps info, the prober's 10 events
	const fixed = 17
	if n <= c.MaxTargetSeries {
		return n*(perTarget+detail) + fixed
	}
	return n*perTarget + groups*detail + fixed
}

// Mesh is the pingmesh collector: it gives the targets of a targets
// file to a Prober, aggregates its results (Run) and is a
// prometheus.Collector of them.
type Mesh struct {
	cfg    Config
	prober Prober
	file   *TargetsFile

	mu       sync.Mutex
	targets  map[string]*targetState // by address as the file writes it
	names    []string                // file labels of the targets, sorted
	interval time.Duration
	source   udping.TimestampSource // of the last answer
	dropped  float64                // results of targets no longer probed
}

// targetState is what the collector keeps of one target.
type targetState struct {
	t Target

	sent, lost  map[int]float64 // by size
	echoLost    float64
	errs        map[ErrorKind]float64
	lastSuccess time.Time
	consecutive int
	responder   int // -1 unknown, 0 down, 1 up
	rtt, delay  *histogram
}

// New returns a collector of the targets in file, probed through p.
// cfg is completed with its defaults; Validate it first.
func New(cfg Config, p Prober, file *TargetsFile) *Mesh {
	cfg = cfg.WithDefaults()
	return &Mesh{cfg: cfg, prober: p, file: file, targets: map[string]*targetState{}, interval: cfg.Interval(0)}
}

// Run reads the targets file and gives its targets to the prober,
// re-reads it every Config.ReloadInterval, and records the prober's
// results until ctx ends or the results channel closes.
func (m *Mesh) Run(ctx context.Context) {
	m.Reload()
	reload := time.NewTicker(m.cfg.ReloadInterval)
	defer reload.Stop()
	results := m.prober.Results()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			m.Reload()
		case r, ok := <-results:
			if !ok {
				return
			}
			m.record(r)
		}
	}
}

// record counts a probe's outcome.
func (m *Mesh) record(r udping.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.targets[r.Target]
	if ts == nil {
		m.dropped++ // removed from the file while its probe was out
		return
	}
	switch r.Outcome {
	case udping.OutcomeReply:
		ts.sent[r.Size]++
		ts.rtt.observe(m.cfg.Buckets, r.Network().Seconds())
		if r.DelayKnown {
			ts.delay.observe(m.cfg.Buckets, r.Delay.Seconds())
		}
		ts.lastSuccess = m.cfg.Now()
		ts.consecutive = 0
		ts.responder = 1
		m.source = r.Timestamps
	case udping.OutcomeTimeout, udping.OutcomeEchoLost:
		ts.sent[r.Size]++
		ts.lost[r.Size]++
		if r.Outcome == udping.OutcomeEchoLost {
			ts.echoLost++
		}
		ts.consecutive++
		ts.responder = 1 // its address was had: the control channel answered
	default:
		k := KindLocal // too large, a send that failed: this side
		if r.Outcome == udping.OutcomeResolve {
			k = Kind(r.Err)
		}
		ts.errs[k]++
		switch k {
		case KindResolve, KindNoResponder, KindRefused:
			ts.responder = 0
		}
		m.cfg.Logger.Debug("probe failed", "target", r.Target, "outcome", string(r.Outcome), "kind", string(k), "err", r.Err)
	}
}

// Reload re-reads the targets file if it changed and applies it: targets
// that stay keep their counters, new ones are added to the prober, those
// gone removed. A file that cannot be read keeps the targets in use.
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
	keep := map[string]*targetState{}
	names := map[string]bool{}
	added, failed := 0, 0
	tc := udping.TargetConfig{Rate: m.cfg.Rate, Sizes: m.cfg.Sizes}
	for _, t := range targets {
		ts := m.targets[t.Address]
		if ts == nil {
			// The prober is asked by host:port; results come back by the
			// name it was given, so the file's address is the key.
			if err := m.prober.Add(t.Address, tc); err != nil {
				m.cfg.Logger.Warn("target not added", "target", t.Address, "err", err)
				failed++
				continue
			}
			ts = &targetState{sent: map[int]float64{}, lost: map[int]float64{}, errs: map[ErrorKind]float64{},
				responder: -1, rtt: newHistogram(len(m.cfg.Buckets)), delay: newHistogram(len(m.cfg.Buckets))}
			added++
		}
		ts.t = t
		keep[t.Address] = ts
		for k := range t.Labels {
			names[k] = true
		}
	}
	for a := range m.targets {
		if keep[a] == nil {
			m.prober.Remove(a)
		}
	}
	m.targets = keep
	m.names = slices.Sorted(maps.Keys(names))
	m.interval = m.cfg.Interval(len(keep))
	m.cfg.Logger.Info("targets loaded", "file", m.file.Path, "targets", len(keep), "added", added, "not_added", failed, "interval", m.interval)
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
	dLast, dCons, dUp, dErr, dEcho := d(famLastSuccess), d(famConsecutive), d(famResponderUp), d(famErrors), d(famEchoLost)
	values := func(ts *targetState) []string {
		v := make([]string, len(m.names))
		for i, n := range m.names {
			v[i] = ts.t.Labels[n]
		}
		return v
	}
	perTarget := len(m.targets) <= m.cfg.MaxTargetSeries
	groups := map[string]*targetState{}
	for _, hp := range slices.Sorted(maps.Keys(m.targets)) {
		ts := m.targets[hp]
		lv := values(ts)
		with := func(first ...string) []string { return append(first, lv...) }
		for _, size := range slices.Sorted(maps.Keys(ts.sent)) {
			s := strconv.Itoa(size)
			ch <- prometheus.MustNewConstMetric(dSent, prometheus.CounterValue, ts.sent[size], with(hp, s)...)
			ch <- prometheus.MustNewConstMetric(dLost, prometheus.CounterValue, ts.lost[size], with(hp, s)...)
		}
		last := 0.0
		if !ts.lastSuccess.IsZero() {
			last = float64(ts.lastSuccess.UnixMilli()) / 1000
		}
		ch <- prometheus.MustNewConstMetric(dLast, prometheus.GaugeValue, last, with(hp)...)
		ch <- prometheus.MustNewConstMetric(dCons, prometheus.GaugeValue, float64(ts.consecutive), with(hp)...)
		ch <- prometheus.MustNewConstMetric(dEcho, prometheus.CounterValue, ts.echoLost, with(hp)...)
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
	ch <- prometheus.MustNewConstMetric(famDropped.Desc(), prometheus.CounterValue, m.dropped)
	if st, ok := m.prober.(interface{ Stats() udping.ProberStats }); ok {
		s := st.Stats()
		for _, e := range []struct {
			name string
			v    uint64
		}{{"sent", s.Sent}, {"throttled", s.Throttled}, {"results_dropped", s.ResultsDropped}, {"malformed", s.Malformed},
			{"foreign", s.Foreign}, {"duplicates", s.Duplicates}, {"resolves", s.Resolves}, {"resolve_errors", s.ResolveErrors},
			{"send_errors", s.SendErrors}, {"restarts", s.Restarts}} {
			ch <- prometheus.MustNewConstMetric(famProber.Desc(), prometheus.CounterValue, float64(e.v), e.name)
		}
	}
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
		ch <- prometheus.MustNewConstMetric(famTimestamps.Desc(), prometheus.GaugeValue, 1, string(m.source))
	}
}
