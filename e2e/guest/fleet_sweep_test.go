//go:build e2eguest

package guest

// grdma sweep run in launched mode across the fleet (issue 27): every
// node runs `grdma sweep run` at once, as a launcher would start it, with
// the host list in Slurm's syntax (node[1-8], resolved through
// /etc/hosts) and its rank from its own place in the list; then `grdma
// sweep report` over every node's records. A healthy fleet gives no
// verdict three runs in a row; a node throttled with tc gives a node
// verdict for it alone; one impaired path a link verdict for that pair
// alone; a node without its rxe device is unreachable.

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
)

// fleetSweepSize is the scenarios' fleet: at least 8 (the bed).
const fleetSweepSize = 8

// The fleet's tests are short: eight guests share two cores, and a test's
// setup (a queue pair, its memory registered) takes seconds there. 4 KiB
// messages keep a bw test's 128 in flight at 512 KiB, which a link limited
// to 4 Mb/s drains in a second.
var (
	fleetTests   = []string{"size", "4096", "duration", "500ms"}
	fleetBWTests = []string{"bw", "size", "4096", "duration", "500ms"}
)

// fleetSweep runs grdma sweep run on every node of the fleet at once and
// returns each node's result (its records on standard output).
func fleetSweep(t *testing.T, f *fleet, args ...string) []result {
	t.Helper()
	res, _ := sweepOn(t, f.Nodes(), args...)
	return res
}

