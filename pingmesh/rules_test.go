package pingmesh

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/udping"
	"github.com/prometheus/client_golang/prometheus"
)

// The rules of deploy/prometheus/grdma-pingmesh.yml are tested by
// promtool on series this package's collector made: four nodes, each
// probing the three others at 1/s (sizes 64, 512, 1024), scraped every
// 5 s, through a healthy start with one RTT spike and a fault at a time
// (another spike during the first)
// (a black hole at n4, 20 ms on n3, large packets dropped between n1 and
// n2, n2's responder down, n1's prober unable to send), each healed
// before the next. The test file
// is generated (UPDATE_RULES_TEST=1 go test ./pingmesh -run Rules) and
// checked to be up to date; promtool then runs it.

const (
	rulesDir      = "../deploy/prometheus"
	rulesTestFile = "grdma-pingmesh_test.yml"
	simStep       = 5 * time.Second
	simEnd        = 30 * time.Minute
)

var simNodes = []string{"n1", "n2", "n3", "n4"}

func simRack(n string) string {
	if n == "n1" || n == "n2" {
		return "r1"
	}
	return "r2"
}

// simProbe is the fault timeline: the result of a probe from src to dst
// of size at time at.
func simProbe(src, dst string, size int, at time.Duration) udping.Result {
	ok := reply(dst, size, 900*time.Microsecond)
	in := func(from, to time.Duration) bool { return at >= from && at < to }
	either := func(n string) bool { return src == n || dst == n }
	switch {
	case in(4*time.Minute, 7*time.Minute) && either("n4"): // DropRoCE on n4
		return lost(dst, size, udping.OutcomeTimeout)
	case in(10*time.Minute, 14*time.Minute) && either("n3"): // netem delay 20ms on n3
		ok.RTT += 20 * time.Millisecond
	case in(17*time.Minute, 20*time.Minute) && (src == "n1" && dst == "n2" || src == "n2" && dst == "n1") && size >= 1024: // DropLarger
		return lost(dst, size, udping.OutcomeTimeout)
	case in(23*time.Minute, 26*time.Minute) && dst == "n2": // n2's responder stopped
		return unresolved(dst, &DialError{KindNoResponder, errors.New("connection refused")})
	case in(27*time.Minute, 29*time.Minute) && src == "n1": // n1's sends fail: no result, its queue pair made again
		return udping.Result{}
	case at == 2*time.Minute && src == "n1" && dst == "n2": // one slow answer on a healthy mesh
		ok.RTT = 100 * time.Millisecond
	case at == 4*time.Minute+45*time.Second && src == "n1" && dst == "n2": // and one during the black hole at n4
		ok.RTT = 100 * time.Millisecond
	}
	return ok
}

// rulesFamilies are the families the rules use: only their series go
// into the test file.
var rulesFamilies = []string{"grdma_pingmesh_sent_total", "grdma_pingmesh_lost_total", "grdma_pingmesh_consecutive_lost", "grdma_pingmesh_prober_events_total",
	"grdma_pingmesh_responder_up", "grdma_pingmesh_rtt_seconds", "grdma_pingmesh_targets_file_last_reload_successful", "grdma_pingmesh_targets"}

