//go:build e2eguest

package guest

// grdma sweep coordinate across the fleet (issue 27's coordinated mode):
// every node runs what the DaemonSet or the units run there, a responder
// (grdma probe DEV serve) and grdma exporter with its /probe; node 1
// alone runs grdma sweep coordinate, which drives every pair through the
// exporters, retests what it flags and prints the report. The same
// faults as the launched scenarios, with the same verdicts wanted: none
// on a healthy fleet three runs in a row, a node verdict for a throttled
// node, a link verdict for one impaired path, unreachable for a node
// without its rxe device.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
)

// coordExporterPort is the exporters' port (grdma exporter's default).
const coordExporterPort = 10041

// coordDaemonLimit is how long the agents let a scenario's responders
// and exporters run (a command's default is a minute).
const coordDaemonLimit = 10 * time.Minute

// startCoordFleet starts a responder and an exporter on every node of f,
// the responder left out where noResponder says, and writes the host
// list on node 1.
func startCoordFleet(t *testing.T, f *fleet, noResponder map[int]bool) (hostsFile string) {
	t.Helper()
	if out := run(grdma(), "exporter", "--help"); !strings.Contains(out.stdout+out.stderr, "--probe.max-concurrent") {
		t.Skip("this grdma exporter has no /probe (issue 26's prober): the coordinated sweep drives /probe")
	}
	for _, nd := range f.Nodes() {
		if !noResponder[nd.N] {
			nd.on(t).WithTimeout(coordDaemonLimit).Serve(probePort, grdma(), "probe", f.Dev, "serve")
		}
		nd.on(t).WithTimeout(coordDaemonLimit).Serve(coordExporterPort, grdma(), "exporter",
			fmt.Sprintf("--web.listen-address=:%d", coordExporterPort), "--collector.devices=false")
	}
	hostsFile = filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte(fmt.Sprintf("node[1-%d]\n", f.Size())), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostsFile
}

// coordRun is one coordinated sweep: its output, report and SVG, the
// records it kept, and what the coordinator cost.
type coordRun struct {
	res       result
	rep       *sweep.Report
	svg       string
	records   string
	wall      time.Duration
	cpu       time.Duration // user + system
	maxRSSKiB int64
}

