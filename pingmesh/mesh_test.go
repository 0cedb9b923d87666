package pingmesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// fakePinger answers each target as its behaviour says; it counts calls.
type fakePinger struct {
	mu    sync.Mutex
	calls map[string][]int // sizes asked, by target
	reply func(target string, size int) (Reply, error)
	mtu   map[string]int
}

func (p *fakePinger) Ping(ctx context.Context, target string, size int) (Reply, error) {
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string][]int{}
	}
	p.calls[target] = append(p.calls[target], size)
	p.mu.Unlock()
	return p.reply(target, size)
}

func (p *fakePinger) PathMTU(target string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	mtu, ok := p.mtu[target]
	return mtu, ok
}

func (p *fakePinger) count(target string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls[target])
}

func (p *fakePinger) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += len(c)
	}
	return n
}

// kindErr is a pinger error that says its kind.
type kindErr ErrorKind

func (k kindErr) Error() string            { return "fake " + string(k) }
func (k kindErr) PingErrorKind() ErrorKind { return ErrorKind(k) }

func writeTargets(t *testing.T, body string) *TargetsFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mesh.yml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return &TargetsFile{Path: path}
}

// gather collects m into a registry as the exporter would and returns
// the families by name.
func gather(t *testing.T, m *Mesh) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// series finds the metric of a family whose labels include want.
func series(mf *dto.MetricFamily, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	mf := fams[name]
	if mf == nil {
		t.Fatalf("no %s", name)
	}
	s := series(mf, labels)
	if len(s) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, labels, len(s))
	}
	switch m := s[0]; {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s: no value", name)
	return 0
}

