// Package prober is the exporter's /probe endpoint, as
// blackbox_exporter's: /probe?target=HOST&module=NAME runs the module's
// probe from this node to the target and answers with the metrics of that
// one probe, from a registry made for the request: probe_success,
// probe_duration_seconds, the module's results and, when it failed,
// probe_failure_info naming the reason. Prometheus' service discovery
// and relabelling then choose the targets (the scrape configurations in
// deploy/prometheus).
//
// Modules: rc (a test over an RC queue pair against the target's
// responder, `grdma probe DEV serve`: connect, traffic, lat, bw) and
// ud_ping (UD pings through the exporter's UD prober), configured in a
// modules file over the built-in rc_lat, rc_bw, rc_connect, cm_connect and
// ud_ping.
//
// A probe that fails is an answer (HTTP 200, probe_success 0), never a
// failed scrape: an unknown module, a target that does not resolve or
// has no responder, a busy responder or exporter, a timeout. Only a
// request without a target is refused (400), as blackbox_exporter does.
// The probe's time is the scrape's (X-Prometheus-Scrape-Timeout-Seconds
// less an offset), capped by the module's timeout; bandwidth tests run
// one at a time and other probes at most Options.MaxConcurrent at once.
package prober

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Options configure a Handler.
type Options struct {
	// Sysfs is where local RDMA ports are found (the source of a probe).
	Sysfs sysfs.FS
	// Pinger is the exporter's UD prober; nil leaves ud_ping out (a
	// modules file that uses it is refused).
	Pinger UDPinger
	// TimeoutOffset is taken from Prometheus' scrape timeout so that the
	// answer arrives before Prometheus gives up (DefaultTimeoutOffset,
	// blackbox_exporter's --timeout-offset).
	TimeoutOffset time.Duration
	// MaxConcurrent bounds the probes running at once, bandwidth tests
	// aside, which run one at a time (DefaultMaxConcurrent).
	MaxConcurrent int
	// Logger receives a line per probe; nil discards them.
	Logger *slog.Logger

	// Source, when set, replaces finding the local port a probe to addr
	// leaves from (tests: a fake device).
	Source func(ctx context.Context, m Module, addr net.IP) (verbsprobe.Options, error)
	// Dial, when set, replaces TCP to the responder (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolver resolves target names (nil: net.DefaultResolver).
	Resolver *net.Resolver
}

// Defaults of Options.
const (
	DefaultTimeoutOffset = 500 * time.Millisecond
	DefaultMaxConcurrent = 8
)

// Handler serves /probe.
type Handler struct {
	opts    Options
	probers map[string]probeFunc

	mu  sync.RWMutex
	cfg *Config

	probes, bandwidth chan struct{}

	unknown prometheus.Counter
	results *prometheus.CounterVec
	running prometheus.Gauge
}

// probeFunc runs a module's probe, exports its results into reg and
// returns nil on success.
type probeFunc func(ctx context.Context, p *probe) *Failure

// probe is one request's probe.
type probe struct {
	target  string // as the request gave it
	module  Module
	params  *Params
	reg     *prometheus.Registry
	log     *slog.Logger
	metrics *constMetrics
	h       *Handler
}

// NewHandler returns the /probe handler with the modules of cfg
// (DefaultConfig when nil). It refuses a module whose prober this
// exporter lacks (ud_ping without a Pinger), unless it is a built-in one,
// which is then left out.
func NewHandler(cfg *Config, o Options) (*Handler, error) {
	if o.TimeoutOffset <= 0 {
		o.TimeoutOffset = DefaultTimeoutOffset
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	h := &Handler{opts: o,
		probes:    make(chan struct{}, o.MaxConcurrent),
		bandwidth: make(chan struct{}, 1),
		unknown:   prometheus.NewCounter(prometheus.CounterOpts{Name: famModuleUnknown.Name, Help: famModuleUnknown.Help}),
		results:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: famProbes.Name, Help: famProbes.Help}, famProbes.Labels),
		running:   prometheus.NewGauge(prometheus.GaugeOpts{Name: famRunning.Name, Help: famRunning.Help}),
	}
	h.probers = map[string]probeFunc{ProberRC: probeRC}
	if o.Pinger != nil {
		h.probers[ProberUDPing] = probeUDPing
	}
	if err := h.SetConfig(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// SetConfig replaces the modules (a reload); probes running keep theirs.
func (h *Handler) SetConfig(cfg *Config) error {
	if cfg == nil {
		cfg = DefaultConfig()
		if err := cfg.prepare(); err != nil {
			return err
		}
	}
	kept := &Config{Modules: map[string]Module{}}
	for _, name := range slices.Sorted(maps.Keys(cfg.Modules)) {
		m := cfg.Modules[name]
		if _, ok := h.probers[m.Prober]; !ok {
			if m.builtin {
				continue
			}
			return fmt.Errorf("module %s: prober %s is not available in this exporter (ud_ping needs the UD prober of --collector.pingmesh)", name, m.Prober)
		}
		kept.Modules[name] = m
	}
	h.mu.Lock()
	h.cfg = kept
	h.mu.Unlock()
	return nil
}

// Modules returns the names of the modules served.
func (h *Handler) Modules() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return slices.Sorted(maps.Keys(h.cfg.Modules))
}

