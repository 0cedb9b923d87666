//go:build e2eguest

package guest

// TestFleetPingmeshBenchmark measures the pingmesh in the guests: node 1's
// exporter (--collector.pingmesh, the prober) probing 10 responders on
// nodes 2-4 (4, 3 and 3 per node on ports 18515...), its CPU at the
// default rate (1/s each) and per 1,000 probes at 20/s each, the CPU of
// one responder per 1,000 probes answered, and the exporter's resident
// memory; FIGURE lines. Run with E2E_PINGMESH_BENCH=1 (make bench), else
// skipped.

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// cpuTicks is a process's utime + stime in clock ticks (/proc/PID/stat).
func cpuTicks(stat string) (int, error) {
	// The command may hold spaces: fields count from after ")".
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ) in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	u, err1 := strconv.Atoi(f[11])
	s, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat %q", stat)
	}
	return u + s, nil
}

// clockTick is USER_HZ: 100 on Linux/amd64.
const clockTick = 100

func TestFleetPingmeshBenchmark(t *testing.T) {
	if os.Getenv("E2E_PINGMESH_BENCH") == "" {
		t.Skip("E2E_PINGMESH_BENCH not set")
	}
	f := withFleet(t, 4)
	var targets []string
	perNode := map[int]int{2: 4, 3: 3, 4: 3}
	for i := 2; i <= 4; i++ {
		nd := f.Node(i)
		for j := range perNode[i] {
			port := probePort + j
			pidFile := fmt.Sprintf("/tmp/responder-%d.pid", port)
			nd.on(t).WithTimeout(daemonLimit).Serve(port, layout.Sh, "-c", fmt.Sprintf("echo $$ > %s; exec %s -j probe %s serve :%d", pidFile, grdma(), f.Dev, port))
			targets = append(targets, fmt.Sprintf("%s:%d", nd.Name, port))
		}
	}
	responderCPU := func() int {
		r := f.Node(2).on(t).Must(layout.Sh, "-c", fmt.Sprintf("cat /proc/$(cat /tmp/responder-%d.pid)/stat", probePort))
		n, err := cpuTicks(r.stdout)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	dir := t.TempDir()
	mesh := dir + "/mesh.yml"
	os.WriteFile(mesh, []byte("- targets: ['"+strings.Join(targets, "', '")+"']\n"), 0o644)
	for _, c := range []struct {
		name   string
		rate   float64
		window time.Duration
	}{{"default rate (1/s each, 10 targets)", 1, 40 * time.Second}, {"20/s each, 10 targets", 20, 20 * time.Second}} {
		t.Run(strings.Fields(c.name)[0], func(t *testing.T) {
			exp := startDaemon(t, 10041, grdma(), "exporter", "--web.listen-address="+exporterAddr, "--collector.devices=false",
				"--collector.pingmesh", "--pingmesh.targets="+mesh, "--pingmesh.device="+f.Dev, fmt.Sprintf("--pingmesh.rate=%g", c.rate))
			sent := func() float64 {
				n, err := scrapeValues(exporterAddr, "grdma_pingmesh_sent_total")
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			// Warm up: every target answered.
			if !eventually(60*time.Second, func() bool { return sent() >= float64(len(targets)*3) }) {
				t.Fatalf("the prober never reached its targets:\n%s", exp.output())
			}
			statOf := func() int {
				n, err := cpuTicks(readFile(fmt.Sprintf("/proc/%d/stat", exp.pid())))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			p0, r0, s0 := statOf(), responderCPU(), sent()
			time.Sleep(c.window)
			p1, r1, s1 := statOf(), responderCPU(), sent()
			probes := s1 - s0
			proberCPU := float64(p1-p0) / clockTick
			t.Logf("FIGURE pingmesh guest %s: %.0f probes in %v; prober (exporter) CPU %.2f s = %.2f %% of a core, %.3f s per 1,000 probes",
				c.name, probes, c.window, proberCPU, 100*proberCPU/c.window.Seconds(), 1000*proberCPU/probes)
			// The responder on node2:18515 answered a tenth of them.
			respCPU := float64(r1-r0) / clockTick
			t.Logf("FIGURE pingmesh guest %s: one responder answered ~%.0f probes with %.2f s CPU = %.3f s per 1,000 probes, %.2f %% of a core",
				c.name, probes/float64(len(targets)), respCPU, 1000*respCPU/(probes/float64(len(targets))), 100*respCPU/c.window.Seconds())
			t.Logf("FIGURE pingmesh guest %s: exporter RSS %d KiB", c.name, rssKiB(t, exp.pid()))
		})
	}
}

// scrapeValues sums the values of family name in the exporter's metrics.
func scrapeValues(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum, nil
}
