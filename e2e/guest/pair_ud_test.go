//go:build e2eguest

package guest

// UD between two hosts (issue 26): grdma against ibv_ud_pingpong both
// ways, and grdma's UD ping of a responder (grdma probe DEV serve) both
// ways, with the responder restarting under it.

import (
	"encoding/json"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// TestPairUDPingpong: grdma speaks ibv_ud_pingpong's exchange and loop,
// as the client of its server (which validates the payload, -c) and as
// the server of its client, at its default size and at 64 bytes.
func TestPairUDPingpong(t *testing.T) {
	const iters = "50"
	for _, size := range []string{"1024", "64"} {
		t.Run("GrdmaClient_"+size, func(t *testing.T) {
			p := withPeer(t)
			srv := p.ServeOnA(t, toolPort, layout.IbvUdPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", iters, "-s", size, "-c")
			cli := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "ud-pingpong", "iters", iters, "size", size)
			s := srv.Wait()
			c := parseProbeJSON(t, "grdma", cli)
			if s.code != 0 || cli.code != 0 || !strings.Contains(s.stdout, iters+" iters in") || !c.OK ||
				c.Peer == nil || c.Peer.Tool != "ibv_ud_pingpong" || len(c.Results) != 1 || c.Results[0].Iters != 50 ||
				!c.step("create_ah").OK {
				t.Fatalf("ibv_ud_pingpong server on A, grdma here:\nserver: %s\ngrdma: %s", s, cli)
			}
		})
		t.Run("GrdmaServer_"+size, func(t *testing.T) {
			p := withPeer(t)
			srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "listen", "ud-pingpong", "iters", iters, "size", size)
			cli := run(layout.IbvUdPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", iters, "-s", size, p.PeerAddr)
			s := srv.Wait()
			rep := parseProbeJSON(t, "grdma", s)
			if s.code != 0 || cli.code != 0 || !strings.Contains(cli.stdout, iters+" iters in") || !rep.OK || rep.Test.Kind != "ud-pingpong" {
				t.Fatalf("grdma server on A, ibv_ud_pingpong here:\ngrdma: %s\nclient: %s", s, cli)
			}
		})
	}
	// A size over the port's MTU is refused before anything is sent, as
	// ibv_ud_pingpong refuses it.
	t.Run("OverMTU", func(t *testing.T) {
		withPeer(t)
		r := run(grdma(), "probe", "rxe0", "peer", layout.PeerA, "ud-pingpong", "size", "2048", "timeout", "2s")
		if r.code != 1 || !strings.Contains(r.stderr, "larger than the port's active MTU (1024)") {
			t.Errorf("ud-pingpong size 2048:\n%s", r)
		}
	})
}

// pingLine is a line of grdma -j probe ... ping: a probe's, or the
// summary (Transmitted set).
type pingLine struct {
	Target     string   `json:"target"`
	Seq        int      `json:"seq"`
	Size       int      `json:"size"`
	Result     string   `json:"result"`
	RTT        float64  `json:"rtt_usec"`
	Network    float64  `json:"network_usec"`
	Delay      *float64 `json:"delay_usec"`
	Error      string   `json:"error"`
	Timestamps string   `json:"timestamps"`
	Responder  *struct {
		GID  string `json:"gid"`
		QPN  int    `json:"qpn"`
		QKey uint32 `json:"qkey"`
		MTU  int    `json:"mtu"`
	} `json:"responder"`
	Transmitted *int    `json:"transmitted"`
	Received    int     `json:"received"`
	Loss        float64 `json:"loss_percent"`
	NetworkRTT  *struct {
		Min float64 `json:"min_usec"`
		Avg float64 `json:"avg_usec"`
		Max float64 `json:"max_usec"`
	} `json:"network_rtt"`
}

// pingLines parses the JSON lines of a ping: the probes' and the summary.
func pingLines(t *testing.T, r result) (probes []pingLine, summary pingLine) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var p pingLine
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("a line of ping -j is not JSON: %v\n%s", err, r)
		}
		if p.Transmitted != nil {
			summary = p
			continue
		}
		probes = append(probes, p)
	}
	if summary.Transmitted == nil {
		t.Fatalf("no summary line:\n%s", r)
	}
	return probes, summary
}

// checkPings checks a ping of n probes that all came back: sizes cycling
// 64, 512, 1024 (the path MTU), the responder's delay known and smaller
// than the round trip, software timestamps.
func checkPings(t *testing.T, r result, n int, responderGID string) {
	t.Helper()
	probes, sum := pingLines(t, r)
	if r.code != 0 || len(probes) != n || *sum.Transmitted != n || sum.Received != n || sum.Loss != 0 ||
		sum.Responder == nil || sum.Responder.GID != responderGID || sum.Responder.MTU != 1024 || sum.Responder.QPN == 0 {
		t.Fatalf("ping of %d probes:\n%s", n, r)
	}
	sizes := []int{64, 512, 1024}
	var rtts, delays []float64
	over := 0
	for i, p := range probes {
		// Network is rtt less delay, 0 at least, each figure rounded to
		// 0.1 µs on its own.
		if p.Seq != i+1 || p.Size != sizes[i%3] || p.Result != "reply" || p.Delay == nil ||
			math.Abs(p.Network-max(p.RTT-*p.Delay, 0)) > 0.2 || p.Timestamps != "software" {
			t.Errorf("probe %d: %+v", i+1, p)
			continue
		}
		rtts, delays = append(rtts, p.RTT), append(delays, *p.Delay)
		if *p.Delay > p.RTT+0.2 {
			over++ // cannot be: both read their clocks before their sends
		}
	}
	if len(rtts) == 0 {
		return
	}
	sort.Float64s(rtts)
	sort.Float64s(delays)
	t.Logf("%d probes: median rtt %.0f µs, median responder delay %.0f µs; %d with a delay over their rtt", n,
		rtts[len(rtts)/2], delays[len(delays)/2], over)
	if over > 0 {
		t.Errorf("%d probes with the responder's delay over their round trip", over)
	}
}