// Collector exports the handler's own counters on the exporter's
// /metrics: probes by module and result, unknown modules asked for,
// probes running.
func (h *Handler) Collector() prometheus.Collector {
	return collectors{h.unknown, h.results, h.running}
}

type collectors []prometheus.Collector

func (c collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c {
		x.Describe(ch)
	}
}

func (c collectors) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c {
		x.Collect(ch)
	}
}

// Params are what a request may change of a module: the rc test's
// operation, size (up to the module's max_size), iterations or duration
// (within the probe's time).
type Params struct {
	Op       verbsprobe.Operation
	Size     int
	Iters    int
	Duration time.Duration
}

// ParseParams reads the parameters of a request; an unknown parameter is
// refused, so a typo is not a default silently used.
func ParseParams(q url.Values) (*Params, error) {
	p := &Params{}
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, fmt.Errorf("parameter %s given %d times", k, len(vs))
		}
		v := vs[0]
		var err error
		switch k {
		case "target", "module", "debug":
		case "op":
			p.Op = verbsprobe.Operation(v)
			switch p.Op {
			case verbsprobe.OpWrite, verbsprobe.OpSend, verbsprobe.OpRead:
			default:
				err = fmt.Errorf("op %q: write, send or read", v)
			}
		case "size":
			p.Size, err = positive(k, v, verbsprobe.MaxTestSize)
		case "iters":
			p.Iters, err = positive(k, v, verbsprobe.MaxTestIters)
		case "duration":
			p.Duration, err = time.ParseDuration(v)
			if err == nil && (p.Duration <= 0 || p.Duration > MaxTimeout) {
				err = fmt.Errorf("duration %s: more than 0 and at most %v", v, MaxTimeout)
			}
		default:
			err = fmt.Errorf("unknown parameter %q: target, module, debug, and for rc modules op, size, iters, duration", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if p.Iters > 0 && p.Duration > 0 {
		return nil, errors.New("iters and duration: give one")
	}
	return p, nil
}

func positive(name, v string, limit int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > limit {
		return 0, fmt.Errorf("%s %q: a number from 1 to %d", name, v, limit)
	}
	return n, nil
}

// Timeout is the probe's time: Prometheus' scrape timeout from header
// (X-Prometheus-Scrape-Timeout-Seconds; "" if absent) less offset, capped
// by the module's timeout and MaxTimeout.
func Timeout(header string, module, offset time.Duration) (time.Duration, error) {
	t := module
	if header != "" {
		s, err := strconv.ParseFloat(header, 64)
		if err != nil || !(s > 0) {
			return 0, fmt.Errorf("X-Prometheus-Scrape-Timeout-Seconds %q is not a positive number", header)
		}
		if scrape := time.Duration(s*float64(time.Second)) - offset; scrape < t {
			t = scrape
		}
	}
	if t > MaxTimeout {
		t = MaxTimeout
	}
	if t <= 0 {
		return 0, fmt.Errorf("the scrape timeout %ss leaves no time after the offset %v", header, offset)
	}
	return t, nil
}

// ServeHTTP runs one probe.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target := q.Get("target")
	if target == "" {
		http.Error(w, "the target parameter is missing: /probe?target=HOST&module=NAME", http.StatusBadRequest)
		return
	}
	name := q.Get("module")
	h.mu.RLock()
	cfg := h.cfg
	h.mu.RUnlock()

	var logBuf bytes.Buffer
	log := slog.New(teeHandler{slog.NewTextHandler(&logBuf, nil), h.opts.Logger.Handler()}).With("module", name, "target", target)
	reg := prometheus.NewRegistry()
	p := &probe{target: target, reg: reg, log: log, metrics: &constMetrics{}, h: h}
	reg.MustRegister(p.metrics)

	start := time.Now()
	fail := h.run(r, cfg, name, p)
	duration := time.Since(start)
	success := 0.0
	result := "success"
	if fail != nil {
		result = "failure"
		p.metrics.add(famFailure, 1, fail.Reason, fail.Step)
		log.Error("probe failed", "reason", fail.Reason, "step", fail.Step, "err", fail.Err, "duration_seconds", duration.Seconds())
	} else {
		success = 1
		log.Info("probe succeeded", "duration_seconds", duration.Seconds())
	}
	if _, known := cfg.Modules[name]; known {
		h.results.WithLabelValues(name, result).Inc()
	}
	p.metrics.add(famSuccess, success)
	p.metrics.add(famDuration, duration.Seconds())

	if q.Get("debug") == "true" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(debugOutput(&logBuf, reg, p.module)))
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// run finds the module, takes the probe's time and a slot, and probes.
func (h *Handler) run(r *http.Request, cfg *Config, name string, p *probe) *Failure {
	m, ok := cfg.Modules[name]
	if !ok {
		h.unknown.Inc()
		known := slices.Sorted(maps.Keys(cfg.Modules))
		if name == "" {
			return fail(ReasonUnknownModule, "", fmt.Errorf("no module parameter: give one of %s", strings.Join(known, ", ")))
		}
		return fail(ReasonUnknownModule, "", fmt.Errorf("unknown module %q: %s", name, strings.Join(known, ", ")))
	}
	p.module = m
	params, err := ParseParams(r.URL.Query())
	if err != nil {
		return fail(ReasonBadParameter, "", err)
	}
	if *params != (Params{}) && m.Prober != ProberRC {
		return fail(ReasonBadParameter, "", fmt.Errorf("module %s (prober %s) takes no op, size, iters or duration", name, m.Prober))
	}
	p.params = params
	timeout, err := Timeout(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), m.timeout(), h.opts.TimeoutOffset)
	if err != nil {
		return fail(ReasonBadParameter, "", err)
	}
	if m.Prober == ProberRC {
		if f := checkRC(p, timeout); f != nil {
			return f
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	p.log.Info("beginning probe", "prober", m.Prober, "timeout_seconds", timeout.Seconds())

	release, f := h.acquire(ctx, p)
	if f != nil {
		return f
	}
	defer release()
	h.running.Inc()
	defer h.running.Dec()
	return h.probers[m.Prober](ctx, p)
}

// acquire takes a slot: a bandwidth test waits for the one bandwidth
// slot, any probe for one of MaxConcurrent, each no longer than leaves it
// its test's duration and a second.
func (h *Handler) acquire(ctx context.Context, p *probe) (func(), *Failure) {
	need := time.Second
	bw := p.module.Prober == ProberRC && p.module.RC.test(p.params).Kind == verbsprobe.TestBandwidth
	if bw {
		need += p.module.RC.test(p.params).Duration
	}
	wctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, dl.Add(-need))
		defer cancel()
	}
	take := func(sem chan struct{}, what string) *Failure {
		select {
		case sem <- struct{}{}: // a free slot, even with no time to wait
			return nil
		default:
		}
		select {
		case sem <- struct{}{}:
			return nil
		case <-wctx.Done():
			return fail(ReasonProbeBusy, "", fmt.Errorf("this exporter is running %s: no slot freed in time (raise the scrape timeout, or scrape fewer at once)", what))
		}
	}
	if bw {
		if f := take(h.bandwidth, "another bandwidth test (one at a time)"); f != nil {
			return nil, f
		}
	}
	if f := take(h.probes, fmt.Sprintf("%d probes (--probe.max-concurrent)", cap(h.probes))); f != nil {
		if bw {
			<-h.bandwidth
		}
		return nil, f
	}
	return func() {
		<-h.probes
		if bw {
			<-h.bandwidth
		}
	}, nil
}

