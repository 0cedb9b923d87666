package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/bcrypt"
)

// recorded returns a collector over the recorded 6.12 kernel (after RC
// traffic over rxe0) and the sysfs capture of the same guest.
func recorded(t *testing.T, opts Options) *Collector {
	t.Helper()
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	k.On(nlfixture.ResSummaryDump.Req, filepath.Join("..", "..", "..", "res", "6.12", "nl", nlfixture.ResSummaryDump.Name+".bin"))
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	opts.Sysfs = fsys
	opts.Dial = func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil }
	return New(opts)
}

// TestLint: every family passes client_golang's metric lint (units,
// _total on counters, no camelCase), and a pedantic registry finds every
// collected metric described.
func TestLint(t *testing.T) {
	col := recorded(t, Options{Checks: true})
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// The name `grdma stat export` has written since before the
		// exporter: "hardware counter" is what rdma calls these.
		if p.Metric == "grdma_port_hw_counter_total" && p.Text == "metric name should not include type 'counter'" {
			continue
		}
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// TestEveryFamilyCollected: the recorded rxe node fills every family but
// the PMA byte counters (rxe has no PMA counters) and the per-error one.
func TestEveryFamilyCollected(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(recorded(t, Options{Checks: true}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for _, f := range Families {
		if slices.Contains(pcieFamilies, f) {
			continue // TestPCIe
		}
		switch f.Name {
		case "grdma_port_data_received_bytes_total", "grdma_port_data_transmitted_bytes_total", "grdma_export_read_error":
			if got[f.Name] != 0 {
				t.Errorf("%s: %d series on a node without PMA counters and errors", f.Name, got[f.Name])
			}
		default:
			if got[f.Name] == 0 {
				t.Errorf("%s: not collected", f.Name)
			}
		}
	}
}

// TestCollectNeverFails: a netlink socket that cannot be opened is a read
// error, counted across collections; the scrape itself succeeds.
func TestCollectNeverFails(t *testing.T) {
	fsys, _ := sysfs.NewFS(t.TempDir())
	now := time.Unix(1700000000, 0)
	col := New(Options{Sysfs: fsys, Dial: func() (*nldev.Client, error) { return nil, errors.New("no netlink here") },
		Now: func() time.Time { now = now.Add(DefaultReuseFor); return now }}) // each scrape reads anew
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	for range 2 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP grdma_exporter_read_errors_total ` + famScrapeErrors.Help + `
# TYPE grdma_exporter_read_errors_total counter
grdma_exporter_read_errors_total{what="counters"} 0
grdma_exporter_read_errors_total{what="device"} 0
grdma_exporter_read_errors_total{what="devices"} 3
grdma_exporter_read_errors_total{what="gids"} 0
grdma_exporter_read_errors_total{what="pcie"} 0
grdma_exporter_read_errors_total{what="pma"} 0
grdma_exporter_read_errors_total{what="ports"} 0
grdma_exporter_read_errors_total{what="resources"} 0
# HELP grdma_export_read_error 1 for each part of a device or port this export could not read.
# TYPE grdma_export_read_error gauge
grdma_export_read_error{device="",port="0",what="devices"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "grdma_exporter_read_errors_total", "grdma_export_read_error"); err != nil {
		t.Error(err)
	}
	if errs := col.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no netlink here") {
		t.Errorf("Errors() = %v", errs)
	}
}

// TestChecksCached: the checks run at the first scrape and again only
// once CheckInterval has passed; scrapes in between export the cached
// results with the time they ran.
func TestChecksCached(t *testing.T) {
	now := time.Unix(1700000000, 0)
	col := recorded(t, Options{Checks: true, CheckInterval: time.Minute, Now: func() time.Time { return now }})
	ranAt := func() float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(col)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "grdma_check_last_run_timestamp_seconds" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no grdma_check_last_run_timestamp_seconds")
		return 0
	}
	first := ranAt()
	now = now.Add(59 * time.Second)
	if got := ranAt(); got != first {
		t.Errorf("checks ran again after 59 s: %v, first %v", got, first)
	}
	now = now.Add(time.Second)
	if got := ranAt(); got != first+60 {
		t.Errorf("checks not run again after 60 s: %v, first %v", got, first)
	}
}

// TestWriteTextfileFailureKeepsOldFile: a gatherer that fails leaves the
// old file and nothing beside it.
func TestWriteTextfileFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdma.prom")
	os.WriteFile(path, []byte("old\n"), 0o644)
	err := WriteTextfile(path, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("boom") }))
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("old file changed: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftovers: %v", entries)
	}
}

func gaugeGatherer(v float64) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_value", Help: "A value."})
	g.Set(v)
	reg.MustRegister(g)
	return reg
}

// TestREADMEMetricsTable: the README's metrics table is the one Families
// generates (regenerate: go test ./exporter -run README -update).
func TestREADMEMetricsTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, stale, err := ReplaceTable(string(b), "metrics table", Families)
	switch {
	case err != nil:
		t.Fatalf("README.md: %v", err)
	case stale && os.Getenv("UPDATE_README") != "":
		os.WriteFile("../README.md", []byte(readme), 0o644)
	case stale:
		t.Errorf("README.md's metrics table is stale: UPDATE_README=1 go test ./... -run README")
	}
}