// simulate runs the four collectors on a simulated clock and returns
// each series' samples, by its promtool name.
func simulate(t *testing.T) map[string][]float64 {
	t.Helper()
	var clock time.Time // the Unix epoch: promtool's series start there
	clock = time.Unix(0, 0)
	meshes := map[string]*Mesh{}
	dir := t.TempDir()
	for _, src := range simNodes {
		var b strings.Builder
		for _, dst := range simNodes {
			fmt.Fprintf(&b, "- targets: [%s]\n  labels: {rack: %s}\n", dst, simRack(dst))
		}
		path := filepath.Join(dir, src+".yml")
		os.WriteFile(path, []byte(b.String()), 0o644)
		m := New(Config{Now: func() time.Time { return clock }, Skip: func(tg Target) bool { return tg.Address == src }},
			newFakeProber(), &TargetsFile{Path: path})
		m.Reload()
		meshes[src] = m
	}
	sizes := []int{64, 512, 1024}
	series := map[string][]float64{}
	steps := int(simEnd / simStep)
	probeN := 0
	for step := 0; step <= steps; step++ {
		at := time.Duration(step) * simStep
		for _, src := range simNodes {
			m := meshes[src]
			for _, dst := range simNodes {
				if m.targets[dst] == nil {
					continue
				}
				for i := range 5 { // 1/s between two scrapes
					probeN++
					size := sizes[probeN%len(sizes)]
					clock = time.Unix(0, 0).Add(at + time.Duration(i)*time.Second)
					r := simProbe(src, dst, size, at+time.Duration(i)*time.Second)
					if r.Outcome == "" {
						m.prober.(*fakeProber).stats.Restarts++
						continue
					}
					m.record(r)
				}
			}
			clock = time.Unix(0, 0).Add(at + simStep)
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if !slices.Contains(rulesFamilies, mf.GetName()) {
					continue
				}
				for _, mm := range mf.GetMetric() {
					labels := map[string]string{"job": "pingmesh", "instance": src + ":10041"}
					for _, l := range mm.GetLabel() {
						if l.GetValue() != "" {
							labels[l.GetName()] = l.GetValue()
						}
					}
					add := func(name string, extra map[string]string, v float64) {
						ls := maps.Clone(labels)
						maps.Copy(ls, extra)
						key := promtoolName(name, ls)
						for len(series[key]) < step { // not there before
							series[key] = append(series[key], math.NaN())
						}
						series[key] = append(series[key], v)
					}
					switch {
					case mm.Histogram != nil:
						for _, b := range mm.Histogram.GetBucket() {
							add(mf.GetName()+"_bucket", map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}, float64(b.GetCumulativeCount()))
						}
						add(mf.GetName()+"_bucket", map[string]string{"le": "+Inf"}, float64(mm.Histogram.GetSampleCount()))
					case mm.Counter != nil:
						add(mf.GetName(), nil, mm.Counter.GetValue())
					case mm.Gauge != nil:
						add(mf.GetName(), nil, mm.Gauge.GetValue())
					}
				}
			}
		}
	}
	return series
}

