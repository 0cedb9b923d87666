//go:build e2eguest

package guest

// The two-host scenarios: they run in guest B of TestTwoHosts and drive
// guest A through its agent (withPeer). Their names start with TestPair
// (e2e.PairScenarios); the single guest skips them. Each proves the bed
// itself with the reference tools, so a grdma scenario across the link
// that fails means grdma, not the link.

import (
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// toolPort is the TCP port ibv_rc_pingpong and perftest servers listen on
// by default to exchange QP numbers and GIDs.
const toolPort = 18515

// TestPairPing: IPv4 across the link, both ways.
func TestPairPing(t *testing.T) {
	p := withPeer(t)
	want := "3 packets transmitted, 3 packets received"
	if r := run("/bin/ping", "-c", "3", "-w", "30", p.PeerAddr); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("B to A: want %q:\n%s", want, r)
	}
	if r := p.A.Run("/bin/ping", "-c", "3", "-w", "30", p.LocalAddr); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("A to B: want %q:\n%s", want, r)
	}
}

// TestPairRcPingpong: ibv_rc_pingpong (RC send/recv) across the link with
// the IPv4 GID, the server on A then on B.
func TestPairRcPingpong(t *testing.T) {
	const iters = 50
	for _, c := range []struct {
		name      string
		serverOnA bool
	}{{"AServes", true}, {"BServes", false}} {
		t.Run(c.name, func(t *testing.T) {
			p := withPeer(t)
			srv, cli := p.across(t, c.serverOnA, toolPort, layout.IbvRcPingpong,
				"-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", strconv.Itoa(iters))
			want := strconv.Itoa(iters) + " iters in"
			if srv.code != 0 || cli.code != 0 || !strings.Contains(srv.stdout, want) || !strings.Contains(cli.stdout, want) {
				t.Fatalf("want both sides to exit 0 after %q:\nserver: %s\nclient: %s", want, srv, cli)
			}
			t.Logf("client: %s", lastLine(cli.stdout))
		})
	}
}

// TestPairWriteBw: perftest's ib_write_bw (RDMA write, 64 KiB messages)
// from B to a server on A.
func TestPairWriteBw(t *testing.T) {
	res, cli := perftestAcross(t, layout.IbWriteBw, 100)
	// #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
	if len(res) < 5 || !positive(res[3]) {
		t.Fatalf("want a positive average bandwidth in %q:\n%s", res, cli)
	}
	t.Logf("%s bytes x %s: average %s MB/s", res[0], res[1], res[3])
}

// TestPairWriteLat: perftest's ib_write_lat (RDMA write ping-pong, 2
// bytes) between B and a server on A.
func TestPairWriteLat(t *testing.T) {
	res, cli := perftestAcross(t, layout.IbWriteLat, 100)
	// #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
	if len(res) < 6 || !positive(res[4]) {
		t.Fatalf("want a positive typical latency in %q:\n%s", res, cli)
	}
	t.Logf("%s bytes x %s: typical %s us, average %s us", res[0], res[1], res[4], res[5])
}

// perftestAcross runs a perftest tool for iters iterations over the IPv4
// GID, server on A and client here in B, and returns the fields of the
// client's result line with its output.
func perftestAcross(t *testing.T, tool string, iters int) ([]string, result) {
	t.Helper()
	p := withPeer(t)
	srv, cli := perftestRetry(t, func() (result, result) {
		return p.across(t, true, toolPort, tool, "-d", p.Dev, "-x", strconv.Itoa(p.GIDIndex), "-n", strconv.Itoa(iters))
	}, p.A)
	return perftestFigures(t, srv, cli, iters), cli
}

// perftestFlake says why a perftest pair failed on its own rather than in
// what it tests, or "": a side killed by a signal (CI: ib_write_bw -R's
// server, SIGSEGV, on a 6.12 fleet), or perftest unable to time its CPU's
// clock, which it samples against gettimeofday and gives up on when the two
// correlate under r^2 = 0.9, as a loaded emulated CPU makes them ("Can't
// produce a report": CI, a 6.12 fleet's PerftestCM).
func perftestFlake(rs ...result) string {
	for _, r := range rs {
		switch {
		case r.signal != "":
			return r.cmd + ": killed by signal: " + r.signal
		case strings.Contains(r.stderr, "Can't produce a report"):
			why := "can't produce a report"
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(line, "Correlation coefficient") {
					why = line
				}
			}
			return r.cmd + ": " + why
		}
	}
	return ""
}

// perftestRetry runs a perftest pair (pair returns its server's and its
// client's ends) once more when it failed on its own (perftestFlake),
// after logging why and the kernel's lines on it, here and on hosts. A
// second failure, or any other, is the caller's to judge.
func perftestRetry(t *testing.T, pair func() (srv, cli result), hosts ...*peerHost) (srv, cli result) {
	t.Helper()
	srv, cli = pair()
	if srv.code == 0 && cli.code == 0 {
		return srv, cli
	}
	why := perftestFlake(srv, cli)
	if why == "" {
		return srv, cli
	}
	logs := "here:\n" + indent(run(layout.Sh, "-c", crashLog).stdout)
	for _, h := range hosts {
		logs += h.name + ":\n" + indent(h.Run(layout.Sh, "-c", crashLog).stdout)
	}
	t.Logf("perftest pair failed on its own (%s), running it once more; it printed:\nserver: %s\nclient: %s\nkernel lines:\n%s", why, srv, cli, logs)
	return pair()
}

// perftestFigures checks that both sides of a perftest run exited 0 and
// returns the fields of the client's result line (after the "#bytes"
// header), whose iteration count must be iters.
func perftestFigures(t *testing.T, srv, cli result, iters int) []string {
	t.Helper()
	if srv.code != 0 || cli.code != 0 {
		t.Fatalf("want both sides to exit 0:\nserver: %s\nclient: %s", srv, cli)
	}
	lines := strings.Split(cli.stdout, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#bytes") && i+1 < len(lines) {
			f := strings.Fields(lines[i+1])
			if len(f) < 2 || f[1] != strconv.Itoa(iters) {
				t.Fatalf("want %d iterations in the result line %q:\n%s", iters, lines[i+1], cli)
			}
			return f
		}
	}
	t.Fatalf("no #bytes result table in the client's output:\n%s", cli)
	return nil
}

func positive(s string) bool { v, err := strconv.ParseFloat(s, 64); return err == nil && v > 0 }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