// TestRecord: each outcome lands in its counters, and the series carry
// the target's address and file_sd labels prefixed target_.
func TestRecord(t *testing.T) {
	f := writeTargets(t, `
- targets: [good, lossy, "down:18600", nxdomain, busy, broken]
  labels: {rack: r1, tor: t1}
- targets: [other]
  labels: {rail: "3"}
`)
	now := time.Unix(1_700_000_000, 0)
	m := New(Config{Now: func() time.Time { return now }}, &fakePinger{}, f)
	m.Reload()
	ts := func(a string) *targetState { return m.targets[(Target{Address: a}).HostPort()] }
	ok := func(size int, rtt time.Duration) Reply {
		return Reply{Size: size, Sent: true, RTT: rtt, ResponderDelay: 3 * time.Microsecond}
	}
	m.record(ts("good"), 64, ok(64, 20*time.Microsecond), nil)
	m.record(ts("good"), 0, ok(1024, 30*time.Microsecond), nil)
	m.record(ts("lossy"), 64, ok(64, 20*time.Microsecond), nil)
	m.record(ts("lossy"), 1024, Reply{Size: 1024, Sent: true}, ErrLost)
	m.record(ts("lossy"), 1024, Reply{Size: 1024, Sent: true}, fmt.Errorf("%w: deadline", ErrLost))
	m.record(ts("down:18600"), 64, Reply{}, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
	m.record(ts("nxdomain"), 64, Reply{}, &net.DNSError{Err: "no such host", Name: "nxdomain", IsNotFound: true})
	m.record(ts("busy"), 64, Reply{}, kindErr(KindRefused))
	m.record(ts("broken"), 64, Reply{Size: 64, Sent: true}, kindErr(KindLocal))
	fams := gather(t, m)

	lbl := func(target string, kv ...string) map[string]string {
		l := map[string]string{"target": target}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grdma_pingmesh_sent_total", lbl("good", "size", "64", "target_rack", "r1", "target_tor", "t1", "target_rail", ""), 1},
		{"grdma_pingmesh_sent_total", lbl("good", "size", "1024"), 1},
		{"grdma_pingmesh_lost_total", lbl("good", "size", "1024"), 0},
		{"grdma_pingmesh_rtt_seconds", lbl("good"), 2},
		{"grdma_pingmesh_responder_delay_seconds", lbl("good"), 2},
		{"grdma_pingmesh_last_success_timestamp_seconds", lbl("good"), float64(now.Unix())},
		{"grdma_pingmesh_responder_up", lbl("good"), 1},
		{"grdma_pingmesh_sent_total", lbl("lossy", "size", "1024"), 2},
		{"grdma_pingmesh_lost_total", lbl("lossy", "size", "1024"), 2},
		{"grdma_pingmesh_lost_total", lbl("lossy", "size", "64"), 0},
		{"grdma_pingmesh_consecutive_lost", lbl("lossy"), 2},
		{"grdma_pingmesh_responder_up", lbl("lossy"), 1},
		{"grdma_pingmesh_errors_total", lbl("down:18600", "kind", "no_responder"), 1},
		{"grdma_pingmesh_responder_up", lbl("down:18600"), 0},
		{"grdma_pingmesh_last_success_timestamp_seconds", lbl("down:18600"), 0},
		{"grdma_pingmesh_errors_total", lbl("nxdomain", "kind", "resolve"), 1},
		{"grdma_pingmesh_errors_total", lbl("nxdomain", "kind", "no_responder"), 0},
		{"grdma_pingmesh_errors_total", lbl("busy", "kind", "refused"), 1},
		{"grdma_pingmesh_responder_up", lbl("busy"), 0},
		{"grdma_pingmesh_errors_total", lbl("broken", "kind", "local"), 1},
		{"grdma_pingmesh_lost_total", lbl("broken", "size", "64"), 1},
		{"grdma_pingmesh_consecutive_lost", lbl("other", "target_rail", "3", "target_rack", ""), 0},
		{"grdma_pingmesh_targets", nil, 7},
		{"grdma_pingmesh_probe_interval_seconds", nil, 1},
		{"grdma_pingmesh_targets_file_errors_total", nil, 0},
		{"grdma_pingmesh_targets_file_last_reload_successful", nil, 1},
		{"grdma_pingmesh_timestamps_info", map[string]string{"source": "software"}, 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if s := series(fams["grdma_pingmesh_responder_up"], lbl("other")); len(s) != 0 {
		t.Errorf("responder_up of a target never probed: %v, want none", s)
	}
	// Buckets: 20 µs and 30 µs fall in (16, 32] µs.
	h := series(fams["grdma_pingmesh_rtt_seconds"], lbl("good"))[0].Histogram
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 32e-6 {
			want = 2
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	m.record(ts("lossy"), 64, ok(64, time.Millisecond), nil)
	if got := value(t, gather(t, m), "grdma_pingmesh_consecutive_lost", lbl("lossy")); got != 0 {
		t.Errorf("consecutive lost after an answer: %v", got)
	}
}

// TestAggregationBeyondLimit: with more targets than MaxTargetSeries the
// histograms and errors are per value of the aggregation label, and the
// per-target counters stay; Series counts what is exported.
func TestAggregationBeyondLimit(t *testing.T) {
	var b strings.Builder
	const n = 12
	for i := range n {
		fmt.Fprintf(&b, "- targets: [h%d]\n  labels: {tor: tor%d, rack: r%d}\n", i, i%3, i)
	}
	b.WriteString("- targets: [lonely]\n") // no tor
	f := writeTargets(t, b.String())
	cfg := Config{MaxTargetSeries: 5}
	m := New(cfg, &fakePinger{}, f)
	m.Reload()
	for hp, ts := range m.targets {
		m.record(ts, 64, Reply{Size: 64, Sent: true, RTT: 100 * time.Microsecond}, nil)
		if hp == "h1:18515" {
			m.record(ts, 64, Reply{}, kindErr(KindOther))
		}
	}
	fams := gather(t, m)
	rtt := fams["grdma_pingmesh_rtt_seconds"].GetMetric()
	if len(rtt) != 4 {
		t.Fatalf("%d RTT series, want 4 (tor0..2 and the targets without tor)", len(rtt))
	}
	for _, want := range []struct {
		tor   string
		count uint64
	}{{"tor0", 4}, {"tor1", 4}, {"tor2", 4}, {"", 1}} {
		s := series(fams["grdma_pingmesh_rtt_seconds"], map[string]string{"target": "", "target_tor": want.tor, "target_rack": ""})
		if len(s) != 1 || s[0].Histogram.GetSampleCount() != want.count {
			t.Errorf("tor %q: %v, want one histogram of %d", want.tor, s, want.count)
		}
	}
	if got := value(t, fams, "grdma_pingmesh_errors_total", map[string]string{"target": "", "target_tor": "tor1", "kind": "other"}); got != 1 {
		t.Errorf("errors of tor1: %v", got)
	}
	if got := len(fams["grdma_pingmesh_sent_total"].GetMetric()); got != n+1 {
		t.Errorf("%d sent series, want one per target (%d)", got, n+1)
	}
	var total int
	for _, mf := range fams {
		for _, mm := range mf.GetMetric() {
			total++
			if h := mm.GetHistogram(); h != nil {
				total += len(h.GetBucket()) + 2 // as exposed: buckets with +Inf, _sum, _count
			}
		}
	}
	// Series counts one size per target here.
	if want := m.cfg.WithDefaults().Series(n+1, 4, 1); total != want {
		t.Errorf("%d series exported, Series says %d", total, want)
	}
}

// TestRunProbesAndSizes: Run probes every target at about its rate,
// cycling sizes (those at or above the path MTU once, as the MTU), and
// its counters match what the pinger saw.
func TestRunProbesAndSizes(t *testing.T) {
	f := writeTargets(t, "- targets: [a, b, c]\n")
	p := &fakePinger{mtu: map[string]int{"a:18515": 1024}, reply: func(target string, size int) (Reply, error) {
		if size == 0 {
			size = 1024
		}
		return Reply{Size: size, Sent: true, RTT: 50 * time.Microsecond}, nil
	}}
	m := New(Config{Rate: 50, Sizes: []int{64, 512, 1024, 4096, 0}}, p, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for p.count("a:18515") < 9 || p.count("b:18515") < 9 || p.count("c:18515") < 9 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s at 50/s: %v", p.calls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	p.mu.Lock()
	a, b := p.calls["a:18515"][:6], p.calls["b:18515"][:5]
	p.mu.Unlock()
	if fmt.Sprint(a) != "[64 512 0 64 512 0]" {
		t.Errorf("sizes to a (path MTU 1024): %v, want 64 512 0 repeating", a)
	}
	if fmt.Sprint(b) != "[64 512 1024 4096 0]" {
		t.Errorf("sizes to b (MTU unknown): %v, want the configured cycle", b)
	}
	fams := gather(t, m)
	for _, target := range []string{"a", "b", "c"} {
		var sent float64
		for _, s := range series(fams["grdma_pingmesh_sent_total"], map[string]string{"target": target}) {
			sent += s.Counter.GetValue()
		}
		if int(sent) != p.count(target+":18515") {
			t.Errorf("%s: sent %v, pinger saw %d", target, sent, p.count(target))
		}
	}
	if s := series(fams["grdma_pingmesh_sent_total"], map[string]string{"target": "a", "size": "4096"}); len(s) != 0 {
		t.Errorf("a was sent 4096-byte probes above its MTU: %v", s)
	}
}

// TestRunRateBound: the total rate stays within MaxRate however many
// targets there are (checked as an upper bound: a loaded machine only
// sends fewer).
func TestRunRateBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("- targets: [")
	for i := range 40 {
		fmt.Fprintf(&b, "h%d,", i)
	}
	b.WriteString("]\n")
	f := writeTargets(t, b.String())
	p := &fakePinger{reply: func(string, int) (Reply, error) { return Reply{Size: 64, Sent: true}, nil }}
	m := New(Config{Rate: 100, MaxRate: 80}, p, f)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	elapsed := time.Since(start).Seconds()
	if got := m.interval; got != 500*time.Millisecond {
		t.Errorf("interval %v, want 40 targets / 80 per second = 500ms", got)
	}
	if n := p.total(); float64(n) > 80*elapsed+40 {
		t.Errorf("%d probes in %.2f s: more than 80/s (and one per target)", n, elapsed)
	}
	if p.total() == 0 {
		t.Error("no probe sent")
	}
}

// TestRunLostAndSkipped: a pinger that never answers makes losses at its
// timeout (ctx deadline with Sent), and probes past the in-flight bound
// are skipped and counted, not queued.
func TestRunLostAndSkipped(t *testing.T) {
	f := writeTargets(t, "- targets: [hole]\n")
	block := make(chan struct{})
	p := &fakePinger{}
	p.reply = func(string, int) (Reply, error) {
		<-block
		return Reply{Size: 64, Sent: true}, context.DeadlineExceeded
	}
	m := New(Config{Rate: 200, MaxRate: 200, Timeout: 50 * time.Millisecond}, p, f)
	// The in-flight bound, 200/s × 50 ms + 16, fills while nothing answers.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m.mu.Lock()
		skipped := m.skipped
		m.mu.Unlock()
		if skipped > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe skipped with every one blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Every slot is taken (a goroutine may hold one a moment before it
	// calls Ping), and no more.
	for p.total() < cap(m.inflight) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.total(); n != cap(m.inflight) {
		t.Errorf("%d probes in flight, want the bound %d", n, cap(m.inflight))
	}
	close(block)
	deadline = time.Now().Add(30 * time.Second)
	for value(t, gather(t, m), "grdma_pingmesh_lost_total", map[string]string{"target": "hole"}) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no losses recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	fams := gather(t, m)
	if v := value(t, fams, "grdma_pingmesh_consecutive_lost", map[string]string{"target": "hole"}); v < 3 {
		t.Errorf("consecutive lost %v", v)
	}
	if v := value(t, fams, "grdma_pingmesh_skipped_total", nil); v < 1 {
		t.Errorf("skipped %v", v)
	}
}

// TestReloadKeepsCounters: a target that stays keeps its counters (and
// gets its new labels), one removed goes, one added starts at zero; a
// malformed file changes nothing and is counted.
func TestReloadKeepsCounters(t *testing.T) {
	f := writeTargets(t, "- targets: [a, b]\n  labels: {tor: t1}\n")
	m := New(Config{}, &fakePinger{}, f)
	m.Reload()
	m.record(m.targets["a:18515"], 64, Reply{Size: 64, Sent: true}, nil)
	old := m.targets["b:18515"]
	replace := func(body string) {
		t.Helper()
		tmp := f.Path + ".new"
		os.WriteFile(tmp, []byte(body), 0o644)
		if err := os.Rename(tmp, f.Path); err != nil {
			t.Fatal(err)
		}
		m.Reload()
	}
	replace("- targets: [a, c]\n  labels: {tor: t2, rail: '1'}\n")
	m.cfg.Skip = func(t Target) bool { return t.Address == "self" }
	replace("- targets: [a, c, self]\n  labels: {tor: t2, rail: '1'}\n")
	m.record(old, 64, Reply{Size: 64, Sent: true}, nil) // an answer in flight for b: ignored
	fams := gather(t, m)
	if v := value(t, fams, "grdma_pingmesh_sent_total", map[string]string{"target": "a", "target_tor": "t2", "target_rail": "1"}); v != 1 {
		t.Errorf("a after the reload: sent %v, want its 1 with the new labels", v)
	}
	if s := series(fams["grdma_pingmesh_consecutive_lost"], map[string]string{"target": "b"}); len(s) != 0 {
		t.Errorf("b removed but exported: %v", s)
	}
	if v := value(t, fams, "grdma_pingmesh_consecutive_lost", map[string]string{"target": "c"}); v != 0 {
		t.Errorf("c: %v", v)
	}
	if s := series(fams["grdma_pingmesh_consecutive_lost"], map[string]string{"target": "self"}); len(s) != 0 {
		t.Errorf("this node itself probed: %v", s)
	}
	replace("- targets: [a, c\n")
	fams = gather(t, m)
	if v := value(t, fams, "grdma_pingmesh_targets", nil); v != 2 {
		t.Errorf("targets after a malformed file: %v, want the last good 2", v)
	}
	if v := value(t, fams, "grdma_pingmesh_targets_file_errors_total", nil); v != 1 {
		t.Errorf("file errors %v", v)
	}
	if v := value(t, fams, "grdma_pingmesh_targets_file_last_reload_successful", nil); v != 0 {
		t.Errorf("last reload successful %v", v)
	}
}

// TestCollectorLint: the exposition passes client_golang's lint (names,
// units, help) as Prometheus' promtool check metrics would.
func TestCollectorLint(t *testing.T) {
	f := writeTargets(t, "- targets: [a]\n  labels: {tor: t1}\n")
	m := New(Config{}, &fakePinger{}, f)
	m.Reload()
	m.record(m.targets["a:18515"], 64, Reply{Size: 64, Sent: true, RTT: time.Millisecond}, nil)
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestConfig(t *testing.T) {
	c := Config{}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]time.Duration{0: time.Second, 10: time.Second, 500: time.Second, 1000: 2 * time.Second} {
		if got := c.Interval(n); got != want {
			t.Errorf("Interval(%d) = %v, want %v", n, got, want)
		}
	}
	for _, bad := range []Config{
		{Rate: -1}, {Rate: 2000}, {MaxRate: 1e9}, {Timeout: time.Hour}, {Sizes: []int{-1}}, {Sizes: []int{1 << 20}},
		{AggregateBy: "1x"}, {AggregateBy: "__meta"}, {Buckets: []float64{2, 1}},
	} {
		b := bad
		if b.Rate == 0 {
			b.Rate = 1
		}
		if err := b.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestKind(t *testing.T) {
	for err, want := range map[error]ErrorKind{
		&net.DNSError{Err: "no such host"}:                                KindResolve,
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}:               KindNoResponder,
		fmt.Errorf("x: %w", syscall.EHOSTUNREACH):                         KindNoResponder,
		context.DeadlineExceeded:                                          KindNoResponder,
		fmt.Errorf("wrapped: %w", kindErr(KindRefused)):                   KindRefused,
		errors.New("something"):                                           KindOther,
		fmt.Errorf("%w and %w", kindErr(KindLocal), syscall.ECONNREFUSED): KindLocal,
	} {
		if got := Kind(err); got != want {
			t.Errorf("Kind(%v) = %s, want %s", err, got, want)
		}
	}
}
