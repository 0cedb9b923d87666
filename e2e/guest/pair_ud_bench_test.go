//go:build e2eguest

package guest

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
)

// TestPairUDPingBenchmark measures grdma's UD ping against
// ibv_ud_pingpong in the same two guests, for BENCHMARKS.md: 9 rounds,
// interleaved, of 200 round trips of 64 bytes each, one outstanding (an
// ibv_ud_pingpong -n 200 -s 64 server on A and its client here; a prober
// here pinging the responder on A, Ping after Ping), the tool that goes
// first alternating from round to round; the ratio of the medians of the
// rounds and the median of the rounds' own ratios (the bed drifts from
// round to round by more than the gap between the tools); with completion
// events on both tools (ibv_ud_pingpong -e), then polled on both. It also
// takes the CPU time of the prober (this process) and of the responder
// (grdma probe DEV serve on A) per 1,000 probes. It logs FIGURE lines and
// asserts only that everything was answered. It runs with E2E_UD_BENCH=1,
// else it is skipped.
func TestPairUDPingBenchmark(t *testing.T) {
	if os.Getenv("E2E_UD_BENCH") == "" {
		t.Skip("E2E_UD_BENCH not set")
	}
	p := withPeer(t)
	kernel := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	for _, polled := range []bool{false, true} {
		udPingBench(t, p, kernel, polled)
	}
}

// udPingBench runs the rounds of one mode, the same for both tools:
// completion events (what the pingmesh runs; ibv_ud_pingpong -e), or
// every wait polled (GRDMA_PROBE_POLL=1 on both sides of grdma;
// ibv_ud_pingpong's default).
func udPingBench(t *testing.T, p *pair, kernel string, polled bool) {
	const rounds, n, size = 9, 200, 64
	mode, env, toolName := "events", "", "ibv_ud_pingpong -e"
	if polled {
		mode, env, toolName = "polled", "GRDMA_PROBE_POLL=1 ", "ibv_ud_pingpong"
	}
	figure := func(format string, args ...any) {
		t.Logf("FIGURE %s, %s: "+format, append([]any{kernel, mode}, args...)...)
	}
	srv := p.ServeOnA(t, probePort, "/bin/sh", "-c", env+"exec "+grdma()+" probe "+p.Dev+" serve")
	respCPU := func() time.Duration {
		f := strings.Fields(p.A.Must("/bin/sh", "-c", "cat /proc/$(pidof grdma)/stat").stdout)
		u, _ := strconv.Atoi(f[13])
		s, _ := strconv.Atoi(f[14])
		return time.Duration(u+s) * 10 * time.Millisecond
	}

	ctx, prober, stop := startUDProber(t, p.Dev, polled)
	defer stop()
	target := p.PeerAddr + ":18515"
	if _, _, err := prober.Lookup(ctx, target); err != nil {
		t.Fatal(err)
	}

	perIter := regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
	var toolUS, ours, oursNet, oursDelay, ratios []float64
	var proberCPU, responderCPU time.Duration
	for r := range rounds {
		theirs := func() float64 {
			// The responder has 18515: ibv_ud_pingpong takes the next port.
			tool := []string{"-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "-p", strconv.Itoa(udToolPort)}
			if !polled {
				tool = append(tool, "-e")
			}
			srvTool := p.ServeOnA(t, udToolPort, layout.IbvUdPingpong, tool...)
			cli := run(layout.IbvUdPingpong, append(tool, p.PeerAddr)...)
			srvTool.Wait()
			m := perIter.FindStringSubmatch(cli.stdout)
			if cli.code != 0 || m == nil {
				t.Fatalf("round %d: ibv_ud_pingpong:\n%s", r+1, cli)
			}
			us, _ := strconv.ParseFloat(m[3], 64)
			return us
		}
		var us float64
		if r%2 == 0 {
			us = theirs()
		}
		var rtts, nets, delays []float64
		c0, r0 := cpuTime(t), respCPU()
		for range n {
			res, err := prober.Ping(ctx, target, size)
			if err != nil {
				t.Fatalf("round %d: %+v: %v", r+1, res, err)
			}
			rtts = append(rtts, float64(res.RTT)/1e3)
			nets = append(nets, float64(res.Network())/1e3)
			delays = append(delays, float64(res.Delay)/1e3)
		}
		proberCPU += cpuTime(t) - c0
		responderCPU += respCPU() - r0
		if r%2 == 1 {
			us = theirs()
		}
		toolUS, ratios = append(toolUS, us), append(ratios, mean(rtts)/us)
		ours, oursNet, oursDelay = append(ours, mean(rtts)), append(oursNet, median(nets)), append(oursDelay, median(delays))
		t.Logf("%s round %d: %s %.1f µs/iter; grdma ping mean rtt %.1f µs, median %.1f µs, median network %.1f µs, median responder delay %.1f µs; ratio %.2f",
			mode, r+1, toolName, us, mean(rtts), median(rtts), median(nets), median(delays), mean(rtts)/us)
	}
	stopServe(t, srv)
	figure("ud ping rtt (mean of %d, median of %d rounds) %.1f µs vs %s %.1f µs/iter: ratio %.2f (the rounds' own: median %.2f, %.2f–%.2f); network rtt %.1f µs, responder delay %.1f µs",
		n, rounds, median(ours), toolName, median(toolUS), median(ours)/median(toolUS), median(ratios), slices.Min(ratios), slices.Max(ratios), median(oursNet), median(oursDelay))
	total := float64(rounds * n)
	figure("CPU per 1,000 probes: prober %.0f ms, responder %.0f ms (10 ms ticks, %d probes)",
		float64(proberCPU)/1e6*1000/total, float64(responderCPU)/1e6*1000/total, rounds*n)
}

// startUDProber opens dev here and runs a UD prober on it (polled: every
// wait polls) until stop, which releases both; ctx ends with stop.
func startUDProber(t *testing.T, dev string, polled bool) (ctx context.Context, prober *udping.Prober, stop func()) {
	t.Helper()
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, res := verbsprobe.OpenDevice(ctx, verbsprobe.Options{Sysfs: fsys, Device: dev, GIDIndex: verbsprobe.AutoGID, Poll: polled})
	if d == nil {
		cancel()
		t.Fatal(res.Err())
	}
	prober, err = verbsprobe.NewUDProber(d, udping.ProberConfig{Timeout: 5 * time.Second}, verbsprobe.ConnectConfig{})
	if err != nil {
		cancel()
		d.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- prober.Run(ctx) }()
	return ctx, prober, func() { cancel(); <-done; prober.Close(); d.Close() }
}

// udToolPort is ibv_ud_pingpong's port beside a responder.
const udToolPort = toolPort + 1

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