// teeHandler logs to the request's buffer and the exporter's logger.
type teeHandler [2]slog.Handler

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t[0].Enabled(ctx, l) || t[1].Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, x := range t {
		if x.Enabled(ctx, r.Level) {
			x.Handle(ctx, r.Clone())
		}
	}
	return nil
}

func (t teeHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return teeHandler{t[0].WithAttrs(a), t[1].WithAttrs(a)}
}

func (t teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{t[0].WithGroup(g), t[1].WithGroup(g)}
}

// debugOutput is blackbox_exporter's debug=true answer: the probe's log,
// the metrics it would have returned and its module.
func debugOutput(logs *bytes.Buffer, reg *prometheus.Registry, m Module) string {
	var b bytes.Buffer
	b.WriteString("Logs for the probe:\n")
	logs.WriteTo(&b)
	b.WriteString("\n\nMetrics that would have been returned:\n")
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Fprintf(&b, "Error gathering metrics: %v\n", err)
	}
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&b, mf)
	}
	b.WriteString("\n\nModule configuration:\n")
	b.WriteString(m.String())
	b.WriteString("\n")
	return b.String()
}

// constMetrics is a probe's results, made as the probe learns them.
type constMetrics struct {
	mu sync.Mutex
	ms []prometheus.Metric
}

func (c *constMetrics) add(f interface {
	Desc(...string) *prometheus.Desc
	Kind() string
}, v float64, labels ...string) {
	typ := prometheus.GaugeValue
	if f.Kind() == "counter" {
		typ = prometheus.CounterValue
	}
	c.addMetric(prometheus.MustNewConstMetric(f.Desc(), typ, v, labels...))
}

func (c *constMetrics) addMetric(m prometheus.Metric) {
	c.mu.Lock()
	c.ms = append(c.ms, m)
	c.mu.Unlock()
}

func (c *constMetrics) Describe(chan<- *prometheus.Desc) {}

func (c *constMetrics) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.ms {
		ch <- m
	}
}