// promtoolName is a series as promtool's input_series spells it.
func promtoolName(name string, labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// expand writes samples in promtool's notation: runs of a constant step
// as "a+bxN", missing samples as "_".
func expand(v []float64) string {
	var out []string
	for i := 0; i < len(v); {
		if math.IsNaN(v[i]) {
			out = append(out, "_")
			i++
			continue
		}
		j := i + 1
		var d float64
		if j < len(v) && !math.IsNaN(v[j]) {
			d = v[j] - v[i]
			for j+1 < len(v) && !math.IsNaN(v[j+1]) && v[j+1]-v[j] == d {
				j++
			}
			j++
		}
		n := j - i - 1 // values after the first
		f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
		switch {
		case n == 0:
			out = append(out, f(v[i]))
		case d == 0:
			out = append(out, fmt.Sprintf("%sx%d", f(v[i]), n))
		case d > 0:
			out = append(out, fmt.Sprintf("%s+%sx%d", f(v[i]), f(d), n))
		default:
			out = append(out, fmt.Sprintf("%s-%sx%d", f(v[i]), f(-d), n))
		}
		i = j
	}
	return strings.Join(out, " ")
}

// expectation is the alerts of one name at one time.
type expectation struct {
	at     time.Duration
	name   string
	alerts []alert
}

type alert struct {
	labels      map[string]string
	annotations map[string]string
}

func pair(src, dst string) map[string]string {
	return map[string]string{"job": "pingmesh", "instance": src + ":10041", "target": dst, "target_rack": simRack(dst)}
}

func with(m map[string]string, kv ...string) map[string]string {
	m = maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// expectations: what fires when, and the silence around it. Values in
// annotations are what Prometheus computes: lost in a row from the
// simulated series; a quantile q of samples in one bucket (lo, 2lo] is
// lo + q lo (20.9 ms: p99 16.384 ms + 0.99 x 16.384 ms = 32.6 ms, median
// 24.58 ms; 0.9 ms: 1.019 ms and 768 µs).
func expectations(series map[string][]float64) []expectation {
	names := []string{"PingmeshTargetUnreachable", "PingmeshResponderDown", "PingmeshPacketLoss", "PingmeshRTTHigh",
		"PingmeshNodeDegraded", "PingmeshTargetDegraded", "PingmeshTargetsFileBroken", "PingmeshProberFailing"}
	fires := map[time.Duration]map[string][]alert{}
	at := func(d time.Duration, name string, a ...alert) {
		if fires[d] == nil {
			fires[d] = map[string][]alert{}
		}
		fires[d][name] = append(fires[d][name], a...)
	}
	unreachable := func(src, dst string) alert {
		return alert{with(pair(src, dst), "severity", "critical"), map[string]string{
			"summary":     fmt.Sprintf("%s does not answer RDMA probes from %s:10041", dst, src),
			"description": fmt.Sprintf("%s UD probes in a row lost from %s:10041 to %s (rack %s); its responder answers on TCP, so RoCE/IB traffic is lost on the way or at either end.", "%s", src, dst, simRack(dst)),
		}}
	}
	// lostAt fills in the losses in a row at d (the sample scraped then).
	lostAt := func(a alert, d time.Duration) alert {
		v := series[promtoolName("grdma_pingmesh_consecutive_lost", without(a.labels, "severity"))][int(d/simStep)]
		a.annotations = maps.Clone(a.annotations)
		a.annotations["description"] = strings.Replace(a.annotations["description"], "%s", strconv.FormatFloat(v, 'g', -1, 64), 1)
		return a
	}
	nodeDegraded := func(n, pct string) alert {
		return alert{map[string]string{"job": "pingmesh", "instance": n + ":10041", "severity": "critical"}, map[string]string{
			"summary":     fmt.Sprintf("%s:10041: probes to %s of its targets are lost or slow", n, pct),
			"description": fmt.Sprintf("Most paths from %s:10041 degrade at once: look at that node (its RDMA port, NIC, host), not at one link.", n),
		}}
	}
	targetDegraded := func(n, pct string) alert {
		return alert{map[string]string{"job": "pingmesh", "target": n, "target_rack": simRack(n), "severity": "critical"}, map[string]string{
			"summary":     fmt.Sprintf("%s: %s of the nodes probing it see it lost or slow", n, pct),
			"description": fmt.Sprintf("Most paths to %s (rack %s) degrade at once: look at that node, not at one link.", n, simRack(n)),
		}}
	}
	others := func(n string) []string {
		return slices.DeleteFunc(slices.Clone(simNodes), func(x string) bool { return x == n })
	}
	// A black hole at n4 from 4m: every pair with n4, in both directions.
	// Unreachable within one evaluation (5 s) of the fifth loss; the node
	// alerts 30 s later (their for).
	at(4*time.Minute+20*time.Second, "PingmeshNodeDegraded")
	// At 5m30s n1 -> n2's p99 is high from one slow answer (4m45s): that
	// pair is not degraded (a node's pairs degrade by their median), so
	// neither n1 (its other pair, to n4, is) nor n2 (n4's probe of it is)
	// is named.
	for _, d := range []time.Duration{4*time.Minute + 20*time.Second, 4*time.Minute + 40*time.Second, 5*time.Minute + 30*time.Second, 6*time.Minute + 30*time.Second} {
		for _, o := range others("n4") {
			at(d, "PingmeshTargetUnreachable", lostAt(unreachable(o, "n4"), d), lostAt(unreachable("n4", o), d))
		}
		if d > 4*time.Minute+30*time.Second {
			at(d, "PingmeshNodeDegraded", nodeDegraded("n4", "100%"))
			at(d, "PingmeshTargetDegraded", targetDegraded("n4", "100%"))
		}
	}
	// Healed at 7m: the losses leave the 1 m window by 8m; until then the
	// node alerts stay, and no loss alert starts for the black hole's tail.
	at(7*time.Minute+45*time.Second, "PingmeshNodeDegraded", nodeDegraded("n4", "100%"))
	at(7*time.Minute+45*time.Second, "PingmeshTargetDegraded", targetDegraded("n4", "100%"))
	// 20 ms on n3 from 10m: every pair with n3 is slow.
	// Its p99 and its median, each against the fleet's: 20.9 ms lies in
	// (16.384, 32.768] ms, the healthy 0.9 ms in (0.512, 1.024] ms.
	for _, o := range others("n3") {
		for _, p := range [][2]string{{o, "n3"}, {"n3", o}} {
			for _, q := range []struct{ quantile, value, fleet string }{{"0.99", "32.6ms", "1.019ms"}, {"0.5", "24.58ms", "768us"}} {
				at(12*time.Minute+30*time.Second, "PingmeshRTTHigh", alert{with(pair(p[0], p[1]), "severity", "warning", "quantile", q.quantile), map[string]string{
					"summary":     fmt.Sprintf("RTT %s quantile %s from %s:10041 to %s, above 3x the fleet's median", q.quantile, q.value, p[0], p[1]),
					"description": fmt.Sprintf("The fleet's median of that quantile is %s; the path %s:10041 -> %s (rack %s) is slow.", q.fleet, p[0], p[1], simRack(p[1])),
				}})
			}
		}
	}
	at(12*time.Minute+30*time.Second, "PingmeshNodeDegraded", nodeDegraded("n3", "100%"))
	at(12*time.Minute+30*time.Second, "PingmeshTargetDegraded", targetDegraded("n3", "100%"))
	// Large packets dropped between n1 and n2 from 17m: that link, that size.
	for _, p := range [][2]string{{"n1", "n2"}, {"n2", "n1"}} {
		at(19*time.Minute+30*time.Second, "PingmeshPacketLoss", alert{with(pair(p[0], p[1]), "severity", "warning", "size", "1024"), map[string]string{
			"summary":     fmt.Sprintf("100%% of 1024-byte probes lost from %s:10041 to %s", p[0], p[1]),
			"description": fmt.Sprintf("Loss on the path %s:10041 -> %s (rack %s) for probes of 1024 bytes over the last minute; loss of the large sizes only points at an MTU mismatch or a link dropping large frames.", p[0], p[1], simRack(p[1])),
		}})
	}
	// n2's responder down from 23m.
	for _, o := range others("n2") {
		at(24*time.Minute+30*time.Second, "PingmeshResponderDown", alert{with(pair(o, "n2"), "severity", "warning"), map[string]string{
			"summary":     fmt.Sprintf("No grdma responder answers at n2 (probed from %s:10041)", o),
			"description": "The control channel of n2 (rack r1) refuses, does not answer or does not resolve: is grdma probe DEV serve (deploy/systemd/grdma-responder.service, the DaemonSet's grdma-responder) running there?",
		}})
	}
	// n1's prober failing from 27m: its sends fail, nothing is lost on the
	// network; the node and its prober are named.
	at(28*time.Minute+45*time.Second, "PingmeshProberFailing", alert{map[string]string{"job": "pingmesh", "instance": "n1:10041", "event": "restarts", "severity": "critical"},
		map[string]string{
			"summary":     "n1:10041: the pingmesh's UD queue pair keeps failing",
			"description": "The probes of n1:10041 cannot leave (their sends complete in error, or never complete): look at that node's RDMA port and its firewall (UDP 4791).",
		}})
	at(28*time.Minute+45*time.Second, "PingmeshNodeDegraded", nodeDegraded("n1", "100%"))
	// Every alert is checked at every time: silent before, between and
	// after the faults (the RTT spike at 2m included).
	times := []time.Duration{time.Minute, 2*time.Minute + 50*time.Second, 3*time.Minute + 50*time.Second, 7*time.Minute + 45*time.Second, 8*time.Minute + 30*time.Second,
		9*time.Minute + 30*time.Second, 16*time.Minute + 30*time.Second, 22*time.Minute + 30*time.Second}
	for d := range fires {
		times = append(times, d)
	}
	slices.Sort(times)
	var out []expectation
	for _, d := range times {
		for _, n := range names {
			out = append(out, expectation{d, n, fires[d][n]})
		}
	}
	return out
}

func without(m map[string]string, k string) map[string]string {
	m = maps.Clone(m)
	delete(m, k)
	return m
}

// rulesTest writes the promtool test file.
func rulesTest(series map[string][]float64) string {
	var b strings.Builder
	b.WriteString(`# promtool test rules grdma-pingmesh_test.yml
#
# GENERATED by pingmesh/rules_test.go (UPDATE_RULES_TEST=1 go test ./pingmesh
# -run Rules): the series are those the pingmesh collector exports for four
# nodes probing each other at 1/s, scraped every 5 s, through a healthy
# start (one 100 ms answer n1 -> n2 at 2m), a black hole at n4 (4m-7m),
# 20 ms on n3 (10m-14m), packets of 1 KiB dropped between n1 and n2
# (17m-20m), n2's responder down (23m-26m) and n1's prober unable to send
# (27m-29m). Only the families the rules use are kept.
rule_files:
  - grdma-pingmesh.yml
evaluation_interval: 5s
tests:
  - interval: 5s
    input_series:
`)
	for _, k := range slices.Sorted(maps.Keys(series)) {
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", k, expand(series[k]))
	}
	b.WriteString("    alert_rule_test:\n")
	for _, e := range expectations(series) {
		fmt.Fprintf(&b, "      - eval_time: %s\n        alertname: %s\n", promDuration(e.at), e.name)
		if len(e.alerts) == 0 {
			b.WriteString("        exp_alerts: []\n")
			continue
		}
		b.WriteString("        exp_alerts:\n")
		sort.Slice(e.alerts, func(i, j int) bool { return fmt.Sprint(e.alerts[i].labels) < fmt.Sprint(e.alerts[j].labels) })
		for _, a := range e.alerts {
			b.WriteString("          - exp_labels: {")
			var ls []string
			for _, k := range slices.Sorted(maps.Keys(a.labels)) {
				ls = append(ls, fmt.Sprintf("%s: %q", k, a.labels[k]))
			}
			b.WriteString(strings.Join(ls, ", ") + "}\n            exp_annotations:\n")
			for _, k := range slices.Sorted(maps.Keys(a.annotations)) {
				fmt.Fprintf(&b, "              %s: %q\n", k, a.annotations[k])
			}
		}
	}
	return b.String()
}

func promDuration(d time.Duration) string {
	m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case s == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%ds", m, s)
}

// TestRules: the generated test file is up to date, and promtool passes
// the rules and their tests.
func TestRules(t *testing.T) {
	series := simulate(t)
	committed, _ := os.ReadFile(filepath.Join(rulesDir, rulesTestFile))
	want := rulesTest(series)
	if os.Getenv("UPDATE_RULES_TEST") != "" {
		if err := os.WriteFile(filepath.Join(rulesDir, rulesTestFile), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if string(committed) != want {
		t.Errorf("%s is stale: UPDATE_RULES_TEST=1 go test ./pingmesh -run Rules", rulesTestFile)
	}
	b, err := os.ReadFile(filepath.Join(rulesDir, "grdma-pingmesh.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range Families {
		names[f.Name] = true
		if f.Kind() == "histogram" {
			names[f.Name+"_bucket"] = true
		}
	}
	for _, n := range regexp.MustCompile(`\bgrdma_pingmesh_[a-z0-9_]+`).FindAllString(string(b), -1) {
		if !names[n] {
			t.Errorf("the rules use %s, which the collector does not export", n)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian package prometheus): rules not checked by it")
	}
	for _, args := range [][]string{{"check", "rules", "grdma-pingmesh.yml"}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
