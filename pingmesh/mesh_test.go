package pingmesh

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// fakeProber records what the collector asks; tests send its results.
type fakeProber struct {
	mu      sync.Mutex
	added   map[string]udping.TargetConfig
	removed []string
	results chan udping.Result
	stats   udping.ProberStats
}

func newFakeProber() *fakeProber {
	return &fakeProber{added: map[string]udping.TargetConfig{}, results: make(chan udping.Result)}
}

func (p *fakeProber) Add(target string, cfg udping.TargetConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if target == "full" {
		return errors.New("udping: 1 targets, the prober's limit")
	}
	p.added[target] = cfg
	return nil
}

func (p *fakeProber) Remove(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.added, target)
	p.removed = append(p.removed, target)
}

func (p *fakeProber) Results() <-chan udping.Result { return p.results }

func (p *fakeProber) Stats() udping.ProberStats { return p.stats }

func (p *fakeProber) targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.added))
}

// kindErr is an error that says its kind.
type kindErr ErrorKind

func (k kindErr) Error() string            { return "fake " + string(k) }
func (k kindErr) PingErrorKind() ErrorKind { return ErrorKind(k) }

func reply(target string, size int, rtt time.Duration) udping.Result {
	return udping.Result{Target: target, Size: size, Outcome: udping.OutcomeReply, RTT: rtt + 3*time.Microsecond,
		Delay: 3 * time.Microsecond, DelayKnown: true, Timestamps: udping.Software}
}

func lost(target string, size int, o udping.Outcome) udping.Result {
	return udping.Result{Target: target, Size: size, Outcome: o, Err: errors.New("no reply within the timeout")}
}

