package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/pingmesh"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// bed is a responder (10.30.0.1, on loopback TCP) and the exporter's
// host (10.30.0.2) on one fake fabric.
type bed struct {
	fab            *uverbstest.Fabric
	server, client *uverbstest.Device
	addr           string // the responder's TCP address
	stop           func()
}

func fakeOpts(d *uverbstest.Device) verbsprobe.Options {
	return verbsprobe.Options{Device: d.Name(), Port: 1, GIDIndex: verbsprobe.AutoGID, Open: func() (*uverbs.Context, error) { return d.Open() }}
}

func newBed(t *testing.T, cfg verbsprobe.ResponderConfig) *bed {
	t.Helper()
	fab := uverbstest.NewFabric()
	b := &bed{fab: fab,
		server: fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.1")}),
		client: fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.2")})}
	dev, res := verbsprobe.OpenDevice(context.Background(), fakeOpts(b.server))
	if dev == nil {
		t.Fatalf("OpenDevice: %v", res.Err())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- verbsprobe.Respond(ctx, dev, ln, cfg) }()
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			dev.Close()
		})
	}
	t.Cleanup(b.stop)
	return b
}

// handler is a /probe handler whose probes leave from the bed's client.
func (b *bed) handler(t *testing.T, cfg *Config, o Options) *Handler {
	t.Helper()
	o.Source = func(ctx context.Context, m Module, addr net.IP) (verbsprobe.Options, error) {
		return fakeOpts(b.client), nil
	}
	h, err := NewHandler(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// answer is a parsed /probe answer.
type answer struct {
	code int
	body string
	fams map[string]*dto.MetricFamily
}

func get(t *testing.T, h http.Handler, query string, header ...string) answer {
	t.Helper()
	req := httptest.NewRequest("GET", "/probe?"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	a := answer{code: rec.Code, body: string(body)}
	if rec.Code == http.StatusOK && !strings.Contains(query, "debug=true") {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(a.body))
		if err != nil {
			t.Fatalf("%s: %v\n%s", query, err, body)
		}
		a.fams = fams
	}
	return a
}

func (a answer) value(name string, labels ...string) (float64, bool) {
	mf := a.fams[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
}

func (a answer) reason() string {
	for _, m := range a.fams["probe_failure_info"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				return l.GetValue()
			}
		}
	}
	return ""
}

func noneLeft(t *testing.T, devs ...*uverbstest.Device) {
	t.Helper()
	for _, d := range devs {
		deadline := time.Now().Add(10 * time.Second)
		for d.Resources() != (uverbstest.Resources{}) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // the responder tears down after its answer
		}
		if res := d.Resources(); res != (uverbstest.Resources{}) {
			t.Errorf("%s: left behind: %+v", d.Name(), res)
		}
	}
}

// TestProbeModules: rc_lat, rc_bw and rc_connect against a responder
// succeed and export their results.
func TestProbeModules(t *testing.T) {
	b := newBed(t, verbsprobe.ResponderConfig{})
	h := b.handler(t, nil, Options{})
	lat := get(t, h, "module=rc_lat&target="+b.addr+"&iters=50", "X-Prometheus-Scrape-Timeout-Seconds", "10")
	if v, _ := lat.value("probe_success"); v != 1 {
		t.Fatalf("rc_lat failed (%s):\n%s", lat.reason(), lat.body)
	}
	if n, ok := lat.value("probe_rdma_latency_seconds"); !ok || n != 50 {
		t.Errorf("rc_lat: latency summary of %v exchanges, want 50:\n%s", n, lat.body)
	}
	for _, want := range []string{`probe_rdma_info{device="rxe0",gid="::ffff:10.30.0.2",port="1",remote_gid="::ffff:10.30.0.1",test="lat write"} 1`,
		`probe_rdma_step_duration_seconds{step="modify_qp_rtr"}`, `probe_rdma_path_mtu_bytes`, `probe_rdma_messages 50`,
		`probe_rdma_latency_seconds{quantile="0.99"}`, "probe_duration_seconds"} {
		if !strings.Contains(lat.body, want) {
			t.Errorf("rc_lat answer lacks %s:\n%s", want, lat.body)
		}
	}
	bw := get(t, h, "module=rc_bw&target="+b.addr+"&duration=300ms&size=4096")
	if v, _ := bw.value("probe_success"); v != 1 {
		t.Fatalf("rc_bw failed (%s):\n%s", bw.reason(), bw.body)
	}
	if v, ok := bw.value("probe_rdma_bandwidth_bytes_per_second"); !ok || v <= 0 {
		t.Errorf("rc_bw bandwidth %v:\n%s", v, bw.body)
	}
	conn := get(t, h, "module=rc_connect&target="+b.addr)
	if v, _ := conn.value("probe_success"); v != 1 {
		t.Fatalf("rc_connect failed (%s):\n%s", conn.reason(), conn.body)
	}
	if _, ok := conn.value("probe_failure_info"); ok {
		t.Errorf("a success with a failure reason:\n%s", conn.body)
	}
	b.stop()
	noneLeft(t, b.server, b.client)
}

