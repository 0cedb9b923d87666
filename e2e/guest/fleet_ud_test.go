//go:build e2eguest

package guest

// UD ping in the fleet (issue 26): one prober on node 1 (the udping
// library on one UD queue pair) pings the responders of nodes 2, 3 and 4
// at once; a responder that restarts is asked again; a node whose RoCE
// traffic is black-holed shows as timeouts while the others answer.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
)

func TestFleetUDPing(t *testing.T) {
	f := withFleet(t, 4)
	srvs := map[int]*remoteCmd{}
	for i := 2; i <= 4; i++ {
		srvs[i] = f.Node(i).on(t).Serve(probePort, grdma(), "-j", "probe", f.Dev, "serve")
	}
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev, res := verbsprobe.OpenDevice(ctx, verbsprobe.Options{Sysfs: fsys, Device: f.Dev, GIDIndex: verbsprobe.AutoGID})
	if dev == nil {
		t.Fatalf("open %s: %v", f.Dev, res.Err())
	}
	defer dev.Close()
	p, err := verbsprobe.NewUDProber(dev, udping.ProberConfig{Timeout: 2 * time.Second}, verbsprobe.ConnectConfig{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("prober: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("closing the prober: %v", err)
		}
	}()
	target := func(i int) string { return fmt.Sprintf("%s:%d", f.Node(i).Addr, probePort) }
	next := func(t *testing.T, d time.Duration) udping.Result {
		t.Helper()
		select {
		case r := <-p.Results():
			return r
		case <-time.After(d):
			t.Fatalf("no result within %v; prober %+v", d, p.Stats())
		}
		return udping.Result{}
	}

	t.Run("ThreeAtOnce", func(t *testing.T) {
		for i := 2; i <= 4; i++ {
			if err := p.Add(target(i), udping.TargetConfig{Rate: 4, Count: 9}); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string][]udping.Result{}
		for range 27 {
			r := next(t, 60*time.Second)
			got[r.Target] = append(got[r.Target], r)
		}
		for i := 2; i <= 4; i++ {
			rs := got[target(i)]
			if len(rs) != 9 {
				t.Errorf("node %d: %d results", i, len(rs))
				continue
			}
			var s udping.Summary
			sizes := map[int]int{}
			for _, r := range rs {
				s.Add(r)
				sizes[r.Size]++
				if r.Outcome != udping.OutcomeReply || !r.DelayKnown || r.Responder.GID.String() != "::ffff:"+f.Node(i).Addr {
					t.Errorf("node %d: %+v", i, r)
				}
			}
			if sizes[64] != 3 || sizes[512] != 3 || sizes[1024] != 3 {
				t.Errorf("node %d: sizes %v", i, sizes)
			}
			t.Logf("node %d: %d replies, network rtt min/avg/max %v/%v/%v, responder delay avg %v", i, s.Replies,
				s.Network.Min, s.Network.Avg, s.Network.Max, s.Delay.Avg)
		}
	})

	outer := t // the responders outlive the subtests
	t.Run("ResponderRestarts", func(t *testing.T) {
		if err := p.Add(target(3), udping.TargetConfig{Rate: 4}); err != nil {
			t.Fatal(err)
		}
		defer p.Remove(target(3))
		before := next(t, 30*time.Second)
		if before.Outcome != udping.OutcomeReply {
			t.Fatalf("%+v", before)
		}
		stopServe(t, srvs[3])
		srvs[3] = f.Node(3).on(outer).Serve(probePort, grdma(), "-j", "probe", f.Dev, "serve")
		timeouts := 0
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
			r := next(t, 30*time.Second)
			switch {
			case r.Outcome == udping.OutcomeTimeout:
				timeouts++
			case r.Outcome == udping.OutcomeReply && r.Responder.QPN != before.Responder.QPN:
				t.Logf("answered by the new queue pair %#x (was %#x) after %d timeouts", r.Responder.QPN, before.Responder.QPN, timeouts)
				return
			}
		}
		t.Fatalf("the restarted responder never answered; %d timeouts, prober %+v", timeouts, p.Stats())
	})

	t.Run("BlackHole", func(t *testing.T) {
		f.Node(4).DropRoCE(t)
		for _, i := range []int{2, 4} {
			if err := p.Add(target(i), udping.TargetConfig{Rate: 4, Count: 4}); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]map[udping.Outcome]int{target(2): {}, target(4): {}}
		// Results of node 3, removed by the test before, may still be
		// in the channel: Remove stops its probes, not the results
		// already queued.
		for n, stale := 0, 0; n < 8; {
			r := next(t, 60*time.Second)
			c, ok := got[r.Target]
			if !ok {
				if stale++; stale > 64 {
					t.Fatalf("%d results for targets not asked in this test, the last %+v", stale, r)
				}
				t.Logf("a result for %s, removed before this test: %v", r.Target, r.Outcome)
				continue
			}
			c[r.Outcome]++
			n++
		}
		if got[target(2)][udping.OutcomeReply] != 4 || got[target(4)][udping.OutcomeTimeout] != 4 {
			t.Errorf("node 2 (healthy) %v, node 4 (UDP 4791 dropped) %v", got[target(2)], got[target(4)])
		}
	})

	for i, srv := range srvs {
		lines := servedLines(t, stopServe(t, srv).stdout)
		if n := count(lines); n["fail"] != 0 {
			t.Errorf("node %d's responder: %v", i, lines)
		}
	}
}
