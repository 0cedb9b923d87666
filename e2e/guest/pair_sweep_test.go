//go:build e2eguest

package guest

// grdma sweep run in launched mode across the two-host bed (issue 27):
// `grdma sweep run` started on both guests, each computing its part of
// the schedule, meeting its partner on its own, writing its records; then
// `grdma sweep report` over both. Four nodes run as two processes per
// guest on their own ports (pairs within a guest go through rxe's
// loopback). Faults: a node never started, a node whose device is
// missing, nodes with other parameters. withPeer fails a test that leaves
// an RC QP on either guest.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
)

// sweepTests are quick on the emulated bed: a second of bw each way, a
// second of ping-pong (about 45 exchanges at 22 ms).
var sweepTests = []string{"duration", "1s"}

// sweepNode is one `grdma sweep run` of a scenario: on A (remote) or
// here in B.
type sweepNode struct {
	onA  bool
	dev  string // the pair's device when empty
	args []string
}

// runSweep starts every node at once (A's first: B's would wait for them
// anyway) and returns each node's result, in order.
func runSweep(t *testing.T, p *pair, hosts string, nodes []sweepNode) []result {
	t.Helper()
	const hostsFile = "/tmp/sweep-hosts"
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	p.A.Must("/bin/sh", "-c", fmt.Sprintf("printf '%%s' '%s' > %s", hosts, hostsFile))
	remote := map[int]*remoteCmd{}
	a := p.A.WithTimeout(3 * time.Minute)
	argv := func(n sweepNode) []string {
		dev := n.dev
		if dev == "" {
			dev = p.Dev
		}
		return append([]string{"sweep", "run", dev, "hosts", hostsFile}, n.args...)
	}
	for i, n := range nodes {
		if n.onA {
			remote[i] = a.Start(grdma(), argv(n)...)
		}
	}
	results := make([]result, len(nodes))
	local := make(chan struct {
		i int
		r result
	}, len(nodes))
	for i, n := range nodes {
		if !n.onA {
			go func() {
				r := run(grdma(), argv(n)...)
				local <- struct {
					i int
					r result
				}{i, r}
			}()
		}
	}
	for i := range nodes {
		if c := remote[i]; c != nil {
			results[i] = c.Wait()
		}
	}
	for range len(nodes) - len(remote) {
		l := <-local
		results[l.i] = l.r
	}
	return results
}