// TestProbeFailures: every bad input and failed probe is an answer with
// probe_success 0 and its reason, never an HTTP error (but a missing
// target, as blackbox_exporter).
func TestProbeFailures(t *testing.T) {
	b := newBed(t, verbsprobe.ResponderConfig{ServeConfig: verbsprobe.ServeConfig{Limits: verbsprobe.Limits{MaxSize: 8192}}})
	h := b.handler(t, nil, Options{})
	// A port nothing listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct{ query, reason, step string }{
		{"module=nosuch&target=" + b.addr, ReasonUnknownModule, ""},
		{"target=" + b.addr, ReasonUnknownModule, ""},
		{"module=rc_lat&target=" + b.addr + "&size=abc", ReasonBadParameter, ""},
		{"module=rc_lat&target=" + b.addr + "&size=1&size=2", ReasonBadParameter, ""},
		{"module=rc_lat&target=" + b.addr + "&colour=red", ReasonBadParameter, ""},
		{"module=rc_lat&target=" + b.addr + "&iters=5&duration=1s", ReasonBadParameter, ""},
		{"module=rc_lat&target=" + b.addr + "&size=99999999", ReasonBadParameter, ""},
		{"module=rc_bw&target=" + b.addr + "&duration=1m", ReasonBadParameter, ""},
		{"module=rc_lat&target=http://x/", ReasonBadTarget, ""},
		{"module=rc_lat&target=host:", ReasonBadTarget, ""},
		{"module=rc_lat&target=no-such-host.invalid", ReasonResolve, ""},
		{"module=rc_lat&target=" + closed, ReasonNoResponder, verbsprobe.StepConnect},
		{"module=rc_lat&target=" + b.addr + "&size=65536", ReasonRefused, verbsprobe.StepConnect},
	} {
		a := get(t, h, c.query, "X-Prometheus-Scrape-Timeout-Seconds", "5")
		if a.code != http.StatusOK {
			t.Errorf("%s: HTTP %d, want 200 with probe_success 0", c.query, a.code)
			continue
		}
		success, _ := a.value("probe_success")
		step := ""
		for _, m := range a.fams["probe_failure_info"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "step" {
					step = l.GetValue()
				}
			}
		}
		if success != 0 || a.reason() != c.reason || step != c.step {
			t.Errorf("%s: success %v, reason %q step %q; want 0, %q %q\n%s", c.query, success, a.reason(), step, c.reason, c.step, a.body)
		}
	}
	if a := get(t, h, "module=rc_lat"); a.code != http.StatusBadRequest {
		t.Errorf("no target: HTTP %d, want 400", a.code)
	}
	reg := prometheusText(t, h)
	for _, want := range []string{"grdma_probe_module_unknown_total 2", `grdma_probes_total{module="rc_lat",result="failure"}`} {
		if !strings.Contains(reg, want) {
			t.Errorf("handler metrics lack %s:\n%s", want, reg)
		}
	}
	b.stop()
	noneLeft(t, b.server, b.client)
}

func prometheusText(t *testing.T, h *Handler) string {
	t.Helper()
	var sb strings.Builder
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&sb, mf)
	}
	return sb.String()
}

