//go:build e2eguest

package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/exporter"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Where the exporter, node_exporter and Prometheus listen in the guest:
// loopback only (the guest has no other network anyway).
const (
	exporterAddr     = "127.0.0.1:10041" // grdma's default port
	nodeExporterAddr = "127.0.0.1:9100"
	prometheusAddr   = "127.0.0.1:9090"
)

// daemon is a background process of a test, killed when the test ends.
type daemon struct {
	cmd    *exec.Cmd
	log    string // its standard output and error
	exited chan struct{}
	code   int
}

// output is what the daemon printed so far.
func (d *daemon) output() string { return readFile(d.log) }

// startDaemon starts name and waits (bounded) until it listens on port.
func startDaemon(t *testing.T, port int, name string, args ...string) *daemon {
	t.Helper()
	return startDaemonAs(t, -1, port, name, args...)
}

// startDaemonAs is startDaemon as another user (uid == gid), unless uid < 0.
func startDaemonAs(t *testing.T, uid, port int, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(name, args...), log: filepath.Join(t.TempDir(), filepath.Base(name)+".log"), exited: make(chan struct{})}
	f, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own copy
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if uid >= 0 {
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.cmd.Wait()
		d.code = d.cmd.ProcessState.ExitCode()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.exited
	})
	if !eventually(90*time.Second, func() bool {
		select {
		case <-d.exited:
			return true
		default:
		}
		return listening(port)
	}) || !listening(port) {
		t.Fatalf("%s %s never listened on %d:\n%s", name, strings.Join(args, " "), port, d.output())
	}
	return d
}

// stop sends sig and waits (bounded) for the exit status.
func (d *daemon) stop(sig syscall.Signal, limit time.Duration) (int, bool) {
	d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
		return d.code, true
	case <-time.After(limit):
		return -1, false
	}
}

// pid returns the process ID.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// scrape fetches the exporter's metrics and parses them as Prometheus does.
func scrape(addr string) (map[string]*familyText, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("unparsable metrics: %v", err)
	}
	out := map[string]*familyText{}
	for name, f := range fams {
		out[name] = &familyText{n: len(f.GetMetric())}
	}
	return out, nil
}

type familyText struct{ n int }

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// promQuery runs an instant query against the guest's Prometheus.
func promQuery(q string) ([]promSample, error) {
	resp, err := http.Get("http://" + prometheusAddr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", q, s.Value)
		}
		out = append(out, promSample{Metric: s.Metric, Value: v})
	}
	return out, nil
}

// waitQuery polls q until cond accepts its result (bounded), and returns
// the last result.
func waitQuery(t *testing.T, d time.Duration, q string, cond func([]promSample) bool) ([]promSample, bool) {
	t.Helper()
	var last []promSample
	var lastErr error
	ok := eventually(d, func() bool {
		last, lastErr = promQuery(q)
		return lastErr == nil && cond(last)
	})
	if lastErr != nil {
		t.Logf("last query error: %v", lastErr)
	}
	return last, ok
}

func nonEmpty(s []promSample) bool { return len(s) > 0 }

