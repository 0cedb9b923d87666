//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPairProbeServeBenchmark measures the responder (grdma probe DEV
// serve) on A with peers from B, for BENCHMARKS.md: its CPU time idle for
// 60 s; serving a 20 s bw send (the server's side waits for completions)
// with completion events and with GRDMA_PROBE_POLL=1 (every wait polled:
// the busy-polling baseline); per served test (20 traffic, 20 connect);
// and the bandwidth of 4 peers at once against one. It logs FIGURE lines
// and asserts only that every test passed. It runs with
// E2E_SERVE_BENCH=1 (make bench), else it is skipped.
func TestPairProbeServeBenchmark(t *testing.T) {
	if os.Getenv("E2E_SERVE_BENCH") == "" {
		t.Skip("E2E_SERVE_BENCH not set")
	}
	p := withPeer(t)
	kernel := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	// The responder on A (its PID printed first), with a time limit
	// past the benchmark's.
	var pid string
	serve := func(env string) *remoteCmd {
		srv := p.A.WithTimeout(15*time.Minute).Serve(probePort, "/bin/sh", "-c", "echo $$; "+env+" exec "+grdma()+" -j probe "+p.Dev+" serve peers 8")
		out, _ := srv.Output()
		pid, _, _ = strings.Cut(out, "\n")
		return srv
	}
	// cpu is the responder's CPU time so far (utime+stime, 10 ms ticks).
	cpu := func() time.Duration {
		f := strings.Fields(p.A.Must("cat", "/proc/"+pid+"/stat").stdout)
		u, _ := strconv.Atoi(f[13])
		s, _ := strconv.Atoi(f[14])
		return time.Duration(u+s) * 10 * time.Millisecond
	}
	client := func(args ...string) probeReport {
		r := run(grdma(), append([]string{"-j", "probe", p.Dev, "peer", p.PeerAddr}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		return parseProbeJSON(t, "client", r)
	}
	figure := func(format string, args ...any) { t.Logf("FIGURE %s: "+format, append([]any{kernel}, args...)...) }

	srv := serve("")
	c0 := cpu()
	time.Sleep(60 * time.Second)
	figure("responder idle 60 s: %v CPU", cpu()-c0)
	for _, n := range []struct {
		what string
		args []string
	}{{"traffic", []string{"traffic"}}, {"connect", nil}} {
		c0 = cpu()
		for range 20 {
			client(n.args...)
		}
		figure("responder CPU per served %s test: %v (20 tests)", n.what, (cpu()-c0)/20)
	}
	stopServe(t, srv)
	for _, mode := range []struct{ name, env string }{{"events", ""}, {"polling", "GRDMA_PROBE_POLL=1"}} {
		srv = serve(mode.env)
		c0 = cpu()
		rep := client("bw", "send", "size", "4096", "duration", "20s")
		figure("responder serving a 20 s bw send, %s: %v CPU, %.4f Gb/s", mode.name, cpu()-c0, rep.Results[0].BWGbps)
		stopServe(t, srv)
	}
	srv = serve("")
	one := client("bw", "write", "duration", "10s").Results[0].BWGbps
	var mu sync.Mutex
	var sum float64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "bw", "write", "duration", "10s")
			var rep probeReport
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || len(rep.Results) != 1 {
				t.Errorf("one of 4 peers:\n%s", r)
				return
			}
			mu.Lock()
			sum += rep.Results[0].BWGbps
			mu.Unlock()
		}()
	}
	wg.Wait()
	figure("bw write 10 s: one peer %.4f Gb/s, 4 peers at once %.4f Gb/s together (%s)", one, sum, fmt.Sprintf("%.2f", sum/one))
	stopServe(t, srv)
}