// sweepOn runs grdma sweep run on nodes at once, the host list naming
// them in that order (Slurm's syntax when they are node1..nodeN), and
// returns each node's result and the time from the first start to the
// last exit, seen from here.
func sweepOn(t *testing.T, nodes []*node, args ...string) ([]result, time.Duration) {
	t.Helper()
	var names []string
	for _, nd := range nodes {
		names = append(names, nd.Name)
	}
	hosts := strings.Join(names, "\n") + "\n"
	contiguous := true
	for k, nd := range nodes {
		contiguous = contiguous && nd.N == k+1
	}
	if contiguous {
		hosts = fmt.Sprintf("node[1-%d]\n", len(nodes)) // node1..nodeN
	}
	const hostsFile = "/tmp/sweep-fleet-hosts"
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := nd.exec(30*time.Second, fmt.Sprintf("printf '%%s' '%s' > %s", hosts, hostsFile))
			if err == nil && r.code != 0 {
				err = fmt.Errorf("%s", r)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	res := make([]result, len(nodes))
	begin := time.Now()
	for i, nd := range nodes {
		c := nd.on(t).WithTimeout(4*time.Minute).Start(grdma(), append([]string{"sweep", "run", nodes[0].f.Dev, "hosts", hostsFile}, args...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = c.Wait()
		}()
	}
	wg.Wait()
	return res, time.Since(begin)
}

// fleetRetest runs the retest a first pass's report asks for, as an
// operator would: grdma -j sweep report over every node's records, that
// JSON on every node, grdma sweep run DEV confirm FILE on every node at
// once. It returns each node's records of both runs, the first pass's
// then the retest's, as sweep report takes them.
func fleetRetest(t *testing.T, f *fleet, res []result) []result {
	t.Helper()
	files := writeRecords(t, t.TempDir(), res)
	js := run(grdma(), append([]string{"-j", "sweep", "report"}, files...)...)
	if js.code != 0 && js.code != 1 {
		t.Fatalf("the first pass's report:\n%s", js)
	}
	const report = "/tmp/sweep-report.json"
	b64 := base64.StdEncoding.EncodeToString([]byte(js.stdout))
	if msg := f.each(func(nd *node) error {
		r, err := nd.exec(30*time.Second, fmt.Sprintf("echo %s | base64 -d > %s", b64, report))
		if err == nil && r.code != 0 {
			err = fmt.Errorf("%s", r)
		}
		return err
	}); msg != "" {
		t.Fatalf("copying the report to the nodes: %s", msg)
	}
	nodes := f.Nodes()
	retest := make([]result, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		c := nd.on(t).WithTimeout(4*time.Minute).Start(grdma(), "sweep", "run", f.Dev, "confirm", report)
		wg.Add(1)
		go func() {
			defer wg.Done()
			retest[i] = c.Wait()
		}()
	}
	wg.Wait()
	out := make([]result, len(res))
	for i := range res {
		if retest[i].code == -1 || !strings.Contains(retest[i].stderr, "retest of ") {
			t.Fatalf("node%d's retest:\n%s", i+1, retest[i])
		}
		out[i] = res[i]
		out[i].stdout += retest[i].stdout
		out[i].stderr += retest[i].stderr
	}
	return out
}

// retested counts the pairs a report judged by their retest, and those
// the retest cleared.
func retested(rep *sweep.Report) (n, cleared int) {
	for _, p := range rep.Pairs {
		if p.Retested {
			n++
		}
		if p.Cleared {
			cleared++
		}
	}
	return n, cleared
}

// writeRecords writes each node's records (its standard output) to
// DIR/nodeN.jsonl and returns the files' names.
func writeRecords(t *testing.T, dir string, res []result) []string {
	t.Helper()
	var files []string
	for i, r := range res {
		name := filepath.Join(dir, fmt.Sprintf("node%d.jsonl", i+1))
		if err := os.WriteFile(name, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	return files
}

// fleetReport writes every node's records to a file and runs grdma sweep
// report over them, with an SVG heatmap; it returns the text report and
// the JSON one.
func fleetReport(t *testing.T, res []result) (text result, rep *sweep.Report, svg string) {
	t.Helper()
	dir := t.TempDir()
	files := writeRecords(t, dir, res)
	text = run(grdma(), append([]string{"sweep", "report", "--svg", filepath.Join(dir, "sweep.svg")}, files...)...)
	var recs []sweep.Record
	for i, r := range res {
		got, _, err := sweep.ReadRecords(strings.NewReader(r.stdout), fmt.Sprintf("node%d", i+1))
		if err != nil {
			t.Fatalf("node%d's records: %v\n%s", i+1, err, r)
		}
		recs = append(recs, got...)
	}
	rep, err := sweep.Build(recs, sweep.DefaultCriteria)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, text)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.svg"))
	if err == nil {
		err = wellFormed(b)
	}
	if err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("--svg: %v\n%s", err, b)
	}
	return text, rep, string(b)
}

func verdictList(rep *sweep.Report) string {
	var s []string
	for _, v := range rep.Verdicts {
		s = append(s, string(v.Kind)+" "+strings.Join(v.Nodes, ","))
	}
	return strings.Join(s, "; ")
}

// sweepFigures sums up a run for the log: the spread of bandwidths, the
// limit, each node's wall time and one pair's time.
func sweepFigures(t *testing.T, res []result, rep *sweep.Report) string {
	t.Helper()
	var walls, pairs []float64
	pair := 0.0
	for i, r := range res {
		recs, _, _ := sweep.ReadRecords(strings.NewReader(r.stdout), fmt.Sprint(i))
		perRound := map[int]float64{}
		for _, rec := range recs {
			if rec.Start != nil && rec.Start.Pass != "" {
				break // a retest's records follow: the figures are the first pass's
			}
			if rec.End != nil {
				walls = append(walls, rec.End.Seconds)
			}
			if rec.Test != nil {
				perRound[rec.Test.Round] += rec.Test.Seconds
			}
		}
		for _, s := range perRound {
			pair = max(pair, s)
			pairs = append(pairs, s)
		}
	}
	slices.Sort(pairs)
	var lo, hi float64
	if rep.BW != nil {
		for i, row := range rep.BW.Cells {
			for j, c := range row {
				if i != j && c.Value != nil && c.State == sweep.StateOK {
					if lo == 0 || *c.Value < lo {
						lo = *c.Value
					}
					hi = max(hi, *c.Value)
				}
			}
		}
	}
	s := fmt.Sprintf("healthy bw %.3g–%.3g Gb/s (×%.1f)", lo, hi, hi/max(lo, 1e-9))
	for _, th := range rep.Thresholds {
		s += fmt.Sprintf("; %s limit %.3g (best %.3g, anchor %.3g, median %.3g, relaxed %v)", th.Metric, th.Limit, th.Best, th.Anchor, th.Median, th.Relaxed)
	}
	if len(walls) > 0 && len(pairs) > 0 {
		med := pairs[len(pairs)/2]
		s += fmt.Sprintf("; wall %.1f–%.1fs; a pair's tests %.1fs median, %.1fs longest; (N-1)× those %.1fs, %.1fs",
			minOf(walls), maxOf(walls), med, pair, float64(len(res)-1)*med, float64(len(res)-1)*pair)
	}
	return s
}

// TestFleetSweepHealthy: a healthy fleet gives no verdict, three runs in
// a row, after the retest a first pass asks for (as sweep coordinate's
// does); every node passes every test; ranks come from each node's place
// in the list.
func TestFleetSweepHealthy(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	for run := 1; run <= 3; run++ {
		res := fleetSweep(t, f, fleetTests...)
		for i, r := range res {
			if r.code != 0 {
				t.Fatalf("run %d, node%d:\n%s", run, i+1, r)
			}
			if !strings.Contains(r.stderr, fmt.Sprintf("rank %d of %d (host list)", i, f.Size())) {
				t.Errorf("run %d, node%d: rank from the host list:\n%s", run, i+1, r.stderr)
			}
		}
		text, rep, svg := fleetReport(t, res)
		retest := ""
		if rep.Confirm != nil {
			// As an operator would: what the first pass flagged, retested.
			retest = fmt.Sprintf("; the first pass flagged %d pairs (verdicts %q%s), retested", len(rep.Confirm.Pairs()), verdictList(rep), suspects(rep))
			res = fleetRetest(t, f, res)
			text, rep, svg = fleetReport(t, res)
		}
		if text.code != 0 || !rep.OK || len(rep.Pairs) != f.Size()*(f.Size()-1)/2 || rep.Missing != 0 {
			t.Fatalf("run %d: want no verdict over every pair%s:\n%s", run, retest, text)
		}
		if strings.Contains(svg, svgVerdict) || (strings.Contains(svg, svgBad) && !onlyUnconfirmed(rep)) {
			t.Errorf("run %d: the heatmap shows a verdict, or a pair beyond the limit that is not a suspect one:\n%s", run, svg)
		}
		t.Logf("run %d: %s%s%s", run, sweepFigures(t, res, rep), suspects(rep), retest)
	}
}

// TestFleetSweepSlowNode: one node throttled (netem rate both ways on its
// eth0): the first pass flags its pairs, and after the retest the report
// asks for (sweep run confirm), a node verdict for it and no other. One
// pass alone is not the verdict: eight guests on two cores spread a
// healthy pair's bandwidth so far that CI's first pass once put a healthy
// pair beyond the limit both ways (node3–node6 at 0.034 and 0.030 Gb/s,
// the median 0.14), a link verdict that its retest would have cleared.
func TestFleetSweepSlowNode(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	bad := f.Node(5)
	bad.Netem(t, "rate", "4mbit")
	bad.NetemIngress(t, "rate", "4mbit")
	res := fleetSweep(t, f, fleetBWTests...)
	first, pass1, _ := fleetReport(t, res)
	if pass1.Confirm == nil {
		t.Fatalf("the first pass asks for no retest:\n%s", first.stdout)
	}
	res = fleetRetest(t, f, res)
	text, rep, svg := fleetReport(t, res)
	if rep.Missing != 0 {
		t.Errorf("%d planned tests without a record", rep.Missing)
	}
	if text.code != 1 || verdictList(rep) != "node "+bad.Name {
		t.Fatalf("want a node verdict for %s alone after the retest, got %q (first pass: %q):\n%s", bad.Name, verdictList(rep), verdictList(pass1), text.stdout)
	}
	if n, _ := retested(rep); n < f.Size()-1 || rep.Confirm != nil {
		t.Errorf("%d pairs retested, want %s's %d at least; confirm again: %v", n, bad.Name, f.Size()-1, rep.Confirm != nil)
	}
	if !strings.Contains(svg, svgBad) || !strings.Contains(svg, svgVerdict) {
		t.Errorf("the heatmap shows no pair beyond the limit or no node with a verdict:\n%s", svg)
	}
	n, cleared := retested(rep)
	t.Logf("%s: %s; first pass %q, %d pairs retested, %d cleared; %s\n%s", bad.Name, rep.Verdicts[0].Reason, verdictList(pass1), n, cleared, sweepFigures(t, res, rep), text.stdout)
}

// TestFleetSweepBadPath: one path impaired (netem on the two directions
// between two nodes only): after the retest, a link verdict for that pair
// and no other.
func TestFleetSweepBadPath(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	a, b := f.Node(2), f.Node(7)
	f.ImpairPath(t, a, b, "rate", "4mbit")
	res := fleetSweep(t, f, fleetBWTests...)
	first, pass1, _ := fleetReport(t, res)
	if pass1.Confirm == nil {
		t.Fatalf("the first pass asks for no retest:\n%s", first.stdout)
	}
	res = fleetRetest(t, f, res)
	text, rep, svg := fleetReport(t, res)
	if rep.Missing != 0 {
		t.Errorf("%d planned tests without a record", rep.Missing)
	}
	if text.code != 1 || verdictList(rep) != "link "+a.Name+","+b.Name {
		t.Fatalf("want a link verdict for %s–%s alone after the retest, got %q (first pass: %q):\n%s", a.Name, b.Name, verdictList(rep), verdictList(pass1), text.stdout)
	}
	if n, _ := retested(rep); n < 1 || rep.Confirm != nil {
		t.Errorf("%d pairs retested; confirm again: %v", n, rep.Confirm != nil)
	}
	if !strings.Contains(svg, svgBad) || !strings.Contains(svg, svgLink) {
		t.Errorf("the heatmap shows no pair beyond the limit or no link outlined:\n%s", svg)
	}
	t.Logf("%s\n%s", sweepFigures(t, res, rep), text.stdout)
}

// TestFleetSweepNoRxe: a node whose rxe device is gone takes part by
// refusing every pair; the report calls it unreachable, its device's
// error given, and no other node.
func TestFleetSweepNoRxe(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	gone := f.Node(3)
	gone.DeleteRxe(t)
	begin := time.Now()
	res := fleetSweep(t, f, fleetBWTests...)
	took := time.Since(begin)
	text, rep, svg := fleetReport(t, res)
	if text.code != 1 || verdictList(rep) != "unreachable "+gone.Name || !strings.Contains(rep.Verdicts[0].Reason, "its device failed at start") {
		t.Fatalf("want %s unreachable alone, its device named, got %q:\n%s", gone.Name, verdictList(rep), text.stdout)
	}
	if !strings.Contains(svg, svgVerdict) {
		t.Errorf("the heatmap labels no node with a verdict:\n%s", svg)
	}
	// Every node had a pair refused: each exits 1.
	for i, r := range res {
		if r.code != 1 {
			t.Errorf("node%d: exit %d, want 1", i+1, r.code)
		}
	}
	t.Logf("%s in %.0fs: %s; %s\n%s", gone.Name, took.Seconds(), rep.Verdicts[0].Reason, sweepFigures(t, res, rep), text.stdout)
}

// TestFleetSweepBenchmark measures what issue 27's BENCHMARKS.md figures
// need, on every guest the fleet booted (E2E_FLEET_SIZE, 10 for N = 10):
// the launched sweep's wall time for N = 4, 8 and 10 against N-1 times one
// pair's tests and against the same pairs run one after another (each a
// sweep of two nodes alone), and the quick mode's wall time. It runs with
// E2E_SWEEP_BENCH=1 (make bench), else it is skipped; it logs FIGURE lines.
func TestFleetSweepBenchmark(t *testing.T) {
	if os.Getenv("E2E_SWEEP_BENCH") == "" {
		t.Skip("E2E_SWEEP_BENCH not set")
	}
	f := withFleet(t, allGuests)
	kernel := strings.TrimSpace(run("/bin/uname", "-r").stdout)
	figure := func(format string, args ...any) { t.Logf("FIGURE %s: "+format, append([]any{kernel}, args...)...) }
	nodes := f.Nodes()

	// Every pair of the first eight alone, one after another: a pair's
	// time (its tests, as its nodes recorded them) and each pair's whole
	// two-node sweep. (For N = 10 the sum is the N = 8 pairs' mean times
	// 45: the machine's time is short.)
	type alone struct{ tests, sweep float64 }
	pairs := map[[2]int]alone{}
	seqN := min(len(nodes), 8)
	for i := range seqN {
		for j := i + 1; j < seqN; j++ {
			res, took := sweepOn(t, []*node{nodes[i], nodes[j]}, fleetTests...)
			for k, r := range res {
				if r.code != 0 {
					t.Fatalf("%s and %s alone, %s:\n%s", nodes[i].Name, nodes[j].Name, nodes[[]int{i, j}[k]].Name, r)
				}
			}
			pairs[[2]int{i, j}] = alone{tests: testSeconds(t, res), sweep: took.Seconds()}
		}
	}
	for _, n := range []int{4, 8, 10} {
		if n > len(nodes) {
			continue
		}
		var seqTests, seqSweeps []float64
		for k, a := range pairs {
			if k[1] < n {
				seqTests = append(seqTests, a.tests)
				seqSweeps = append(seqSweeps, a.sweep)
			}
		}
		pair := median(seqTests)
		npairs := n * (n - 1) / 2
		seqT, seqS := sum(seqTests), sum(seqSweeps)
		if len(seqTests) < npairs { // extrapolated from the pairs measured
			seqT, seqS = seqT/float64(len(seqTests))*float64(npairs), seqS/float64(len(seqSweeps))*float64(npairs)
		}
		res, took := sweepOn(t, nodes[:n], fleetTests...)
		_, rep, _ := fleetReport(t, res)
		wall := 0.0
		for i, r := range res {
			if r.code != 0 {
				t.Fatalf("all-pairs of %d, node%d:\n%s", n, i+1, r)
			}
			wall = max(wall, endSeconds(t, r))
		}
		qres, qtook := sweepOn(t, nodes[:n], append([]string{"quick"}, fleetTests...)...)
		qwall := 0.0
		for i, r := range qres {
			if r.code != 0 {
				t.Fatalf("quick of %d, node%d:\n%s", n, i+1, r)
			}
			qwall = max(qwall, endSeconds(t, r))
		}
		figure("sweep_wall_s n=%d rounds=%d wall=%.1f driver=%.1f pair_alone_median=%.2f n_minus_1_x_pair=%.1f ratio=%.2f sequential_tests=%.1f sequential_sweeps=%.1f pairs=%d verdicts=%d",
			n, len(rep.Params.Rounds().Rounds), wall, took.Seconds(), pair, float64(n-1)*pair, wall/(float64(n-1)*pair),
			seqT, seqS, len(seqTests), len(rep.Verdicts))
		figure("sweep_quick_wall_s n=%d rounds=%d wall=%.1f driver=%.1f", n, len(sweep.Quick(n).Rounds), qwall, qtook.Seconds())
		figure("sweep_spread n=%d %s", n, sweepFigures(t, res, rep))
	}
}

// testSeconds is a pair's time for its tests: the longer of its two
// nodes' sums.
func testSeconds(t *testing.T, res []result) float64 {
	t.Helper()
	longest := 0.0
	for i, r := range res {
		recs, _, err := sweep.ReadRecords(strings.NewReader(r.stdout), fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		s := 0.0
		for _, rec := range recs {
			if rec.Test != nil {
				s += rec.Test.Seconds
			}
		}
		longest = max(longest, s)
	}
	return longest
}

// endSeconds is a node's time from its start to its end record.
func endSeconds(t *testing.T, r result) float64 {
	t.Helper()
	recs, _, err := sweep.ReadRecords(strings.NewReader(r.stdout), r.cmd)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].End == nil {
		t.Fatalf("no end record (%v):\n%s", err, r)
	}
	return recs[len(recs)-1].End.Seconds
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// wellFormed reads b as XML to its end.
func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// How the heatmap marks a pair beyond the limit (or failed), a node with
// a verdict, and a link verdict's pair (render.SweepSVG).
const (
	svgBad     = `class="bad"`
	svgVerdict = `class="verdict"`
	svgLink    = `class="link"`
)

// onlyUnconfirmed reports whether every pair with a test beyond the
// limits is a suspect one (one test beyond a relaxed limit, its others
// within) or one its retest cleared: cells the heatmap marks while the
// report has no verdict.
func onlyUnconfirmed(rep *sweep.Report) bool {
	for _, p := range rep.Pairs {
		if p.Bad || (len(p.Reasons) > 0 && !p.Suspect && !p.Cleared) {
			return false
		}
	}
	return true
}

// suspects lists the report's suspect pairs for the log ("" if none).
func suspects(rep *sweep.Report) string {
	var s []string
	for _, p := range rep.Pairs {
		if p.Suspect {
			s = append(s, fmt.Sprintf("%s–%s (%s)", p.A, p.B, strings.Join(p.Reasons, "; ")))
		}
	}
	if len(s) == 0 {
		return ""
	}
	return "; suspect, no verdict: " + strings.Join(s, ", ")
}