// reportOf writes each node's records to a file and runs grdma -j sweep
// report over them.
func reportOf(t *testing.T, results []result, extra ...string) (result, *sweep.Report) {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, r := range results {
		f := filepath.Join(dir, fmt.Sprintf("node%d.jsonl", i))
		if err := os.WriteFile(f, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	r := run(grdma(), append(append([]string{"-j", "sweep", "report"}, extra...), files...)...)
	var rep sweep.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		return r, nil
	}
	return r, &rep
}

// records parses a node's records.
func records(t *testing.T, r result) []sweep.Record {
	t.Helper()
	recs, _, err := sweep.ReadRecords(strings.NewReader(r.stdout), r.cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	return recs
}

// TestPairSweep: two nodes, one on each guest, ranks from their position
// in the host list (each finds its own address): one round, bw each way
// and lat, all passed on both sides; the report has no verdict.
func TestPairSweep(t *testing.T) {
	p := withPeer(t)
	hosts := p.PeerAddr + "\n" + p.LocalAddr + "\n"
	begin := time.Now()
	res := runSweep(t, p, hosts, []sweepNode{{onA: true, args: sweepTests}, {args: sweepTests}})
	took := time.Since(begin)
	for i, r := range res {
		recs := records(t, r)
		if r.code != 0 || len(recs) != 5 || recs[0].Start == nil || recs[0].Rank != i || recs[0].Start.RankFrom != "host list" || recs[4].End == nil || recs[4].End.Passed != 3 {
			t.Fatalf("node %d: want rank %d from the host list, 3 tests passed:\n%s", i, i, r)
		}
		for _, rec := range recs[1:4] {
			if rec.Test.Outcome != sweep.OutcomeOK || (rec.Test.Role == "client" && (rec.Test.Figures == nil || (rec.Test.Figures.BWGbps <= 0 && rec.Test.Figures.LatUsec == nil))) {
				t.Errorf("node %d: %+v", i, rec.Test)
			}
		}
	}
	r, rep := reportOf(t, res)
	if r.code != 0 || rep == nil || !rep.OK || len(rep.Pairs) != 1 || rep.BW.Cells[0][1].Value == nil || rep.BW.Cells[1][0].Value == nil || rep.Lat.Cells[0][1].Value == nil {
		t.Fatalf("report: want no verdict and both directions measured:\n%s", r)
	}
	var tests float64
	for _, rec := range records(t, res[0])[1:4] {
		tests += rec.Test.Seconds
	}
	t.Logf("2 nodes: %.3g / %.3g Gb/s (A→B / B→A), lat %.1f ms; sweep %.1fs on A (its tests %.1fs), %.1fs here with the start",
		*rep.BW.Cells[0][1].Value, *rep.BW.Cells[1][0].Value, *rep.Lat.Cells[0][1].Value/1000,
		records(t, res[0])[4].End.Seconds, tests, took.Seconds())
}

// TestPairSweepFourNodes: four nodes, two per guest on ports of their
// own, ranks given: three rounds of two pairs at once, every pair once,
// all passed. The wall time against three times one pair's tests shows
// what keeping in step costs.
func TestPairSweepFourNodes(t *testing.T) {
	p := withPeer(t)
	hosts := fmt.Sprintf("%[1]s:18600 %[1]s:18601 %[2]s:18600 %[2]s:18601\n", p.PeerAddr, p.LocalAddr)
	var nodes []sweepNode
	for i := range 4 {
		nodes = append(nodes, sweepNode{onA: i < 2, args: append([]string{"rank", strconv.Itoa(i)}, sweepTests...)})
	}
	res := runSweep(t, p, hosts, nodes)
	var walls []float64
	var pairTime float64
	for i, r := range res {
		recs := records(t, r)
		end := recs[len(recs)-1].End
		if r.code != 0 || end == nil || end.Tests != 9 || end.Passed != 9 {
			t.Fatalf("node %d: want 9 tests passed:\n%s", i, r)
		}
		walls = append(walls, end.Seconds)
		// One pair's time: the longest round of this node.
		perRound := map[int]float64{}
		for _, rec := range recs {
			if rec.Test != nil {
				perRound[rec.Test.Round] += rec.Test.Seconds
			}
		}
		for _, s := range perRound {
			pairTime = max(pairTime, s)
		}
	}
	r, rep := reportOf(t, res)
	if rep == nil || len(rep.Pairs) != 6 || rep.Missing != 0 {
		t.Fatalf("report: want 6 pairs judged:\n%s", r)
	}
	// Loopback pairs (within a guest) and pairs across the link may
	// differ more than the defaults allow: log what the report said.
	var cells []string
	for i := range 4 {
		for j := range 4 {
			if c := rep.BW.Cells[i][j]; i != j && c.Value != nil {
				cells = append(cells, fmt.Sprintf("%d→%d %.3g", i, j, *c.Value))
			}
		}
	}
	t.Logf("4 nodes, 3 rounds: wall %.1f–%.1fs, the longest pair %.1fs (3 × that: %.1fs); bw Gb/s %s; verdicts %d (exit %d)",
		minOf(walls), maxOf(walls), pairTime, 3*pairTime, strings.Join(cells, ", "), len(rep.Verdicts), r.code)
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// TestPairSweepDeadNode: A's node never starts. B records that it did not
// answer within the timeout and exits 1; the report calls A unreachable.
func TestPairSweepDeadNode(t *testing.T) {
	p := withPeer(t)
	hosts := p.PeerAddr + " " + p.LocalAddr
	begin := time.Now()
	b := runSweep(t, p, hosts, []sweepNode{{args: append([]string{"timeout", "3s"}, sweepTests...)}})[0]
	took := time.Since(begin)
	if b.code != 1 || !strings.Contains(b.stderr, "did not answer") || took > 20*time.Second {
		t.Fatalf("B alone: want exit 1 after about the 3s timeout (took %v):\n%s", took, b)
	}
	for _, rec := range records(t, b) {
		if rec.Test != nil && (rec.Test.Outcome != sweep.OutcomeNoAnswer || rec.Test.Down == nil || *rec.Test.Down != 0) {
			t.Errorf("%+v", rec.Test)
		}
	}
	r, rep := reportOf(t, []result{b})
	if r.code != 1 || rep == nil || len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != sweep.VerdictUnreachable || rep.Verdicts[0].Nodes[0] != p.PeerAddr {
		t.Fatalf("report: want A unreachable:\n%s", r)
	}
}

// TestPairSweepBrokenNode: A's node runs on a device that does not exist.
// It takes part by refusing, so B does not wait; the report calls A
// unreachable with the reason from A's own records.
func TestPairSweepBrokenNode(t *testing.T) {
	p := withPeer(t)
	hosts := p.PeerAddr + " " + p.LocalAddr
	begin := time.Now()
	const missing = "rxe9"
	res := runSweep(t, p, hosts, []sweepNode{
		{onA: true, dev: missing, args: append([]string{"timeout", "20s"}, sweepTests...)},
		{args: append([]string{"timeout", "20s"}, sweepTests...)},
	})
	ra := res[0]
	if took := time.Since(begin); took > 15*time.Second || res[1].code != 1 || ra.code != 1 {
		t.Fatalf("want both to exit 1 at once, not after the timeout (took %v):\nA: %s\nB: %s", took, ra, res[1])
	}
	r, rep := reportOf(t, res)
	if r.code != 1 || rep == nil || len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != sweep.VerdictUnreachable ||
		!strings.Contains(rep.Verdicts[0].Reason, "its device failed at start") || !strings.Contains(rep.Verdicts[0].Reason, missing) {
		t.Fatalf("report: want A unreachable, its device named:\n%s", r)
	}
}

// TestPairSweepMismatch: the nodes run other tests. Each refuses the
// other, naming both parameters; the report refuses to mix their records.
func TestPairSweepMismatch(t *testing.T) {
	p := withPeer(t)
	hosts := p.PeerAddr + " " + p.LocalAddr
	res := runSweep(t, p, hosts, []sweepNode{{onA: true, args: []string{"duration", "1s"}}, {args: []string{"duration", "2s"}}})
	for i, r := range res {
		if r.code != 1 {
			t.Errorf("node %d: want exit 1:\n%s", i, r)
		}
		for _, rec := range records(t, r) {
			if rec.Test != nil && (rec.Test.Outcome != sweep.OutcomeRefused || !strings.Contains(rec.Test.Error, "parameters differ")) {
				t.Errorf("node %d: %+v", i, rec.Test)
			}
		}
	}
	if r, _ := reportOf(t, res); r.code != 1 || !strings.Contains(r.stderr, "records of different sweeps") {
		t.Errorf("report: want a refusal to mix:\n%s", r)
	}
}