func unresolved(target string, err error) udping.Result {
	return udping.Result{Target: target, Outcome: udping.OutcomeResolve, Err: fmt.Errorf("asking %s for its UD ping address: %w", target, err)}
}

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
	p := newFakeProber()
	p.stats = udping.ProberStats{Sent: 7, Throttled: 2}
	m := New(Config{Now: func() time.Time { return now }}, p, f)
	m.Reload()
	m.record(reply("good", 64, 20*time.Microsecond))
	m.record(reply("good", 1024, 30*time.Microsecond))
	m.record(reply("lossy", 64, 20*time.Microsecond))
	m.record(lost("lossy", 1024, udping.OutcomeTimeout))
	m.record(lost("lossy", 1024, udping.OutcomeEchoLost))
	m.record(unresolved("down:18600", &DialError{KindNoResponder, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}))
	m.record(unresolved("nxdomain", &net.DNSError{Err: "no such host", Name: "nxdomain", IsNotFound: true}))
	m.record(unresolved("busy", &verbsprobe.RemoteFailure{Step: "accept", Message: "refused: peers"}))
	m.record(udping.Result{Target: "broken", Size: 4096, Outcome: udping.OutcomeTooLarge, Err: errors.New("a probe of 4096 bytes over the path MTU of 1024")})
	m.record(reply("gone", 64, time.Millisecond)) // not in the file
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
		{"grdma_pingmesh_echo_lost_total", lbl("lossy"), 1},
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
		{"grdma_pingmesh_consecutive_lost", lbl("other", "target_rail", "3", "target_rack", ""), 0},
		{"grdma_pingmesh_targets", nil, 7},
		{"grdma_pingmesh_probe_interval_seconds", nil, 1},
		{"grdma_pingmesh_results_ignored_total", nil, 1},
		{"grdma_pingmesh_prober_events_total", map[string]string{"event": "throttled"}, 2},
		{"grdma_pingmesh_targets_file_errors_total", nil, 0},
		{"grdma_pingmesh_targets_file_last_reload_successful", nil, 1},
		{"grdma_pingmesh_timestamps_info", map[string]string{"source": "software"}, 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"grdma_pingmesh_responder_up", "grdma_pingmesh_sent_total"} {
		if s := series(fams[name], lbl("other")); len(s) != 0 {
			t.Errorf("%s of a target with no result yet: %v, want none", name, s)
		}
	}
	// The network RTT (20 µs: the 3 µs delay taken out) and 30 µs fall
	// in (16, 32] µs.
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
	m.record(reply("lossy", 64, time.Millisecond))
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
	m := New(cfg, newFakeProber(), f)
	m.Reload()
	for a := range m.targets {
		m.record(reply(a, 64, 100*time.Microsecond))
		if a == "h1" {
			m.record(unresolved(a, errors.New("what")))
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

// TestRun: Run gives the file's targets to the prober with the rate and
// sizes, records its results, follows the file's changes (and skips this
// node), and returns when the results channel closes.
func TestRun(t *testing.T) {
	f := writeTargets(t, "- targets: [a, b, self]\n")
	p := newFakeProber()
	m := New(Config{Rate: 5, Sizes: []int{64, 256}, ReloadInterval: 20 * time.Millisecond,
		Skip: func(tg Target) bool { return tg.Address == "self" }}, p, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	p.results <- reply("a", 64, time.Millisecond) // taken once Run reads the file
	if got := fmt.Sprint(p.targets()); got != "[a b]" {
		t.Errorf("targets given to the prober: %s", got)
	}
	if c := p.added["a"]; c.Rate != 5 || fmt.Sprint(c.Sizes) != "[64 256]" {
		t.Errorf("target config %+v", c)
	}
	os.WriteFile(f.Path+".new", []byte("- targets: [b, c]\n"), 0o644)
	os.Rename(f.Path+".new", f.Path)
	deadline := time.Now().Add(30 * time.Second)
	for fmt.Sprint(p.targets()) != "[b c]" {
		if time.Now().After(deadline) {
			t.Fatalf("after the file changed: %v", p.targets())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fmt.Sprint(p.removed) != "[a]" {
		t.Errorf("removed %v", p.removed)
	}
	p.results <- reply("c", 64, time.Millisecond)
	close(p.results)
	<-done
	fams := gather(t, m)
	if v := value(t, fams, "grdma_pingmesh_sent_total", map[string]string{"target": "c"}); v != 1 {
		t.Errorf("c sent %v", v)
	}
}

// TestReloadKeepsCounters: a target that stays keeps its counters (and
// gets its new labels), one removed goes, one added starts at zero; a
// malformed file changes nothing and is counted.
func TestReloadKeepsCounters(t *testing.T) {
	f := writeTargets(t, "- targets: [a, b]\n  labels: {tor: t1}\n")
	p := newFakeProber()
	m := New(Config{}, p, f)
	m.Reload()
	m.record(reply("a", 64, time.Millisecond))
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
	m.record(reply("b", 64, time.Millisecond)) // an answer in flight for b: ignored
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
	if got := fmt.Sprint(p.targets()); got != "[a c]" {
		t.Errorf("the prober's targets: %s", got)
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
	m := New(Config{}, newFakeProber(), f)
	m.Reload()
	m.record(reply("a", 64, time.Millisecond))
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
		{Rate: -1}, {Rate: 2000}, {MaxRate: 1e9}, {Timeout: time.Hour}, {Sizes: []int{8}}, {Sizes: []int{1 << 20}},
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
		&net.DNSError{Err: "no such host"}:                                              KindResolve,
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}:                             KindNoResponder,
		fmt.Errorf("x: %w", syscall.EHOSTUNREACH):                                       KindNoResponder,
		context.DeadlineExceeded:                                                        KindNoResponder,
		fmt.Errorf("wrapped: %w", kindErr(KindRefused)):                                 KindRefused,
		&verbsprobe.RemoteFailure{Step: "accept", Message: "x"}:                         KindRefused,
		errors.New("the responder asks for its shared secret"):                          KindRefused,
		errors.New("something"):                                                         KindOther,
		fmt.Errorf("asking x: %w", &DialError{KindResolve, errors.New("no such host")}): KindResolve,
	} {
		if got := Kind(err); got != want {
			t.Errorf("Kind(%v) = %s, want %s", err, got, want)
		}
	}
}

// TestDial: a refused connection is a DialError that verbsprobe does not
// retry (it does not unwrap to ECONNREFUSED); a name that does not
// resolve is KindResolve.
func TestDial(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err := Dial(nil)(context.Background(), "tcp", addr)
	if Kind(err) != KindNoResponder || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused: %v (kind %s)", err, Kind(err))
	}
	_, err = Dial(nil)(context.Background(), "tcp", "no-such-host.invalid:1")
	if Kind(err) != KindResolve {
		t.Errorf("unresolvable: %v (kind %s)", err, Kind(err))
	}
}
