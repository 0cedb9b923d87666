//go:build e2eguest

package guest

// The pingmesh (issue 26) on four guests: each node runs the responder
// (grdma probe DEV serve, which answers UD pings) and grdma exporter
// --collector.pingmesh over one targets file naming the four; Debian's
// Prometheus on node 1 scrapes the four exporters every 2 s and evaluates
// deploy/prometheus/grdma-pingmesh.yml (its evaluation intervals
// shortened to 1 s and 2 s; the expressions, windows and `for`s as
// shipped). A healthy mesh fires nothing; then, in turn on the same mesh
// (each removed and the mesh recovered before the next), a RoCE black
// hole on node 3, 60 ms of delay on node 2 and 1 KiB packets dropped
// between node 1 and node 4 each show in the metrics and fire their
// alerts naming that node or that link, and nothing else. The times from
// a fault to the metric, to the alert and from its removal to a quiet
// mesh are logged as FIGURE lines.

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	rules "github.com/grdma/grdma/deploy/prometheus"
	"github.com/grdma/grdma/e2e/layout"
)

// meshExporterPort is where each node's exporter listens (all addresses:
// node 1's Prometheus scrapes them over eth0).
const meshExporterPort = 10041

// daemonLimit is how long the agents let a scenario's daemons run (a
// command's default is a minute; peer.MaxTimeout at most): the whole
// scenario, whose mesh the three faults share: it took 11.5 min on the
// 6.1 fleet, where a 10-minute limit killed the daemons before the last
// fault.
const daemonLimit = 25 * time.Minute

// pingmeshFleet is the running mesh: its nodes' daemons and node 1's
// Prometheus.
type pingmeshFleet struct {
	f    *fleet
	prom *daemon
	// The daemons of each node, for the diagnosis of a failure.
	exporters, responders []*remoteCmd
}