// TestProbeAuth: a responder with a shared secret refuses a module
// without it (responder_refused) and serves one with it.
func TestProbeAuth(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "probe.key")
	os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	key, err := verbsprobe.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b := newBed(t, verbsprobe.ResponderConfig{ServeConfig: verbsprobe.ServeConfig{Key: key}})
	cfg, err := ParseConfig("modules.yml", []byte("modules:\n  rc_auth:\n    prober: rc\n    rc: {test: connect, key_file: "+keyFile+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := b.handler(t, cfg, Options{})
	if a := get(t, h, "module=rc_connect&target="+b.addr); a.reason() != ReasonRefused {
		t.Errorf("without the key: reason %q, want %s\n%s", a.reason(), ReasonRefused, a.body)
	}
	if a := get(t, h, "module=rc_auth&target="+b.addr); a.reason() != "" {
		t.Errorf("with the key: reason %q\n%s", a.reason(), a.body)
	}
	if strings.Contains(get(t, h, "module=rc_auth&target="+b.addr+"&debug=true").body, "0123456789abcdef") {
		t.Error("the debug output shows the key")
	}
}

// TestProbeLimits plays a client that asks for many probes at once:
// bandwidth tests run one at a time (the others wait, then fail as
// probe_busy when no slot frees in their time) and at most MaxConcurrent
// probes run; nothing fails the scrape.
func TestProbeLimits(t *testing.T) {
	b := newBed(t, verbsprobe.ResponderConfig{})
	h := b.handler(t, nil, Options{MaxConcurrent: 2})
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]int{}
	for range 3 {
		wg.Go(func() {
			// 3 s of time for a 2 s test and a second's margin: no time
			// to wait for the bandwidth slot, which the first one takes.
			a := get(t, h, "module=rc_bw&target="+b.addr+"&duration=2s&size=4096", "X-Prometheus-Scrape-Timeout-Seconds", "3.5")
			mu.Lock()
			results[a.reason()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if results[""] != 1 || results[ReasonProbeBusy] != 2 {
		t.Errorf("3 bandwidth tests at once: %v, want 1 success and 2 probe_busy", results)
	}
	// Five latency probes on two slots: all succeed, in turn.
	clear(results)
	for range 5 {
		wg.Go(func() {
			a := get(t, h, "module=rc_lat&target="+b.addr+"&iters=20", "X-Prometheus-Scrape-Timeout-Seconds", "20")
			mu.Lock()
			results[a.reason()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if results[""] != 5 {
		t.Errorf("5 latency probes on 2 slots: %v, want 5 successes", results)
	}
	b.stop()
	noneLeft(t, b.server, b.client)
}

func TestTimeout(t *testing.T) {
	for _, c := range []struct {
		header string
		module time.Duration
		want   time.Duration
		err    bool
	}{
		{"", 10 * time.Second, 10 * time.Second, false},
		{"10", 10 * time.Second, 9500 * time.Millisecond, false},
		{"2", 10 * time.Second, 1500 * time.Millisecond, false},
		{"30", 5 * time.Second, 5 * time.Second, false},
		{"1000", time.Hour, MaxTimeout, false},
		{"0.4", 10 * time.Second, 0, true},
		{"abc", time.Second, 0, true},
		{"-1", time.Second, 0, true},
		{"NaN", time.Second, 0, true},
	} {
		got, err := Timeout(c.header, c.module, DefaultTimeoutOffset)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("Timeout(%q, %v) = %v, %v; want %v (error %v)", c.header, c.module, got, err, c.want, c.err)
		}
	}
}

func TestConfig(t *testing.T) {
	cfg, err := ParseConfig("m.yml", []byte(`
modules:
  rc_lat_4k:
    prober: rc
    timeout: 5s
    source: {device: mlx5_0, port: 1, gid_index: 3}
    rc: {test: lat, op: send, size: 4096, iters: 2000, target_port: 18600}
  rc_bw:
    prober: rc
    rc: {test: bw, op: read, duration: 3s}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modules["rc_lat_4k"]
	if m.timeout() != 5*time.Second || *m.Source.GIDIndex != 3 || m.RC.test(nil).Size != 4096 || m.RC.TargetPort != 18600 {
		t.Errorf("rc_lat_4k: %+v", m)
	}
	if cfg.Modules["rc_bw"].RC.Op != verbsprobe.OpRead || cfg.Modules["rc_lat"].RC.Test != verbsprobe.TestLatency {
		t.Errorf("a file's module replaces the built-in one of its name, the others stay: %+v", cfg.Modules)
	}
	for _, c := range []struct{ yml, want string }{
		{"modules:\n  x:\n    prober: icmp\n", `unknown prober "icmp"`},
		{"modules:\n  x:\n    rc: {test: lat}\n", "no prober"},
		{"modules:\n  x:\n    prober: rc\n    rc: {tset: lat}\n", "tset"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: lat, op: jump}\n", "unknown operation"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: pingpong}\n", "ibv_rc_pingpong"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: lat, size: 999999999}\n", "size"},
		{"modules:\n  x:\n    prober: rc\n    timeout: 1h\n    rc: {test: lat}\n", "timeout"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: lat, key_file: /nonexistent}\n", "nonexistent"},
		{"modules:\n  x:\n    prober: ud_ping\n    ud_ping: {count: 1000000}\n", "count"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: connect, target_port: 70000}\n", "not a port"},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: connect, via: udp}\n", `via "udp": tcp or cm`},
		{"modules:\n  x:\n    prober: rc\n    rc: {test: connect, via: cm, key_file: /etc/k}\n", "no key_file"},
	} {
		if _, err := ParseConfig("m.yml", []byte(c.yml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.yml, err, c.want)
		}
	}
	if m := DefaultConfig().Modules["cm_connect"]; m.Prober != ProberRC || m.RC.Test != verbsprobe.TestConnect || m.RC.via() != ViaCM {
		t.Errorf("cm_connect: %+v", m)
	}
	if cfg.Modules["rc_bw"].RC.via() != ViaTCP {
		t.Errorf("an rc module without via: %q, want tcp", cfg.Modules["rc_bw"].RC.via())
	}
	// ud_ping without a UD prober: the built-in module is left out, a
	// file's is refused.
	h, err := NewHandler(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.Modules()); got != "[cm_connect rc_bw rc_connect rc_lat]" {
		t.Errorf("modules without a pinger: %s", got)
	}
	cfg, _ = ParseConfig("m.yml", []byte("modules:\n  ud_fast:\n    prober: ud_ping\n"))
	if _, err := NewHandler(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "UD prober") {
		t.Errorf("ud_ping module without a pinger: %v", err)
	}
}

// fakePinger answers UD pings: targets in lost are black holes, in down
// have no responder.
type fakePinger struct {
	lost, down map[string]bool
	mu         sync.Mutex
	sizes      []int
}

func (p *fakePinger) Ping(ctx context.Context, target string, size int) (udping.Result, error) {
	p.mu.Lock()
	p.sizes = append(p.sizes, size)
	p.mu.Unlock()
	switch {
	case p.down[target]:
		err := fmt.Errorf("asking %s: %w", target, &pingmesh.DialError{Kind: pingmesh.KindNoResponder, Err: syscall.ECONNREFUSED})
		return udping.Result{Target: target, Outcome: udping.OutcomeResolve, Err: err}, err
	case p.lost[target]:
		return udping.Result{Target: target, Size: 64, Outcome: udping.OutcomeTimeout}, errors.New("no reply within the timeout")
	}
	if size == 0 {
		size = 1024
	}
	return udping.Result{Target: target, Size: size, Outcome: udping.OutcomeReply, RTT: time.Duration(size+2) * time.Microsecond,
		Delay: 2 * time.Microsecond, DelayKnown: true}, nil
}

// TestProbeUDPing: the ud_ping module through a pinger: answers, a black
// hole, a target without responder.
func TestProbeUDPing(t *testing.T) {
	p := &fakePinger{lost: map[string]bool{"10.0.0.9:18515": true}, down: map[string]bool{"10.0.0.8:18515": true}}
	cfg, err := ParseConfig("m.yml", []byte("modules:\n  ud4:\n    prober: ud_ping\n    ud_ping: {count: 4, interval: 10ms, sizes: [64, 0]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cfg, Options{Pinger: p})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, h, "module=ud4&target=10.0.0.7")
	if v, _ := a.value("probe_success"); v != 1 {
		t.Fatalf("ud4: %s", a.body)
	}
	if n, _ := a.value("probe_ud_ping_rtt_seconds"); n != 4 {
		t.Errorf("4 answers, summary of %v:\n%s", n, a.body)
	}
	if !strings.Contains(a.body, `probe_ud_ping_rtt_seconds{quantile="1"} 0.001024`) || !strings.Contains(a.body, "probe_ud_ping_lost 0") {
		t.Errorf("ud4 answer:\n%s", a.body)
	}
	if fmt.Sprint(p.sizes) != "[64 0 64 0]" {
		t.Errorf("sizes %v", p.sizes)
	}
	if a := get(t, h, "module=ud4&target=10.0.0.9", "X-Prometheus-Scrape-Timeout-Seconds", "20"); a.reason() != ReasonLost || !strings.Contains(a.body, "probe_ud_ping_lost 4") {
		t.Errorf("black hole: %s\n%s", a.reason(), a.body)
	}
	if a := get(t, h, "module=ud4&target=10.0.0.8"); a.reason() != ReasonNoResponder {
		t.Errorf("no responder: %s\n%s", a.reason(), a.body)
	}
	if a := get(t, h, "module=ud_ping&target=10.0.0.7&size=100"); a.reason() != ReasonBadParameter {
		t.Errorf("ud_ping with an rc parameter: %s", a.reason())
	}
}

func TestSplitTarget(t *testing.T) {
	for in, want := range map[string]string{
		"node1": "node1 18515", "node1:18600": "node1 18600", "10.0.0.1": "10.0.0.1 18515",
		"fd00::1": "fd00::1 18515", "[fd00::1]": "fd00::1 18515", "[fd00::1]:9": "fd00::1 9",
	} {
		h, p, err := splitTarget(in, 18515)
		if got := fmt.Sprintf("%s %d", h, p); err != nil || got != want {
			t.Errorf("%q: %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"a:", ":80", "a:0", "a:x", "a/b", "user@host", "fd00::zz", strings.Repeat("a", 256)} {
		if _, _, err := splitTarget(bad, 18515); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestProbeUDPingOnFake: ud_ping through the pingmesh's real UD prober on
// the fake kernel, against a responder with UD ping over loopback TCP,
// and against a port where nothing listens.
func TestProbeUDPingOnFake(t *testing.T) {
	b := newBed(t, verbsprobe.ResponderConfig{UDPing: &udping.ResponderConfig{}})
	targets := filepath.Join(t.TempDir(), "mesh.yml")
	os.WriteFile(targets, []byte("[]\n"), 0o644)
	pm, err := pingmesh.Start(context.Background(), pingmesh.Config{}, pingmesh.StartOptions{Device: fakeOpts(b.client), File: &pingmesh.TargetsFile{Path: targets}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		pm.Close()
	}()
	// The built-in ud_ping's ten pings with a timeout a loaded machine
	// (-race, arm64 under emulation) cannot run out of: the count is
	// what this test checks, not the time.
	cfg, err := ParseConfig("m.yml", []byte("modules:\n  ud_slow:\n    prober: ud_ping\n    timeout: 2m\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cfg, Options{Pinger: pm.Prober})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, h, "module=ud_slow&target="+b.addr, "X-Prometheus-Scrape-Timeout-Seconds", "150")
	if v, _ := a.value("probe_success"); v != 1 {
		t.Fatalf("ud_ping failed (%s):\n%s", a.reason(), a.body)
	}
	if v, _ := a.value("probe_ud_ping_sent"); v != DefaultUDPingCount {
		t.Errorf("sent %v, want %d:\n%s", v, DefaultUDPingCount, a.body)
	}
	// Each ping sent is answered or lost (on a loaded machine a reply may
	// come after its ping's own timeout).
	answered, _ := a.value("probe_ud_ping_rtt_seconds")
	lost, _ := a.value("probe_ud_ping_lost")
	if answered < 1 || answered+lost != DefaultUDPingCount {
		t.Errorf("%v answers and %v lost of %d:\n%s", answered, lost, DefaultUDPingCount, a.body)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := ln.Addr().String()
	ln.Close()
	if a := get(t, h, "module=ud_slow&target="+nobody); a.reason() != ReasonNoResponder {
		t.Errorf("no responder: %s\n%s", a.reason(), a.body)
	}
}

// TestProbeHostileTargets plays targets that are not responders: one
// that answers garbage, one that accepts and says nothing, one that
// sends an endless line. Each probe fails with a reason within its time,
// nothing is left on the device, and the exporter holds no connection.
func TestProbeHostileTargets(t *testing.T) {
	b := newBed(t, verbsprobe.ResponderConfig{})
	h := b.handler(t, nil, Options{})
	serve := func(talk func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); talk(c) }()
			}
		}()
		return ln.Addr().String()
	}
	garbage := serve(func(c net.Conn) { c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n{\"type\":\"welcome\"}\n\x00\xff")) })
	silent := serve(func(c net.Conn) { time.Sleep(5 * time.Second) })
	endless := serve(func(c net.Conn) {
		buf := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 1000; i++ {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	for name, addr := range map[string]string{"garbage": garbage, "silent": silent, "endless": endless} {
		start := time.Now()
		a := get(t, h, "module=rc_connect&target="+addr, "X-Prometheus-Scrape-Timeout-Seconds", "2.5")
		if v, _ := a.value("probe_success"); v != 0 || a.reason() == "" {
			t.Errorf("%s: %s\n%s", name, a.reason(), a.body)
		}
		if d := time.Since(start); d > 30*time.Second { // a hang, not a slow machine
			t.Errorf("%s: the probe took %v with 2 s of time", name, d)
		}
		t.Logf("%s: %s", name, a.reason())
	}
	b.stop()
	noneLeft(t, b.server, b.client)
}

// TestClassifyCM: the RDMA CM's events that end a probe over the CM, as
// verbsprobe's CM client wraps them, and their reasons.
func TestClassifyCM(t *testing.T) {
	ctx := context.Background()
	step := func(name string, err error) *verbsprobe.Result {
		return &verbsprobe.Result{Steps: []verbsprobe.Step{{Name: name, Err: &verbsprobe.StepError{Step: name, Err: err}}}}
	}
	wrap := func(e *rdmacm.Error) error {
		return &verbsprobe.PeerError{Host: "10.0.0.2:18515", Doing: "connecting over RDMA CM to", Err: e}
	}
	for _, c := range []struct {
		name   string
		res    *verbsprobe.Result
		reason string
	}{
		{"nothing listens", step(verbsprobe.StepConnect, wrap(&rdmacm.Error{Step: "connect", Event: rdmacm.EventRejected, Status: 8})), ReasonNoResponder},
		{"refused", step(verbsprobe.StepConnect, &verbsprobe.PeerError{Host: "h", Doing: "connecting over RDMA CM to",
			Err: fmt.Errorf("refused: over its limits (%w)", &rdmacm.Error{Step: "connect", Event: rdmacm.EventRejected, Status: 28})}), ReasonRefused},
		{"no route", step("resolve", wrap(&rdmacm.Error{Step: "resolve route", Event: rdmacm.EventRouteError, Status: -113})), ReasonNoDevice},
		{"no RDMA device", step("resolve", wrap(&rdmacm.Error{Step: "resolve address", Event: rdmacm.EventAddrError, Status: -19})), ReasonNoDevice},
		{"never answered", step(verbsprobe.StepConnect, wrap(&rdmacm.Error{Step: "connect", Event: rdmacm.EventUnreachable, Status: -110})), ReasonTimeout},
		{"out of time", step(verbsprobe.StepConnect, wrap(&rdmacm.Error{Step: "connect", Err: context.DeadlineExceeded})), ReasonTimeout},
	} {
		f := classify(ctx, c.res, true)
		if f == nil || f.Reason != c.reason {
			t.Errorf("%s: %+v, want %s", c.name, f, c.reason)
		}
	}
}