// coordSweep runs grdma -j sweep coordinate here, on node 1, with args
// after the host list.
func coordSweep(t *testing.T, hostsFile string, args ...string) coordRun {
	t.Helper()
	dir := t.TempDir()
	svg, records := filepath.Join(dir, "sweep.svg"), filepath.Join(dir, "sweep.jsonl")
	argv := append([]string{"-j", "sweep", "coordinate", "--svg", svg, "hosts", hostsFile, "out", records}, args...)
	cmd := exec.Command(grdma(), argv...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(6 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("sweep coordinate still running after 6 minutes:\n%s", stderr.String())
	}
	r := coordRun{wall: time.Since(begin), records: records,
		res: result{cmd: "grdma " + strings.Join(argv, " "), stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.maxRSSKiB = ru.Maxrss
	}
	var rep sweep.Report
	if err := json.Unmarshal([]byte(r.res.stdout), &rep); err != nil {
		t.Fatalf("the JSON report: %v\n%s", err, r.res)
	}
	r.rep = &rep
	b, err := os.ReadFile(svg)
	if err == nil {
		err = wellFormed(b)
	}
	if err != nil {
		t.Errorf("--svg: %v", err)
	}
	r.svg = string(b)
	// The records it kept say the same to sweep report.
	again := run(grdma(), "-j", "sweep", "report", records)
	var rep2 sweep.Report
	if err := json.Unmarshal([]byte(again.stdout), &rep2); err != nil || verdictList(&rep2) != verdictList(&rep) || again.code != r.res.code {
		t.Errorf("sweep report over the records kept: %v, %q (exit %d), the run said %q (exit %d)\n%s",
			err, verdictList(&rep2), again.code, verdictList(&rep), r.res.code, again)
	}
	return r
}

// figures sums up a run for the log.
func (r coordRun) figures() string {
	retested := 0
	for _, p := range r.rep.Pairs {
		if p.Retested {
			retested++
		}
	}
	s := fmt.Sprintf("coordinator: wall %.1fs, CPU %.2fs, max RSS %d KiB; %d pairs retested", r.wall.Seconds(), r.cpu.Seconds(), r.maxRSSKiB, retested)
	for _, th := range r.rep.Thresholds {
		s += fmt.Sprintf("; %s limit %.3g (best %.3g, median %.3g, relaxed %v)", th.Metric, th.Limit, th.Best, th.Median, th.Relaxed)
	}
	return s
}

// textReport is the run's report as text, for the log.
func (r coordRun) textReport(t *testing.T) string {
	t.Helper()
	return run(grdma(), "sweep", "report", r.records).stdout
}

// TestFleetSweepCoordHealthy: a healthy fleet gives no verdict, three
// coordinated runs in a row; every pair judged, every test passed.
func TestFleetSweepCoordHealthy(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	hosts := startCoordFleet(t, f, nil)
	for i := 1; i <= 3; i++ {
		r := coordSweep(t, hosts, fleetTests...)
		if r.res.code != 0 || !r.rep.OK || len(r.rep.Pairs) != f.Size()*(f.Size()-1)/2 || r.rep.Missing != 0 {
			t.Fatalf("run %d: want no verdict over every pair:\n%s\n%s", i, r.res, r.textReport(t))
		}
		if strings.Contains(r.svg, svgBad) || strings.Contains(r.svg, svgVerdict) {
			t.Errorf("run %d: the heatmap shows a pair beyond the limit or a verdict", i)
		}
		t.Logf("run %d: %s", i, r.figures())
		t.Logf("FIGURE sweep_coordinated n=%d wall_s=%.1f cpu_s=%.2f max_rss_kib=%d", f.Size(), r.wall.Seconds(), r.cpu.Seconds(), r.maxRSSKiB)
	}
}

// TestFleetSweepCoordSlowNode: one node throttled both ways: a node
// verdict for it and no other, after its pairs were retested.
func TestFleetSweepCoordSlowNode(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	hosts := startCoordFleet(t, f, nil)
	bad := f.Node(5)
	bad.Netem(t, "rate", "4mbit")
	bad.NetemIngress(t, "rate", "4mbit")
	r := coordSweep(t, hosts, fleetBWTests...)
	if r.res.code != 1 || verdictList(r.rep) != "node "+bad.Name {
		t.Fatalf("want a node verdict for %s alone, got %q:\n%s\n%s", bad.Name, verdictList(r.rep), r.res.stderr, r.textReport(t))
	}
	if !strings.Contains(r.res.stderr, "confirming:") || !strings.Contains(r.svg, svgVerdict) {
		t.Errorf("no retest, or no verdict on the heatmap:\n%s", r.res.stderr)
	}
	t.Logf("%s\n%s", r.figures(), r.textReport(t))
}

// TestFleetSweepCoordBadPath: one path impaired: a link verdict for that
// pair alone.
func TestFleetSweepCoordBadPath(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	hosts := startCoordFleet(t, f, nil)
	a, b := f.Node(2), f.Node(7)
	f.ImpairPath(t, a, b, "rate", "4mbit")
	r := coordSweep(t, hosts, fleetBWTests...)
	if r.res.code != 1 || verdictList(r.rep) != "link "+a.Name+","+b.Name {
		t.Fatalf("want a link verdict for %s–%s alone, got %q:\n%s\n%s", a.Name, b.Name, verdictList(r.rep), r.res.stderr, r.textReport(t))
	}
	if !strings.Contains(r.svg, svgLink) {
		t.Errorf("the heatmap outlines no link")
	}
	t.Logf("%s\n%s", r.figures(), r.textReport(t))
}

// TestFleetSweepCoordNoRxe: a node whose rxe device is gone (and with it
// its responder; its exporter still runs): unreachable, and no other
// node blamed.
func TestFleetSweepCoordNoRxe(t *testing.T) {
	f := withFleet(t, fleetSweepSize)
	gone := f.Node(3)
	gone.DeleteRxe(t)
	hosts := startCoordFleet(t, f, map[int]bool{gone.N: true})
	r := coordSweep(t, hosts, fleetBWTests...)
	if r.res.code != 1 || verdictList(r.rep) != "unreachable "+gone.Name {
		t.Fatalf("want %s unreachable alone, got %q:\n%s\n%s", gone.Name, verdictList(r.rep), r.res.stderr, r.textReport(t))
	}
	t.Logf("%s: %s; %s", gone.Name, r.rep.Verdicts[0].Reason, r.figures())
}
