//go:build e2eguest

package guest

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// TestFleetProbeCMBench compares grdma's probe over the RDMA CM with
// perftest -R in the same two guests, interleaved (grdma, perftest, ...),
// five runs each, server on node 2, client on node 1: bw write (64 KiB ×
// 2000) against ib_write_bw -R by message rate, lat send (2 bytes × 500)
// against ib_send_lat -R by median (t_typical), and the CM connection
// set-up, timed from outside: `grdma probe peer IP cm` (resolve →
// established → disconnect, and the process) against `rping -c -C 1`.
// It logs FIGURE lines and asserts nothing about them. It runs with
// E2E_CM_BENCH=1 (3 min: not in every make e2e), as the other benchmarks.
func TestFleetProbeCMBench(t *testing.T) {
	if os.Getenv("E2E_CM_BENCH") == "" {
		t.Skip("E2E_CM_BENCH not set")
	}
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	const runs = 5
	var bwOurs, bwTheirs, latOurs, latTheirs, setupOurs, setupTheirs []float64
	for i := range runs {
		// bw write
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
		cli := n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "bw", "write", "iters", "2000")
		srv.Wait()
		if r := parseCMReport(t, "grdma", cli); cli.code == 0 && len(r.Results) == 1 {
			bwOurs = append(bwOurs, r.Results[0].MsgRate)
		} else {
			t.Logf("grdma bw write over cm failed:\n%s", cli)
		}
		ps := n2.on(t).ServeCM(toolPort, layout.IbWriteBw, "-d", f.Dev, "-R", "-n", "2000")
		pc := n1.on(t).Run(layout.IbWriteBw, "-d", f.Dev, "-R", "-n", "2000", n2.Addr)
		if s := ps.Wait(); s.code == 0 && pc.code == 0 {
			if fig := perftestFigures(t, s, pc, 2000); len(fig) >= 5 {
				if v, err := strconv.ParseFloat(fig[4], 64); err == nil {
					bwTheirs = append(bwTheirs, v)
				}
			}
		} else {
			t.Logf("ib_write_bw -R failed:\n%s\n%s", s, pc)
		}
		// lat send
		srv = n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
		cli = n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "lat", "send", "iters", "500")
		srv.Wait()
		if r := parseCMReport(t, "grdma", cli); cli.code == 0 && len(r.Results) == 1 && r.Results[0].Lat != nil {
			latOurs = append(latOurs, r.Results[0].Lat.Median)
		} else {
			t.Logf("grdma lat send over cm failed:\n%s", cli)
		}
		ps = n2.on(t).ServeCM(toolPort, layout.IbSendLat, "-d", f.Dev, "-R", "-n", "500")
		pc = n1.on(t).Run(layout.IbSendLat, "-d", f.Dev, "-R", "-n", "500", n2.Addr)
		if s := ps.Wait(); s.code == 0 && pc.code == 0 {
			if fig := perftestFigures(t, s, pc, 500); len(fig) >= 5 {
				if v, err := strconv.ParseFloat(fig[4], 64); err == nil {
					latTheirs = append(latTheirs, v)
				}
			}
		} else {
			t.Logf("ib_send_lat -R failed:\n%s\n%s", s, pc)
		}
		// set-up
		srv = n2.on(t).ServeCM(cmProbePort, grdma(), "probe", "listen", "cm", n2.Addr)
		start := time.Now()
		cli = n1.on(t).Run(grdma(), "probe", "peer", n2.Addr, "cm")
		d := time.Since(start)
		srv.Wait()
		if cli.code == 0 {
			setupOurs = append(setupOurs, float64(d.Microseconds())/1000)
		}
		rs := n2.on(t).ServeCM(7174, layout.Rping, "-s", "-a", n2.Addr, "-C", "1")
		start = time.Now()
		rc := n1.on(t).Run(layout.Rping, "-c", "-a", n2.Addr, "-C", "1")
		d = time.Since(start)
		rs.Wait()
		if rc.code == 0 {
			setupTheirs = append(setupTheirs, float64(d.Microseconds())/1000)
		}
		t.Logf("run %d done", i+1)
	}
	figure := func(name, unit string, ours, theirs []float64) {
		if len(ours) == 0 || len(theirs) == 0 {
			t.Logf("FIGURE %s: no result (grdma %d runs, peer %d runs)", name, len(ours), len(theirs))
			return
		}
		mo, mt := median(ours), median(theirs)
		t.Logf("FIGURE %s: grdma median %.4f %s (%d runs %v), peer median %.4f %s (%d runs %v), ratio %.3f",
			name, mo, unit, len(ours), ours, mt, unit, len(theirs), theirs, mo/mt)
	}
	figure("cm bw write vs ib_write_bw -R (msg rate)", "Mpps", bwOurs, bwTheirs)
	figure("cm lat send vs ib_send_lat -R (median)", "µs", latOurs, latTheirs)
	figure("cm set-up (process, timed outside) vs rping -c -C 1", "ms", setupOurs, setupTheirs)
}