// startPingmesh starts the responders and exporters of n nodes and
// Prometheus on node 1, and waits until every pair has answered.
func startPingmesh(t *testing.T, n int) *pingmeshFleet {
	t.Helper()
	f := withFleet(t, n)
	pf := &pingmeshFleet{f: f}
	var mesh strings.Builder
	for i := 1; i <= n; i++ {
		rack := "r1"
		if i > n/2 {
			rack = "r2"
		}
		fmt.Fprintf(&mesh, "- targets: [%s]\n  labels: {rack: %s}\n", layout.FleetName(i), rack)
	}
	for _, nd := range f.Nodes() {
		nd.shell(t, fmt.Sprintf("mkdir -p /tmp/pingmesh && printf '%%s' '%s' > /tmp/pingmesh/mesh.yml", mesh.String()))
		pf.responders = append(pf.responders, nd.on(t).WithTimeout(daemonLimit).Serve(probePort, grdma(), "-j", "probe", f.Dev, "serve"))
		pf.exporters = append(pf.exporters, nd.on(t).WithTimeout(daemonLimit).Serve(meshExporterPort, grdma(), "exporter", fmt.Sprintf("--web.listen-address=:%d", meshExporterPort),
			"--collector.devices=false", "--collector.pingmesh", "--pingmesh.targets=/tmp/pingmesh/mesh.yml", "--pingmesh.device="+f.Dev))
	}
	dir := t.TempDir()
	short := strings.NewReplacer("interval: 5s", "interval: 1s", "interval: 15s", "interval: 2s").Replace(rules.Pingmesh)
	if short == rules.Pingmesh {
		t.Fatal("the rules' evaluation intervals were not found to shorten")
	}
	os.WriteFile(filepath.Join(dir, "grdma-pingmesh.yml"), []byte(short), 0o644)
	var targets []string
	for i := 1; i <= n; i++ {
		targets = append(targets, fmt.Sprintf("'%s:%d'", layout.FleetName(i), meshExporterPort))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files: [grdma-pingmesh.yml]
scrape_configs:
  - job_name: pingmesh
    static_configs: [{targets: [`+strings.Join(targets, ", ")+`]}]
    relabel_configs:
      - {source_labels: [__address__], regex: '(.+):\d+', target_label: instance}
    metric_relabel_configs:
      - {source_labels: [__name__], regex: 'grdma_pingmesh_.*', action: keep}
`), 0o644)
	pf.prom = startDaemon(t, 9090, layout.Prometheus, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+prometheusAddr)
	pairs := n * (n - 1)
	q := fmt.Sprintf(`count(grdma_pingmesh_responder_up == 1 and grdma_pingmesh_consecutive_lost == 0) == %d`, pairs)
	if _, ok := waitQuery(t, 3*time.Minute, q, nonEmpty); !ok {
		up, _ := promQuery(`grdma_pingmesh_responder_up`)
		errs, _ := promQuery(`grdma_pingmesh_errors_total > 0`)
		pf.diagnose(t)
		t.Fatalf("the %d pairs never all answered: responder_up %v, errors %v", pairs, up, errs)
	}
	return pf
}

// diagnose logs what Prometheus has and what each node's daemons said.
// It never fails a test itself: it runs in subtests, while the daemons
// belong to the parent test (whose FailNow a subtest must not call), and
// a node whose agent does not answer is logged.
func (pf *pingmeshFleet) diagnose(t *testing.T) {
	t.Helper()
	for _, q := range []string{`up`, `scrape_duration_seconds`, `count by (instance) (grdma_pingmesh_sent_total)`,
		`sum by (instance, target) (increase(grdma_pingmesh_sent_total[1m]))`,
		`sum by (instance, target, size) (increase(grdma_pingmesh_lost_total[1m])) > 0`,
		`grdma_pingmesh_consecutive_lost > 0`, `grdma_pingmesh_errors_total > 0`, `grdma_pingmesh_prober_events_total > 0`,
		`grdma:pingmesh_rtt_seconds:quantile_1m`, `ALERTS`, `prometheus_rule_evaluation_failures_total > 0`} {
		s, err := promQuery(q)
		var lines []string
		for _, x := range s {
			lines = append(lines, fmt.Sprintf("%v %g", x.Metric, x.Value))
		}
		t.Logf("diagnosis: %s (%v):\n  %s", q, err, strings.Join(lines, "\n  "))
	}
	tail := func(s string) string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		return strings.Join(l[max(0, len(l)-15):], "\n  ")
	}
	for i, e := range pf.exporters {
		_, stderr, err := e.TryOutput()
		if err != nil {
			stderr = err.Error()
		}
		_, rerr, err := pf.responders[i].TryOutput()
		if err != nil {
			rerr = err.Error()
		}
		t.Logf("diagnosis: node%d's exporter:\n  %s\nits responder:\n  %s", i+1, tail(stderr), tail(rerr))
		r, err := pf.f.Node(i+1).c.WithTag(t.Name()).Run(layout.Sh, "-c", "free -k; dmesg | tail -5")
		if err != nil {
			t.Logf("diagnosis: node%d: its agent: %v", i+1, err)
			continue
		}
		t.Logf("diagnosis: node%d: %s", i+1, tail(r.Stdout))
	}
	t.Logf("diagnosis: Prometheus:\n  %s", tail(pf.prom.output()))
}

// firing returns the alerts firing now, as "Name{labels}" sorted.
func firing(t *testing.T) []string {
	t.Helper()
	s, err := promQuery(`ALERTS{alertstate="firing"}`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range s {
		out = append(out, alertString(a.Metric))
	}
	sort.Strings(out)
	return out
}

// alertString names an alert by the labels that say where: its name, the
// probing node, the target, the size.
func alertString(m map[string]string) string {
	var parts []string
	for _, k := range []string{"instance", "target", "size"} {
		if v := m[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return m["alertname"] + "{" + strings.Join(parts, ",") + "}"
}

// recover waits, after a fault was removed, until no alert fires, none of
// the fault's alerts (names as alertString) is pending, and every pair
// answers again, so that the next fault starts on a healthy mesh; it logs
// how long that took.
func (pf *pingmeshFleet) recover(t *testing.T, name string, alerts []string) {
	t.Helper()
	start := time.Now()
	pairs := len(pf.exporters) * (len(pf.exporters) - 1)
	q := fmt.Sprintf(`count(grdma_pingmesh_responder_up == 1 and grdma_pingmesh_consecutive_lost == 0) == %d`, pairs)
	ok := eventually(4*time.Minute, func() bool {
		s, err := promQuery(`ALERTS`)
		if err != nil {
			return false
		}
		for _, a := range s {
			if a.Metric["alertstate"] == "firing" || slices.Contains(alerts, alertString(a.Metric)) {
				return false
			}
		}
		s, err = promQuery(q)
		return err == nil && len(s) > 0
	})
	if !ok {
		pf.diagnose(t)
		t.Fatalf("after %s the mesh never recovered in 4m: firing %v", name, firing(t))
	}
	t.Logf("FIGURE pingmesh %s: fault removed to no alert firing or pending %.1f s", name, time.Since(start).Seconds())
}

// fault plants a fault, then waits for the metric (q non-empty) and for
// each alert of want (names with their labels, as alertString) to fire;
// every alert firing meanwhile must be one of want or allowed. It logs
// the times from the fault to the metric and to each alert.
func (pf *pingmeshFleet) fault(t *testing.T, name string, plant func(), metric string, want, allowed []string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	plant()
	var metricAt time.Duration
	seen := map[string]time.Duration{}
	var stray []string
	for deadline := start.Add(limit); ; time.Sleep(500 * time.Millisecond) {
		if metricAt == 0 {
			if s, err := promQuery(metric); err == nil && len(s) > 0 {
				metricAt = time.Since(start)
			}
		}
		for _, a := range firing(t) {
			if _, ok := seen[a]; !ok {
				seen[a] = time.Since(start)
				if !slices.Contains(want, a) && !slices.Contains(allowed, a) && !slices.Contains(stray, a) {
					stray = append(stray, a)
				}
			}
		}
		done := metricAt > 0
		for _, w := range want {
			if _, ok := seen[w]; !ok {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
	}
	if metricAt == 0 {
		t.Errorf("%s: %s never showed within %v", name, metric, limit)
	} else {
		t.Logf("FIGURE pingmesh %s: fault to metric (%s) %.1f s", name, metric, metricAt.Seconds())
	}
	for _, w := range want {
		if at, ok := seen[w]; ok {
			t.Logf("FIGURE pingmesh %s: fault to %s firing %.1f s", name, w, at.Seconds())
		} else {
			t.Errorf("%s: %s never fired within %v (fired: %v)", name, w, limit, seen)
		}
	}
	if len(stray) > 0 {
		t.Errorf("%s: alerts naming another node or link fired: %v", name, stray)
	}
	if t.Failed() {
		pf.diagnose(t)
	}
}

// pairAlerts is the alert name for every pair with node n, both ways.
func pairAlerts(name string, n, size int, extra ...string) []string {
	var out []string
	for i := 1; i <= size; i++ {
		if i == n {
			continue
		}
		a, b := layout.FleetName(i), layout.FleetName(n)
		out = append(out, fmt.Sprintf("%s{instance=%s,target=%s%s}", name, a, b, strings.Join(extra, "")),
			fmt.Sprintf("%s{instance=%s,target=%s%s}", name, b, a, strings.Join(extra, "")))
	}
	return out
}

// TestFleetPingmesh: one mesh of four nodes, healthy, then each fault in
// turn, each removed and the mesh recovered (nothing firing or pending)
// before the next: a RoCE black hole on node3, 60 ms on node2, packets
// over 1 KiB dropped between node1 and node4. One mesh for the three
// keeps the scenario within an agent's daemon limit and the e2e run
// short.
func TestFleetPingmesh(t *testing.T) {
	const n = 4
	pf := startPingmesh(t, n)

	// Healthy: nothing fires for 90 s (which also fills the recording
	// rules' one-minute windows: the fleet's median needs every pair's).
	// Pending alerts are logged (a pair's p99 over a minute is its worst
	// answer, and an emulated guest stalls now and then); the rules' `for`
	// is what keeps them from firing.
	t.Run("Healthy", func(t *testing.T) {
		pending := map[string]bool{}
		for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
			if f := firing(t); len(f) > 0 {
				pf.diagnose(t)
				t.Fatalf("alerts firing on the healthy mesh: %v", f)
			}
			s, _ := promQuery(`ALERTS{alertstate="pending"}`)
			for _, a := range s {
				pending[alertString(a.Metric)] = true
			}
		}
		if len(pending) > 0 {
			t.Logf("pending (never firing) on the healthy mesh: %v", slices.Sorted(maps.Keys(pending)))
		}
		p99, _ := promQuery(`grdma:pingmesh_fleet_rtt_seconds:median_1m`)
		loss, _ := promQuery(`sum(increase(grdma_pingmesh_lost_total[1m])) / sum(increase(grdma_pingmesh_sent_total[1m]))`)
		t.Logf("healthy mesh: the fleet's median RTT p99 and median %v, loss %v", p99, loss)
	})
	if t.Failed() {
		return
	}

	// Each fault is planted in its subtest and removed when it ends.
	// The others' probes to node3 are lost on the way. node3's own cannot
	// leave: nftables refuses them at output, so its rxe completes the
	// sends in error (6.12) or retries them for ever, never completing
	// them (6.1: the prober's send watchdog), and its prober makes its
	// queue pair again and again (PingmeshProberFailing); the pairs from
	// node3 degrade because they send nothing.
	var holeWant, holeAllowed []string
	for _, a := range pairAlerts("PingmeshTargetUnreachable", 3, n) {
		if strings.Contains(a, "target=node3") {
			holeWant = append(holeWant, a)
		} else {
			holeAllowed = append(holeAllowed, a) // a kernel that lets the sends out and loses them
		}
	}
	holeWant = append(holeWant, "PingmeshNodeDegraded{instance=node3}", "PingmeshTargetDegraded{target=node3}",
		"PingmeshProberFailing{instance=node3}")
	t.Run("BlackHole", func(t *testing.T) {
		pf.fault(t, "black hole (DropRoCE node3)", func() { pf.f.Node(3).DropRoCE(t) },
			`grdma_pingmesh_consecutive_lost{target="node3"} > 0`, holeWant, holeAllowed, 3*time.Minute)
	})
	pf.recover(t, "black hole", append(holeWant, holeAllowed...))

	// The emulated guests' p99 is tens of ms when healthy: the median
	// shows the delay. The node alerts name node2 (its pairs' medians
	// against 3 x the fleet's): the delay must clear that on a loaded
	// host too, where the guests' healthy medians rose from 6 to 8-18 ms
	// — 20 ms did not (a make check of 2026-11-27: delayed pairs 25 ms,
	// threshold 29 ms, no alert in 4 min); 60 ms holds while a healthy
	// median stays under 30 ms. PingmeshRTTHigh per pair may fire but is
	// not required (promtool tests it on a hardware-like baseline). So
	// may PingmeshPacketLoss on node2's pairs: a CI 6.12 fleet (stop 33's
	// head) lost over a tenth of node1's 512-byte probes to node2 for 30 s
	// under the delay (replies past the 1 s timeout on the loaded host, or
	// lost: not found) — an alert that names node2, as the fault does.
	delayWant := []string{"PingmeshNodeDegraded{instance=node2}", "PingmeshTargetDegraded{target=node2}"}
	delayAllowed := pairAlerts("PingmeshRTTHigh", 2, n)
	for _, size := range []string{"64", "512", "1024"} {
		delayAllowed = append(delayAllowed, pairAlerts("PingmeshPacketLoss", 2, n, ",size="+size)...)
	}
	// The metric: a median the histogram can show. Its buckets double
	// (…, 32.768, 65.536 ms), and histogram_quantile interpolates within
	// one: with every RTT in (32.8, 65.5] ms, as 60 ms and a fast path
	// make them, the median reads 49 ms — under 60 (a make check of
	// 2026-11-27, 6.1, once the prober got faster: 52-57 ms, while both
	// node2 alerts fired at 62 s). Over 40 ms means the median RTT is in
	// the delay's bucket; a healthy median stays under 30.
	t.Run("Delay", func(t *testing.T) {
		pf.fault(t, "60 ms (netem node2)", func() { pf.f.Node(2).Netem(t, "delay", "60ms") },
			`grdma:pingmesh_rtt_seconds:quantile_1m{quantile="0.5",target="node2"} > 0.04`, delayWant, delayAllowed, 4*time.Minute)
	})
	pf.recover(t, "60 ms", append(delayWant, delayAllowed...))

	t.Run("LargePackets", func(t *testing.T) {
		node1, node4 := pf.f.Node(1), pf.f.Node(4)
		want := []string{"PingmeshPacketLoss{instance=node1,target=node4,size=1024}", "PingmeshPacketLoss{instance=node4,target=node1,size=1024}"}
		// Dropped where they arrive, both ways: as a link loses them. The
		// bed's DropLarger also drops them at output, where the kernel
		// refuses the send: rxe then completes the prober's send in error
		// (6.12) or never (6.1) and the prober makes its queue pair again,
		// which is a node's fault (PingmeshProberFailing, as in the black
		// hole), not a link's. RoCE alone (UDP 4791): the bed's agents
		// answer over TCP from the same addresses, and a large reply lost
		// cut the driver off from node4.
		dropIn := func(nd, from *node) {
			nd.nftFault(t, fmt.Sprintf("e2e_size_in_%d", from.N), fmt.Sprintf(
				"	chain in { type filter hook input priority 0; ip saddr %s udp dport %d meta length > 1024 drop; }", from.Addr, RoCEPort))
		}
		pf.fault(t, "1 KiB dropped (node1-node4)", func() { dropIn(node1, node4); dropIn(node4, node1) },
			`grdma_pingmesh_lost_total{instance="node1",target="node4",size="1024"} > 0`, want, nil, 3*time.Minute)
		// Small probes still pass: that is what says the size.
		if s, _ := promQuery(`increase(grdma_pingmesh_lost_total{instance="node1",target="node4",size="64"}[1m]) > 0`); len(s) > 0 {
			t.Errorf("64-byte probes node1 -> node4 lost too: %v", s)
		}
	})
}
