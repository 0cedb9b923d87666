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
// 60 s (with completion events, and with GRDMA_PROBE_POLL=1, grdma's
// knob for the busy-polling baseline); serving a 20 s bw send (the
// server's side waits for every completion) with events and polled; per
// served test (20 traffic, 20 connect); and the bandwidth of 4 peers at
// once against one. It logs FIGURE lines and asserts only that every
// test passed. It runs with E2E_SERVE_BENCH=1 or SERVE_BENCH_OUT (make
// bench: the report's file), else it is skipped.
func TestPairProbeServeBenchmark(t *testing.T) {
	out := os.Getenv("SERVE_BENCH_OUT")
	if os.Getenv("E2E_SERVE_BENCH") == "" && out == "" {
		t.Skip("E2E_SERVE_BENCH and SERVE_BENCH_OUT not set")
	}
	p := withPeer(t)
	kernel := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	// The responder on A (its PID printed first), with a time limit
	// past the benchmark's.
	var pid string
	serve := func(env string) *remoteCmd {
		srv := p.A.WithTimeout(9*time.Minute).Serve(probePort, "/bin/sh", "-c", "echo $$; "+env+" exec "+grdma()+" -j probe "+p.Dev+" serve peers 8")
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
	var table strings.Builder
	table.WriteString("| measure | figure |\n|---|---:|\n")
	figure := func(what, format string, args ...any) {
		v := fmt.Sprintf(format, args...)
		t.Logf("FIGURE %s: %s: %s", kernel, what, v)
		fmt.Fprintf(&table, "| %s | %s |\n", what, v)
	}

	// Idle: polled first, then with events (that responder serves on).
	var srv *remoteCmd
	for _, mode := range []struct{ name, env string }{{"polling", "GRDMA_PROBE_POLL=1"}, {"events", ""}} {
		srv = serve(mode.env)
		c0 := cpu()
		time.Sleep(60 * time.Second)
		figure("responder idle 60 s, "+mode.name, "%v CPU", cpu()-c0)
		if mode.name == "polling" {
			stopServe(t, srv)
		}
	}
	for _, n := range []struct {
		what string
		args []string
	}{{"traffic", []string{"traffic"}}, {"connect", nil}} {
		c0 := cpu()
		for range 20 {
			client(n.args...)
		}
		figure("responder CPU per served "+n.what+" test (20 tests)", "%v", (cpu()-c0)/20)
	}
	stopServe(t, srv)
	for _, mode := range []struct{ name, env string }{{"events", ""}, {"polling", "GRDMA_PROBE_POLL=1"}} {
		srv = serve(mode.env)
		c0 := cpu()
		rep := client("bw", "send", "size", "4096", "duration", "20s")
		figure("responder serving a 20 s bw send (4 KiB), "+mode.name, "%v CPU, %.4f Gb/s", cpu()-c0, rep.Results[0].BWGbps)
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
	figure("bw write 10 s: 4 peers at once together / one peer", "%.4f / %.4f Gb/s = %.2f", sum, one, sum/one)
	stopServe(t, srv)
	if out != "" {
		report := fmt.Sprintf("kernel %s\n%s", kernel, table.String())
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