// TestPairUDPing: grdma's UD ping of a responder, both ways; text and
// JSON; a listener (no UD ping) and no responder at all fail with exit 1
// naming why; a responder that restarts is asked again and answers on its
// new queue pair.
func TestPairUDPing(t *testing.T) {
	t.Run("BPingsA", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "serve")
		cli := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "ping", "count", "6", "interval", "200ms")
		checkPings(t, cli, 6, "::ffff:"+p.PeerAddr)
		text := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "ping", "count", "2", "interval", "200ms", "size", "100")
		if text.code != 0 || !strings.HasPrefix(text.stdout, "PING "+p.PeerAddr+":18515 from rxe0/1: UD qpn ") ||
			!strings.Contains(text.stdout, "100 bytes from "+p.PeerAddr+":18515: seq=2 rtt=") ||
			!strings.Contains(text.stdout, "2 probes transmitted, 2 received, 0% loss") ||
			!strings.Contains(text.stdout, "network rtt min/avg/max/mdev = ") {
			t.Errorf("ping in text:\n%s", text)
		}
		lines := servedLines(t, stopServe(t, srv).stdout)
		if n := count(lines); n["pass"] != 2 || n["fail"] != 0 || lines[0].Test == nil || lines[0].Test.Kind != "ud-ping" {
			t.Errorf("the responder's lines (one lookup a ping): %+v", lines)
		}
	})
	t.Run("APingsB", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnB(t, probePort, grdma(), "-j", "probe", p.Dev, "serve")
		cli := p.A.Run(grdma(), "-j", "probe", p.Dev, "peer", p.LocalAddr, "ping", "count", "3", "interval", "200ms")
		checkPings(t, cli, 3, "::ffff:"+p.LocalAddr)
		killServe(t)
		<-srv
	})
	t.Run("NoResponder", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "probe", p.Dev, "listen", "timeout", "20s")
		r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "ping", "count", "1", "timeout", "5s")
		if r.code != 1 || !strings.Contains(r.stderr, "answers no UD ping") {
			t.Errorf("ping of a listener:\n%s", r)
		}
		srv.Signal(syscall.SIGTERM)
		srv.Wait()
		r = run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "ping", "count", "1", "timeout", "2s")
		if r.code != 1 || !strings.Contains(r.stderr, "connecting to "+p.PeerAddr) {
			t.Errorf("ping of nothing:\n%s", r)
		}
	})
	t.Run("ResponderRestarts", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "serve")
		cli := startPing(t, p.Dev, p.PeerAddr, "count", "40", "interval", "250ms", "timeout", "1s")
		time.Sleep(3 * time.Second)
		stopServe(t, srv)
		time.Sleep(2 * time.Second)
		srv = p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "serve")
		r := cli.wait()
		probes, sum := pingLines(t, r)
		stopServe(t, srv)
		// Replies before, timeouts while it was gone, replies after.
		first, lost, after := -1, 0, 0
		for i, pl := range probes {
			switch {
			case pl.Result == "reply" && first < 0:
				first = i
			case pl.Result == "timeout":
				lost++
			case pl.Result == "reply" && lost > 0:
				after++
			}
		}
		if r.code != 0 || first < 0 || lost == 0 || after == 0 || *sum.Transmitted < 30 {
			t.Errorf("ping across a restart: %d timeouts, %d replies after them\n%s", lost, after, r)
		}
		t.Logf("%d timeouts while the responder was gone, then %d replies; stderr:\n%s", lost, after, r.stderr)
	})
}

// killServe stops the responder here in B.
func killServe(t *testing.T) {
	t.Helper()
	run("/bin/sh", "-c", "kill $(pidof grdma)")
}

// pingCmd is a ping running here in B.
type pingCmd struct {
	out, err *strings.Builder
	cmd      *exec.Cmd
}

func (c *pingCmd) wait() result {
	code := exitCode(c.cmd)
	return result{code: code, stdout: c.out.String(), stderr: c.err.String()}
}

// startPing starts grdma -j probe DEV peer ADDR ping ARGS... here in B.
func startPing(t *testing.T, dev, addr string, args ...string) *pingCmd {
	t.Helper()
	c, out, errb := startLocal(t, grdma(), append([]string{"-j", "probe", dev, "peer", addr, "ping"}, args...)...)
	return &pingCmd{out: out, err: errb, cmd: c}
}
