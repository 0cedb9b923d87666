//go:build e2eguest

package guest

// The responder (grdma probe DEV serve, issue 25) in the fleet: one node
// serves, three others probe it at once, several connections each,
// within its limits; fifty peers in a row; ibv_rc_pingpong clients; the
// documented refusal of the peer over the limit. withFleet fails a
// scenario that leaves a QP, CQ or MR on any node.

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

func TestFleetProbeServe(t *testing.T) {
	f := withFleet(t, 4)
	// serveOn starts the responder on node 4.
	serveOn := func(t *testing.T, args ...string) (*node, *remoteCmd) {
		resp := f.Node(4)
		return resp, resp.on(t).WithTimeout(10*time.Minute).Serve(probePort, grdma(), append([]string{"-j", "probe", f.Dev, "serve"}, args...)...)
	}
	stop := func(t *testing.T, srv *remoteCmd) []servedLine {
		t.Helper()
		return servedLines(t, stopServe(t, srv).stdout)
	}
	// Three nodes, two peers each at once, against peers 4: every test
	// passes on both sides (the extra peers told busy, asking again).
	t.Run("PeersAtOnce", func(t *testing.T) {
		resp, srv := serveOn(t, "peers", "4")
		tests := [][]string{{"traffic"}, {"bw", "write", "duration", "3s"}}
		var wg sync.WaitGroup
		var mu sync.Mutex
		passed := 0
		for i := 1; i <= 3; i++ {
			for _, args := range tests {
				cli := f.Node(i).on(t).Start(grdma(), append([]string{"-j", "probe", f.Dev, "peer", resp.Addr}, append(args, "timeout", "60s")...)...)
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := cli.Wait()
					mu.Lock()
					defer mu.Unlock()
					if r.code != 0 {
						t.Errorf("node %d %s:\n%s", i, strings.Join(args, " "), r)
						return
					}
					passed++
				}()
			}
		}
		wg.Wait()
		lines := stop(t, srv)
		n := count(lines)
		if passed != 6 || n["pass"] != 6 || n["fail"] != 0 {
			t.Errorf("%d clients passed; the responder's lines: %v", passed, n)
		}
		peers := map[string]bool{}
		for _, l := range lines {
			if l.Result == "pass" {
				host, _, _ := strings.Cut(l.Peer, ":")
				peers[host] = true
			}
		}
		if len(peers) != 3 {
			t.Errorf("served hosts %v, want nodes 1-3", peers)
		}
		t.Logf("6 peers from 3 nodes against peers 4: %d busy answers on the way", n["busy"])
	})
	t.Run("FiftyInARow", func(t *testing.T) {
		resp, srv := serveOn(t)
		before := resp.on(t).Must(layout.Rdma, "-j", "res").stdout
		for i := range 50 {
			from := f.Node(1 + i%3)
			if r := from.on(t).Run(grdma(), "probe", f.Dev, "peer", resp.Addr); r.code != 0 {
				t.Fatalf("peer %d from node %d:\n%s", i+1, from.N, r)
			}
		}
		if after := resp.on(t).Must(layout.Rdma, "-j", "res").stdout; after != before {
			t.Errorf("the responder's node before the 50 peers:\n%s\nafter:\n%s", before, after)
		}
		if n := count(stop(t, srv)); n["pass"] != 50 {
			t.Errorf("the responder's lines: %v", n)
		}
	})
	t.Run("Pingpong", func(t *testing.T) {
		resp, srv := serveOn(t, "pingpong", "iters", "20")
		var wg sync.WaitGroup
		for i := 2; i <= 3; i++ {
			cli := f.Node(i).on(t).Start(layout.IbvRcPingpong, "-d", f.Dev, "-g", strconv.Itoa(f.GIDIndex), "-n", "20", resp.Addr)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := cli.Wait(); r.code != 0 || !strings.Contains(r.stdout, "20 iters in") {
					t.Errorf("ibv_rc_pingpong on node %d:\n%s", i, r)
				}
			}()
		}
		wg.Wait()
		if n := count(stop(t, srv)); n["pass"] != 2 {
			t.Errorf("the responder's lines: %v", n)
		}
	})
	// peers 1: the peer over the limit is told so, names the limit, and
	// gives up at its timeout.
	t.Run("LimitRefuses", func(t *testing.T) {
		resp, srv := serveOn(t, "peers", "1")
		long := f.Node(1).on(t).Start(grdma(), "probe", f.Dev, "peer", resp.Addr, "bw", "write", "duration", "8s")
		if !eventually(serverListenWait, func() bool { return strings.Contains(resp.on(t).Run(layout.Rdma, "res", "show", "qp").stdout, "RC") }) {
			t.Fatal("the first peer never got its queue pair")
		}
		r := f.Node(2).on(t).Run(grdma(), "probe", f.Dev, "peer", resp.Addr, "traffic", "timeout", "2s")
		const want = "busy: 1 peers served at once, the responder's limit (its peers)"
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("the peer over the limit: want exit 1 saying %q:\n%s", want, r)
		}
		if l := long.Wait(); l.code != 0 {
			t.Errorf("the peer within the limit:\n%s", l)
		}
		if n := count(stop(t, srv)); n["pass"] != 1 || n["busy"] < 1 {
			t.Errorf("the responder's lines: %v", n)
		}
	})
}