// rssKiB is VmRSS of a process.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	for _, line := range strings.Split(readFile(fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// TestExporter: grdma exporter in the guest, scraped by a real Prometheus
// (Debian's) every second, next to node_exporter's infiniband collector.
// The test asks Prometheus: the rxe series exist, rate() of sent packets
// is positive while ibv_rc_pingpong runs, devices added, renamed and
// deleted at runtime show up; then the exporter itself: 20 parallel
// scrapes, RSS over hundreds of scrapes, scrapes during device churn,
// SIGTERM.
func TestExporter(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	gid := ipv4GID(t, "rxe0", rxeAddr)

	exp := startDaemon(t, 10041, grdma(), "exporter", "--web.listen-address="+exporterAddr, "--collector.check", "--collector.check.interval=5s")
	ne := startDaemon(t, 9100, layout.NodeExporter, "--web.listen-address="+nodeExporterAddr,
		"--collector.disable-defaults", "--collector.infiniband", "--log.level=debug")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: grdma
    static_configs: [{targets: ['`+exporterAddr+`']}]
  - job_name: node
    static_configs: [{targets: ['`+nodeExporterAddr+`']}]
`), 0o644)
	prom := startDaemon(t, 9090, layout.Prometheus, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+prometheusAddr)
	if _, ok := waitQuery(t, 90*time.Second, `up{job="grdma"} == 1 and on() up{job="node"} == 1`, nonEmpty); !ok {
		t.Fatalf("Prometheus never scraped both exporters:\n%s\nexporter:\n%s", prom.output(), exp.output())
	}

	t.Run("SeriesExist", func(t *testing.T) {
		for q, want := range map[string]float64{
			`grdma_port_active{device="rxe0",port="1"}`:                       1,
			`grdma_port_state{device="rxe0",port="1"}`:                        4,
			`grdma_port_rate_bytes_per_second{device="rxe0",port="1"}`:        1.25e9, // 10 Gb/s, rxe's 1X QDR-like rate
			`grdma_port_roce_v2_ipv4_gid_index{device="rxe0",port="1"}`:       float64(gid),
			`grdma_device_info{device="rxe0",driver="rxe",netdev="veth0"}`:    1,
			`grdma_check_status{check="ports",subject="rxe0/1"}`:              0,
			`count(grdma_port_hw_counter_total{device="rxe0",port="1"}) > 10`: -1, // any value: rxe has ~15
			`grdma_export_read_errors`:                                        0,
		} {
			got, err := promQuery(q)
			switch {
			case err != nil:
				t.Errorf("%s: %v", q, err)
			case len(got) != 1:
				t.Errorf("%s: %d series, want 1: %v", q, len(got), got)
			case want >= 0 && got[0].Value != want:
				t.Errorf("%s = %v, want %v", q, got[0].Value, want)
			}
		}
		gidInfo, _ := promQuery(`grdma_port_roce_v2_ipv4_gid_info{device="rxe0"}`)
		if len(gidInfo) != 1 || gidInfo[0].Metric["gid"] != "::ffff:"+rxeAddr || gidInfo[0].Metric["gid_index"] != strconv.Itoa(gid) {
			t.Errorf("GID info: %v, want gid ::ffff:%s index %d", gidInfo, rxeAddr, gid)
		}
	})

	t.Run("RateWhileTrafficRuns", func(t *testing.T) {
		stop := startTraffic(t, "rxe0", gid)
		defer stop()
		q := `rate(grdma_port_hw_counter_total{device="rxe0",port="1",counter="sent_pkts"}[4s]) > 0`
		got, ok := waitQuery(t, 45*time.Second, q, func(s []promSample) bool { return len(s) == 1 })
		if !ok {
			t.Fatalf("%s never returned a series while ibv_rc_pingpong ran (last: %v)", q, got)
		}
		if err := stop(); err != nil {
			t.Fatal(err) // the traffic stopped early: the rate may not be its
		}
		t.Logf("rate of sent_pkts while ibv_rc_pingpong runs: %.0f/s", got[0].Value)
	})

	t.Run("DevicesFollowed", func(t *testing.T) {
		addRxe(t, "rxe1", "veth1")
		if _, ok := waitQuery(t, 30*time.Second, `grdma_port_state{device="rxe1",port="1"}`, nonEmpty); !ok {
			t.Fatal("rxe1, added at runtime, never appeared in Prometheus")
		}
		must(t, grdma(), "dev", "set", "rxe1", "name", "rxe7")
		if _, ok := waitQuery(t, 30*time.Second, `grdma_port_state{device="rxe7",port="1"} unless on() grdma_port_state{device="rxe1"}`, nonEmpty); !ok {
			t.Fatal("rxe1 renamed rxe7: Prometheus never showed rxe7 alone")
		}
		must(t, grdma(), "link", "delete", "rxe7")
		if _, ok := waitQuery(t, 30*time.Second, `absent(grdma_port_state{device="rxe7"})`, nonEmpty); !ok {
			t.Fatal("rxe7 deleted: its series never went stale")
		}
	})

	t.Run("AgreesWithNodeExporter", func(t *testing.T) {
		reported, err := promQuery(`node_infiniband_state_id`)
		if err != nil {
			t.Fatal(err)
		}
		if len(reported) == 0 {
			ok, _ := promQuery(`node_scrape_collector_success{collector="infiniband"}`)
			// procfs (node_exporter's sysfs reader) needs ports/N/counters,
			// which rxe has not: the collector skips the whole class.
			t.Skipf("node_exporter's infiniband collector reports no port here (collector success %v; its log: %q): nothing to compare",
				ok, lastLine(infinibandLines(ne.output())))
		}
		for _, pair := range [][2]string{
			{"node_infiniband_state_id", "grdma_port_state"},
			{"node_infiniband_rate_bytes_per_second", "grdma_port_rate_bytes_per_second"},
		} {
			q := fmt.Sprintf(`%s != on(device, port) group_left %s`, pair[0], pair[1])
			if got, err := promQuery(q); err != nil || len(got) != 0 {
				t.Errorf("%s and %s disagree: %v %v", pair[0], pair[1], got, err)
			}
			if got, _ := promQuery(fmt.Sprintf(`%s and on(device, port) %s`, pair[0], pair[1])); len(got) == 0 {
				t.Errorf("%s and %s have no port in common", pair[0], pair[1])
			}
		}
	})

	t.Run("ParallelScrapes", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				if _, err := scrape(exporterAddr); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("RSSFlat", func(t *testing.T) {
		// RSS after a warm-up, then after each of two rounds of scrapes. A
		// leak grows it round after round; the garbage collector's timing
		// moves it by a few MiB either way. Scrapes less than a second
		// apart share a reading of the devices: these rounds exercise the
		// HTTP and export path, Prometheus' scrapes (every second) the
		// readings.
		const warm, round = 30, 100
		scrapes := func(n int) {
			t.Helper()
			for range n {
				if _, err := scrape(exporterAddr); err != nil {
					t.Fatal(err)
				}
			}
		}
		scrapes(warm)
		rss := []int{rssKiB(t, exp.pid())}
		start := time.Now()
		for range 2 {
			scrapes(round)
			rss = append(rss, rssKiB(t, exp.pid()))
		}
		t.Logf("exporter RSS after %d scrapes %d KiB, after %d more %d KiB, after %d more %d KiB; %.1f ms per scrape",
			warm, rss[0], round, rss[1], round, rss[2], float64(time.Since(start).Milliseconds())/(2*round))
		if rss[1] > rss[0] && rss[2] > rss[1] && rss[2]-rss[0] > 8*1024 {
			t.Errorf("RSS grew in both rounds, by %d KiB over %d scrapes", rss[2]-rss[0], 2*round)
		}
	})

	t.Run("ScrapesDuringChurn", func(t *testing.T) {
		vethPairs(t, 6)
		stop := make(chan struct{})
		var churned int
		churnDone := make(chan struct{})
		go func() {
			defer close(churnDone)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name, netdev := fmt.Sprintf("rxe%d", 2+i%4), fmt.Sprintf("veth%d", 2+i%4)
				run(grdma(), "link", "add", name, "type", "rxe", "netdev", netdev)
				run(grdma(), "dev", "set", name, "name", name+"x")
				run(grdma(), "link", "delete", name+"x")
				churned++
			}
		}()
		var scrapes int
		var failures []string
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); scrapes++ {
			if _, err := scrape(exporterAddr); err != nil {
				failures = append(failures, err.Error())
			}
		}
		close(stop)
		<-churnDone
		t.Logf("%d scrapes while %d devices were added, renamed and deleted", scrapes, churned)
		if len(failures) > 0 {
			t.Errorf("%d of %d scrapes failed, first: %s", len(failures), scrapes, failures[0])
		}
		for _, name := range []string{"rxe2x", "rxe3x", "rxe4x", "rxe5x", "rxe2", "rxe3", "rxe4", "rxe5"} {
			run(grdma(), "link", "delete", name)
		}
	})

	t.Run("SIGTERM", func(t *testing.T) {
		code, ok := exp.stop(syscall.SIGTERM, 15*time.Second)
		if !ok || code != 0 || !strings.Contains(exp.output(), "stopped") {
			t.Fatalf("after SIGTERM: exited %v, code %d; output:\n%s", ok, code, exp.output())
		}
	})
}

// startTraffic starts an ibv_rc_pingpong server and client on dev with
// more iterations than a test waits for; stop kills both and says whether
// they were still running (traffic flowed all along).
func startTraffic(t *testing.T, dev string, gid int) (stop func() error) {
	t.Helper()
	args := []string{"-d", dev, "-g", strconv.Itoa(gid), "-n", "1000000"}
	server := exec.Command(layout.IbvRcPingpong, args...)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Wait() }()
	if !eventually(20*time.Second, func() bool { return listening(0x4853) }) {
		server.Process.Kill()
		t.Fatal("ibv_rc_pingpong server never listened")
	}
	client := exec.Command(layout.IbvRcPingpong, append(args, "127.0.0.1")...)
	if err := client.Start(); err != nil {
		server.Process.Kill()
		t.Fatal(err)
	}
	clientDone := make(chan error, 1)
	go func() { clientDone <- client.Wait() }()
	var once sync.Once
	var result error
	return func() error {
		once.Do(func() {
			for _, c := range []struct {
				name string
				cmd  *exec.Cmd
				done chan error
			}{{"client", client, clientDone}, {"server", server, serverDone}} {
				select {
				case err := <-c.done:
					if result == nil {
						result = fmt.Errorf("ibv_rc_pingpong %s ended before it was stopped: %v", c.name, err)
					}
				default:
					c.cmd.Process.Kill()
					<-c.done
				}
			}
		})
		return result
	}
}

// infinibandLines are the lines of a log that mention infiniband.
func infinibandLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "infiniband") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExporterBadInput: bad flags and a bad web configuration exit 2
// naming the problem; a taken port exits 1; nothing listens after.
func TestExporterBadInput(t *testing.T) {
	cleanRDMA(t)
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "web.yml")
	os.WriteFile(badYAML, []byte("basic_auth_users: [nope\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--web.listen-address=nope"}, 2, `--web.listen-address "nope" must be host:port`},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"--web.telemetry-path=metrics"}, 2, `telemetry path "metrics" must start with /`},
		{[]string{"--web.config.file=" + filepath.Join(dir, "missing.yml")}, 2, "missing.yml"},
		{[]string{"--web.config.file=" + badYAML}, 2, "web.yml"},
		{[]string{"--collector.check.interval=0s", "--collector.check"}, 2, "--collector.check.interval must be a positive duration"},
		{[]string{"extra"}, 2, `"extra"`},
	} {
		r := run(grdma(), append([]string{"exporter"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("want exit %d and %q:\n%s", c.code, c.msg, r)
		}
	}
	// A port already taken: exit 1 naming the address.
	startDaemon(t, 10042, grdma(), "exporter", "--web.listen-address=127.0.0.1:10042")
	r := run(grdma(), "exporter", "--web.listen-address=127.0.0.1:10042")
	if r.code != 1 || !strings.Contains(r.stderr, "127.0.0.1:10042") || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("second exporter on a taken port:\n%s", r)
	}
}

// TestExporterUnprivileged: as uid 65534 with no capabilities (the
// DaemonSet and the systemd unit in deploy/ run it so) the exporter reads
// everything but the uverbs device, which is root's 0600 here (rdma-core's
// udev rules make it 0666 on real systems): the MTU is then derived from
// the netdev's.
func TestExporterUnprivileged(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	pingpong(t, "rxe0", ipv4GID(t, "rxe0", rxeAddr))
	startDaemonAs(t, 65534, 10044, grdma(), "exporter", "--web.listen-address=127.0.0.1:10044")
	resp, err := http.Get("http://127.0.0.1:10044/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"\ngrdma_export_read_errors 0\n",
		`grdma_port_active{device="rxe0",port="1"} 1`,
		`grdma_port_active_mtu_bytes{device="rxe0",port="1"} 1024`,
		`grdma_port_hw_counter_total{counter="sent_pkts",device="rxe0",port="1"}`,
		`grdma_device_resources{device="rxe0",type="qp"}`,
		`grdma_port_roce_v2_ipv4_gid_index{device="rxe0",port="1"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("as uid 65534: no %q in\n%s", want, text)
		}
	}
}