// TestAlertRules: deploy/'s alerting rules pass promtool check rules
// (Debian's prometheus package; make e2e installs it) and use only
// metrics this package exports.
func TestAlertRules(t *testing.T) {
	const rules = "../deploy/prometheus/grdma-alerts.yml"
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range Families {
		names[f.Name] = true
	}
	used := regexp.MustCompile(`\bgrdma_[a-z0-9_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("the rules use no grdma metric")
	}
	for _, n := range used {
		if !names[n] {
			t.Errorf("%s uses %s, which no collector exports", rules, n)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian package prometheus): rules not checked by it")
	}
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The rules' own unit tests: each alert fires on the series it is for
	// (and RDMAPortDown not before its 2 minutes).
	test := exec.Command(promtool, "test", "rules", "grdma-alerts_test.yml")
	test.Dir = filepath.Dir(rules)
	if tout, err := test.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, tout)
	} else {
		out = append(out, tout...)
	}
	t.Logf("%s", out)
}

// TestServe: the server answers on the telemetry path and the landing
// page, enforces basic auth from the web configuration file, serves 20
// scrapes at once, and returns nil when its context ends.
func TestServe(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("basic_auth_users:\n  prom: %s\n", hash)), 0o600)
	addr, cancel, served := startServer(t, cfg)
	base := "http://" + addr
	get := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth {
			req.SetBasicAuth("prom", "secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/metrics", false); code != http.StatusUnauthorized {
		t.Errorf("without credentials: HTTP %d, want 401", code)
	}
	if code, body := get("/", true); code != 200 || !strings.Contains(body, "/metrics") {
		t.Errorf("landing page: HTTP %d:\n%s", code, body)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var codes []int
	for range 20 {
		wg.Go(func() {
			code, body := get("/metrics", true)
			if !strings.Contains(body, `grdma_port_active{device="rxe0",port="1"} 1`) || !strings.Contains(body, "process_resident_memory_bytes") {
				code = -code
			}
			mu.Lock()
			codes = append(codes, code)
			mu.Unlock()
		})
	}
	wg.Wait()
	if slices.ContainsFunc(codes, func(c int) bool { return c != 200 }) {
		t.Errorf("20 parallel scrapes answered %v (negative: body incomplete)", codes)
	}
	stopServer(t, cancel, served, 10*time.Second)
}

// startServer serves the recorded metrics on a free loopback port with web
// configuration file cfg ("" for none): its address, what ends it, and
// what Serve returned.
func startServer(t *testing.T, cfg string) (addr string, stop func(), served <-chan error) {
	t.Helper()
	addrs, stop, served, err := serveRecorded(t, ServerOptions{ListenAddresses: []string{"127.0.0.1:0"}, ConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0].String(), stop, served
}

// stopServer ends a server and checks that Serve returns nil within d.
func stopServer(t *testing.T, stop func(), served <-chan error, d time.Duration) {
	t.Helper()
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(d):
		t.Fatal("Serve did not return after its context ended")
	}
}

// serveRecorded serves the recorded metrics with o (Listening set here):
// the addresses listened on, what ends it, and what Serve returned; or why
// it could not listen.
func serveRecorded(t *testing.T, o ServerOptions) (addrs []net.Addr, stop func(), served <-chan error, err error) {
	t.Helper()
	reg, err := NewRegistry(recorded(t, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(reg, "/metrics", "test", DefaultMaxRequests)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	listening := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	o.Listening = func(a []net.Addr) { listening <- a }
	go func() { done <- Serve(ctx, h, o) }()
	select {
	case a := <-listening:
		return a, cancel, done, nil
	case err := <-done:
		return nil, nil, nil, err
	}
}

// TestServeShutdownWithSilentConnection: a connection that never sent a
// request (a client that dialled ahead, a port scan) has no scrape in
// flight; it used to hold the shutdown until its grace period ran out, and
// Serve then failed with "context deadline exceeded" (grdma exporter exited
// 1 on SIGTERM).
func TestServeShutdownWithSilentConnection(t *testing.T) {
	addr, cancel, served := startServer(t, "")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(50 * time.Millisecond) // let the server accept it
	stopServer(t, cancel, served, 30*time.Second)
}

// TestCheckServerOptions: a bad telemetry path or web configuration file
// is refused before listening, naming the problem.
func TestCheckServerOptions(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n"), 0o600)
	for _, c := range []struct {
		o   ServerOptions
		msg string
	}{
		{ServerOptions{TelemetryPath: "metrics"}, `telemetry path "metrics" must start with /`},
		{ServerOptions{ConfigFile: "/nonexistent/web.yml"}, "web config file /nonexistent/web.yml"},
		{ServerOptions{ConfigFile: bad}, "nonexistent.crt"},
	} {
		if err := CheckServerOptions(c.o); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.msg)
		}
	}
}

// BenchmarkCollect: one collection of the recorded two-device rxe node
// (netlink from recordings, sysfs from a capture), as a scrape makes it.
func BenchmarkCollect(b *testing.B) {
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	k.On(nlfixture.ResSummaryDump.Req, filepath.Join("..", "..", "..", "res", "6.12", "nl", nlfixture.ResSummaryDump.Name+".bin"))
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(Options{Sysfs: fsys, Dial: func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil }}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEmitInvalidUTF8: a label value that is not UTF-8 (a netdev name may
// be any bytes) is exported with U+FFFD, not a panic that would end the
// exporter.
func TestEmitInvalidUTF8(t *testing.T) {
	ch := make(chan prometheus.Metric, 1)
	e := &emitter{ch: ch, seen: map[string]bool{}}
	e.emit(famPortInfo, 1, "rxe0", "1", "Ethernet", "eth\xff0")
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == "netdev" && l.GetValue() != "eth\uFFFD0" {
			t.Errorf("netdev label %q", l.GetValue())
		}
	}
}
