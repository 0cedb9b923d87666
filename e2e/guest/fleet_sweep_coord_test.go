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

	manifests "github.com/grdma/grdma/deploy/kubernetes"
	"github.com/grdma/grdma/sweep"
	yaml "go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
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
	return coordCommand(t, append([]string{"-j", "sweep", "coordinate", "--svg", svg, "hosts", hostsFile, "out", records}, args...), svg, records)
}

// coordCommand runs grdma argv (a sweep coordinate that writes the SVG
// to svg, "" none, and its records to records, "" standard error).
func coordCommand(t *testing.T, argv []string, svg, records string) coordRun {
	t.Helper()
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
	if svg != "" {
		b, err := os.ReadFile(svg)
		if err == nil {
			err = wellFormed(b)
		}
		if err != nil {
			t.Errorf("--svg: %v", err)
		}
		r.svg = string(b)
	}
	if records == "" { // out /dev/stderr: the records among the progress lines
		r.records = filepath.Join(t.TempDir(), "sweep.jsonl")
		if err := os.WriteFile(r.records, []byte(r.res.stderr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The records it kept say the same to sweep report.
	again := run(grdma(), "-j", "sweep", "report", r.records)
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
		s += fmt.Sprintf("; %s limit %.3g (best %.3g, anchor %.3g, median %.3g, relaxed %v)", th.Metric, th.Limit, th.Best, th.Anchor, th.Median, th.Relaxed)
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
		if strings.Contains(r.svg, svgVerdict) || (strings.Contains(r.svg, svgBad) && !onlyUnconfirmed(r.rep)) {
			t.Errorf("run %d: the heatmap shows a verdict, or a pair beyond the limit its retest did not clear", i)
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

// TestFleetSweepCoordDeploy: the coordinated sweep as
// deploy/kubernetes/sweep-coordinate.yaml runs it against the DaemonSet:
// responders that take only clients holding the shared secret, exporters
// on 10042 that want basic auth (--web.config.file) and serve the
// manifest's /probe modules (naming the secret), and the Job's command
// word for word, its host list and credentials where the Job mounts
// them. A healthy fleet: no verdict. Without the credentials every
// exporter refuses and the coordinator says what to give.
func TestFleetSweepCoordDeploy(t *testing.T) {
	f := withFleet(t, 4)
	if out := run(grdma(), "exporter", "--help"); !strings.Contains(out.stdout+out.stderr, "--probe.max-concurrent") {
		t.Skip("this grdma exporter has no /probe (issue 26's prober): the coordinated sweep drives /probe")
	}
	docs := strings.Split(manifests.SweepCoordinate, "\n---\n")
	var probeCM struct {
		Data map[string]string `yaml:"data"`
	}
	var job struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Command []string `yaml:"command"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	for _, d := range docs {
		switch {
		case strings.Contains(d, "name: grdma-sweep-probe\n"):
			if err := yaml.Unmarshal([]byte(d), &probeCM); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(d, "kind: Job\n"):
			if err := yaml.Unmarshal([]byte(d), &job); err != nil {
				t.Fatal(err)
			}
		}
	}
	probeYML := probeCM.Data["probe.yml"]
	words := job.Spec.Template.Spec.Containers[0].Command
	if probeYML == "" || len(words) < 4 {
		t.Fatalf("the manifest's probe.yml or Job command not found")
	}
	const key = "0123456789abcdef0123456789abcdef" // the grdma-probe-key Secret
	hash, err := bcrypt.GenerateFromPassword([]byte("sweep-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// What the DaemonSet mounts on every node.
	if errs := f.each(func(nd *node) error {
		r, err := nd.exec(30*time.Second, fmt.Sprintf("mkdir -p /etc/grdma/key /etc/grdma/probe && umask 077 && printf '%%s' '%s' > /etc/grdma/key/probe.key && "+
			"printf '%%s' '%s' > /etc/grdma/probe/probe.yml && printf 'basic_auth_users:\\n  sweep: %s\\n' > /etc/grdma/web.yml", key, probeYML, hash))
		if err == nil && r.code != 0 {
			err = fmt.Errorf("%s", r)
		}
		return err
	}); errs != "" {
		t.Fatal(errs)
	}
	for _, nd := range f.Nodes() {
		nd.on(t).WithTimeout(coordDaemonLimit).Serve(probePort, grdma(), "probe", f.Dev, "serve", "auth", "/etc/grdma/key/probe.key")
		nd.on(t).WithTimeout(coordDaemonLimit).Serve(10042, grdma(), "exporter", "--web.listen-address=:10042", "--collector.devices=false",
			"--probe.config.file=/etc/grdma/probe/probe.yml", "--web.config.file=/etc/grdma/web.yml")
	}
	// What the Job mounts: the host list and the credentials.
	for _, d := range []string{"/etc/grdma-sweep/hosts", "/etc/grdma-sweep/auth"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile("/etc/grdma-sweep/hosts/hosts", []byte("node[1-4]\n"), 0o644)
	os.WriteFile("/etc/grdma-sweep/auth/password", []byte("sweep-secret\n"), 0o400)
	os.WriteFile("/etc/grdma-sweep/auth/http.yml", []byte("basic_auth:\n  username: sweep\n  password_file: password\n"), 0o400)
	t.Cleanup(func() { os.RemoveAll("/etc/grdma-sweep") })

	argv := append(append([]string{"-j"}, words[1:]...), fleetTests...)
	r := coordCommand(t, argv, "", "")
	if r.res.code != 0 || !r.rep.OK || len(r.rep.Pairs) != 6 || r.rep.Missing != 0 {
		t.Fatalf("want no verdict over every pair:\n%s", r.res)
	}
	t.Logf("the Job's command %q: %s", words, r.figures())

	// Without the credentials: refused by every exporter, each node
	// unreachable, the fix named.
	var noAuth []string
	for i := 1; i < len(words); i++ {
		if words[i] == "http-config" {
			i++
			continue
		}
		noAuth = append(noAuth, words[i])
	}
	r = coordCommand(t, append(append([]string{"-j"}, noAuth...), fleetTests...), "", "")
	if r.res.code != 1 || !strings.Contains(r.res.stderr, "refused the credentials (HTTP 401): give http-config FILE") || len(r.rep.Verdicts) != 4 {
		t.Errorf("without credentials: want every node unreachable and the fix named:\n%s", r.res)
	}
}