// TestExporterScrapeLatency measures how long a scrape takes with 1 and 4
// rxe devices in make e2e, and 1, 16 and 64 in make bench (figures
// logged, and written to $EXPORTER_BENCH_OUT; nothing timed is asserted;
// see BENCHMARKS.md). $E2E_EXPORTER_DEVICES sets the counts (e.g.
// 1,16,64): 64 devices take half a minute under emulation, too long for
// every make e2e, whose guest tests run close to their time limit.
func TestExporterScrapeLatency(t *testing.T) {
	counts := []int{1, 4}
	if os.Getenv("EXPORTER_BENCH_OUT") != "" {
		counts = []int{1, 16, 64}
	}
	if v := os.Getenv("E2E_EXPORTER_DEVICES"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || len(counts) > 0 && n <= counts[len(counts)-1] {
				t.Fatalf("E2E_EXPORTER_DEVICES=%s: want ascending device counts such as 1,16,64", v)
			}
			counts = append(counts, n)
		}
	}
	cleanRDMA(t)
	vethPairs(t, counts[len(counts)-1]+counts[len(counts)-1]%2)
	exp := startDaemon(t, 10043, grdma(), "exporter", "--web.listen-address=127.0.0.1:10043")
	var report strings.Builder
	made := 0
	for _, n := range counts {
		for ; made < n; made++ {
			must(t, grdma(), "link", "add", fmt.Sprintf("rxe%d", made), "type", "rxe", "netdev", fmt.Sprintf("veth%d", made))
		}
		var times []time.Duration
		for range 5 {
			// Past the reuse window, so that each scrape reads the devices
			// (scrapes within it share one reading).
			time.Sleep(exporter.DefaultReuseFor)
			start := time.Now()
			fams, err := scrape("127.0.0.1:10043")
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, time.Since(start))
			if f := fams["grdma_port_state"]; f == nil || f.n != n {
				t.Fatalf("%d devices, grdma_port_state has %v series", n, f)
			}
		}
		slices.Sort(times)
		fmt.Fprintf(&report, "scrape of /metrics with %2d rxe devices: median %v, min %v, max %v (5 scrapes); exporter RSS %d KiB\n", n,
			times[len(times)/2].Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), rssKiB(t, exp.pid()))
	}
	t.Log("\n" + report.String())
	if out := os.Getenv("EXPORTER_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	deleteAllDevices(t)
}
