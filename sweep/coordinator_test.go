package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// fakeFleet answers a coordinated sweep's probes: each pair's figures
// from functions, nodes that cannot be driven, responders that do not
// answer; it counts the tests each node is in at once.
type fakeFleet struct {
	bw        func(client, server int) float64
	lat       func(a, b int) float64
	noDriver  map[int]bool // Check fails
	noServer  map[int]bool // Probe to it: no_responder
	noDevice  map[int]bool // Probe from it: no_device
	delay     time.Duration
	mu        sync.Mutex
	busy      map[int]int
	pairsNow  int
	maxPairs  int
	probes    []string // "client>server kind", in order of arrival
	pairBusy  map[[2]int]int
	tooMany   []string
	checkedAt map[int]int
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{
		bw:       func(c, s int) float64 { return 90 + float64((c+s)%3) },
		lat:      func(a, b int) float64 { return 2 + 0.01*float64((a+b)%3) },
		noDriver: map[int]bool{}, noServer: map[int]bool{}, noDevice: map[int]bool{},
		busy: map[int]int{}, pairBusy: map[[2]int]int{}, checkedAt: map[int]int{},
	}
}

func (f *fakeFleet) Check(ctx context.Context, rank int) error {
	f.mu.Lock()
	f.checkedAt[rank]++
	f.mu.Unlock()
	if f.noDriver[rank] {
		return errors.New("its exporter at http://x:10041/probe did not answer: connection refused")
	}
	return nil
}

func (f *fakeFleet) Probe(ctx context.Context, client, server int, t verbsprobe.Test, timeout time.Duration) ProbeResult {
	k := [2]int{min(client, server), max(client, server)}
	f.mu.Lock()
	f.probes = append(f.probes, fmt.Sprintf("%d>%d %s", client, server, t.Kind))
	for _, r := range []int{client, server} {
		f.busy[r]++
		if f.busy[r] > 1 {
			f.tooMany = append(f.tooMany, fmt.Sprintf("node %d in %d tests at once", r, f.busy[r]))
		}
	}
	if f.pairBusy[k] == 0 {
		f.pairsNow++
		f.maxPairs = max(f.maxPairs, f.pairsNow)
	}
	f.pairBusy[k]++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy[client]--
		f.busy[server]--
		f.pairBusy[k]--
		if f.pairBusy[k] == 0 {
			f.pairsNow--
		}
		f.mu.Unlock()
	}()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
		}
	}
	switch {
	case f.noDevice[client]:
		return ProbeResult{Outcome: OutcomeRefused, Down: client, Error: fmt.Sprintf("node%02d has no RDMA port to test from (no_device)", client+1)}
	case f.noServer[server]:
		return ProbeResult{Outcome: OutcomeNoAnswer, Down: server, Error: fmt.Sprintf("nothing answers on node%02d's responder port (no_responder)", server+1)}
	}
	if t.Kind == verbsprobe.TestLatency {
		l := f.lat(client, server)
		return ProbeResult{Outcome: OutcomeOK, Down: -1, Figures: &Figures{Iters: 1000, LatUsec: &LatUsec{Min: l, Median: l, Avg: l, P99: l, Max: l}}}
	}
	return ProbeResult{Outcome: OutcomeOK, Down: -1, Figures: &Figures{Iters: 1000, Bytes: 1 << 30, Seconds: 0.5, BWGbps: f.bw(client, server)}}
}

func coordParams(n int) Params {
	p := Params{Schedule: KindAllPairs, Tests: []verbsprobe.Test{DefaultBW.WithDefaults(), DefaultLat.WithDefaults()}}
	for i := range n {
		p.Hosts = append(p.Hosts, fmt.Sprintf("node%02d", i+1))
	}
	return p
}

func runCoordinator(t *testing.T, c *Coordinator) (*Report, []Record, string) {
	t.Helper()
	var out bytes.Buffer
	c.Out = NewWriter(&out)
	rep, recs, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// What it wrote reads back into the same report.
	read, _, err := ReadRecords(&out, "out")
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(recs) {
		t.Fatalf("wrote %d records, returned %d", len(read), len(recs))
	}
	again, err := Build(read, c.Criteria)
	if err != nil {
		t.Fatal(err)
	}
	if verdicts(again) != verdicts(rep) {
		t.Errorf("the records written say %q, the run said %q", verdicts(again), verdicts(rep))
	}
	return rep, recs, out.String()
}

func verdicts(rep *Report) string {
	var s []string
	for _, v := range rep.Verdicts {
		s = append(s, string(v.Kind)+" "+strings.Join(v.Nodes, ","))
	}
	return strings.Join(s, "; ")
}

// A healthy fleet: every pair once, both sides recorded, each node in one
// test at a time, the pairs of a round at once; no verdict, no retest.
func TestCoordinatorHealthy(t *testing.T) {
	f := newFakeFleet()
	f.delay = 5 * time.Millisecond
	c := &Coordinator{Params: coordParams(8), Prober: f, Confirm: true, Criteria: DefaultCriteria, Grdma: "grdma test", Driver: "head"}
	rep, recs, _ := runCoordinator(t, c)
	if !rep.OK || len(rep.Pairs) != 28 || rep.Missing != 0 || rep.Confirm != nil {
		t.Fatalf("want no verdict over 28 pairs: %+v", rep)
	}
	if len(f.tooMany) > 0 {
		t.Errorf("a node in two tests at once: %v", f.tooMany)
	}
	if f.maxPairs != 4 {
		t.Errorf("at most %d pairs at once, want the round's 4", f.maxPairs)
	}
	if len(f.probes) != 28*3 {
		t.Errorf("%d probes, want 84", len(f.probes))
	}
	starts, tests, ends := 0, 0, 0
	for _, r := range recs {
		switch {
		case r.Start != nil:
			starts++
			if r.Start.Mode != ModeCoordinated || r.Start.Driver != "head" || r.Start.RankFrom != "host list" {
				t.Errorf("start record %+v", r.Start)
			}
		case r.Test != nil:
			tests++
			if r.Test.Role == verbsprobe.RoleClient && r.Test.Figures == nil {
				t.Errorf("a client record without figures: %+v", r.Test)
			}
			if r.Test.Role == verbsprobe.RoleServer && r.Test.Figures != nil {
				t.Errorf("a server record with figures: %+v", r.Test)
			}
		case r.End != nil:
			ends++
			if r.End.Tests != 21 || r.End.Passed != 21 {
				t.Errorf("end record %+v", r.End)
			}
		}
	}
	if starts != 8 || tests != 2*84 || ends != 8 {
		t.Errorf("%d start, %d test, %d end records", starts, tests, ends)
	}
	for i := range 8 {
		if f.checkedAt[i] != 1 {
			t.Errorf("node %d checked %d times", i, f.checkedAt[i])
		}
	}
}

// Parallel bounds the pairs at once.
func TestCoordinatorParallel(t *testing.T) {
	f := newFakeFleet()
	f.delay = 5 * time.Millisecond
	c := &Coordinator{Params: coordParams(8), Prober: f, Parallel: 2}
	if _, _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.maxPairs != 2 {
		t.Errorf("at most %d pairs at once, want 2", f.maxPairs)
	}
}

// A slow node: flagged by the first pass, retested with its pairs and
// confirmed as a node verdict; the retests are a confirm pass in the
// records.
func TestCoordinatorConfirmsSlowNode(t *testing.T) {
	f := newFakeFleet()
	const bad = 4
	f.bw = func(c, s int) float64 {
		if c == bad || s == bad {
			return 4
		}
		return 90 + float64((c+s)%3)
	}
	c := &Coordinator{Params: coordParams(8), Prober: f, Confirm: true, Criteria: DefaultCriteria}
	rep, recs, _ := runCoordinator(t, c)
	if got := verdicts(rep); got != "node node05" {
		t.Fatalf("verdicts %q, want node node05", got)
	}
	confirms := 0
	for _, r := range recs {
		if r.Test != nil && r.Test.Pass == KindConfirm {
			confirms++
			if r.Test.PeerRank != bad && r.Rank != bad {
				t.Errorf("a retest without the suspect: %+v", r)
			}
		}
	}
	if confirms == 0 {
		t.Fatal("no confirm pass in the records")
	}
	retested := 0
	for _, p := range rep.Pairs {
		if p.Retested {
			retested++
		}
	}
	if retested != 7 || rep.Confirm != nil {
		t.Errorf("%d pairs retested, want node05's 7; Confirm %v", retested, rep.Confirm)
	}
}

// A pair bad once and fine when retested is cleared: no verdict.
func TestCoordinatorClearsAFluke(t *testing.T) {
	f := newFakeFleet()
	var mu sync.Mutex
	first := true
	f.bw = func(c, s int) float64 {
		mu.Lock()
		defer mu.Unlock()
		if c == 1 && s == 6 && first {
			first = false
			return 3
		}
		return 90 + float64((c+s)%3)
	}
	c := &Coordinator{Params: coordParams(8), Prober: f, Confirm: true, Criteria: DefaultCriteria}
	rep, _, _ := runCoordinator(t, c)
	if !rep.OK {
		t.Fatalf("verdicts %q, want none after the retest", verdicts(rep))
	}
	cleared := 0
	for _, p := range rep.Pairs {
		if p.Cleared {
			cleared++
		}
	}
	if cleared != 1 {
		t.Errorf("%d pairs cleared, want 1", cleared)
	}
	// Without confirm, the same fluke stands.
	first = true
	c = &Coordinator{Params: coordParams(8), Prober: f, Confirm: false, Criteria: DefaultCriteria}
	rep, _, _ = runCoordinator(t, c)
	if got := verdicts(rep); got != "link node02,node07" || rep.Confirm == nil {
		t.Errorf("confirm off: verdicts %q, want the link; Confirm %v", got, rep.Confirm)
	}
	// Its retest is the coordinator's: sweep run confirm refuses the
	// report, and says what to run.
	if rep.Mode != ModeCoordinated {
		t.Errorf("report mode %q, want %q", rep.Mode, ModeCoordinated)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadConfirm(bytes.NewReader(js)); err == nil || !strings.Contains(err.Error(), "driven by grdma sweep coordinate") ||
		!strings.Contains(err.Error(), "confirm on") {
		t.Errorf("ReadConfirm of a coordinated sweep's report: %v", err)
	}
}

// A node whose exporter cannot be driven and whose responder is down
// takes part in no test: unreachable, its tests skipped rather than
// tried; the others are judged as usual.
func TestCoordinatorUnreachable(t *testing.T) {
	f := newFakeFleet()
	f.noDriver[2], f.noServer[2] = true, true
	c := &Coordinator{Params: coordParams(6), Prober: f, Confirm: true, Criteria: DefaultCriteria}
	rep, recs, _ := runCoordinator(t, c)
	if got := verdicts(rep); got != "unreachable node03" {
		t.Fatalf("verdicts %q, want node03 unreachable", got)
	}
	if !strings.Contains(rep.Verdicts[0].Reason, "cannot be driven") && !strings.Contains(rep.Verdicts[0].Reason, "no_responder") {
		t.Errorf("reason %q", rep.Verdicts[0].Reason)
	}
	for _, p := range f.probes {
		if strings.HasPrefix(p, "2>") {
			t.Errorf("probed from the node that cannot be driven: %s", p)
		}
	}
	// Its responder was tried once, then skipped.
	tried := 0
	for _, p := range f.probes {
		if strings.Contains(p, ">2 ") {
			tried++
		}
	}
	if tried != 1 {
		t.Errorf("node03's responder tried %d times, want once", tried)
	}
	for _, r := range recs {
		if r.Test != nil && (r.Rank == 2 || r.Test.PeerRank == 2) && (r.Test.Down == nil || *r.Test.Down != 2) {
			t.Errorf("a test of node03 without it down: %+v", r.Test)
		}
	}
}

// A node without an RDMA port (its rxe deleted under a running
// exporter, its responder gone): unreachable too.
func TestCoordinatorNoDevice(t *testing.T) {
	f := newFakeFleet()
	f.noDevice[5], f.noServer[5] = true, true
	c := &Coordinator{Params: coordParams(8), Prober: f, Confirm: true, Criteria: DefaultCriteria}
	rep, _, _ := runCoordinator(t, c)
	if got := verdicts(rep); got != "unreachable node06" {
		t.Fatalf("verdicts %q, want node06 unreachable", got)
	}
}

// Interrupted: the tests not run are recorded as skipped, the end
// records say so, nothing hangs.
func TestCoordinatorInterrupted(t *testing.T) {
	f := newFakeFleet()
	f.delay = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(120*time.Millisecond, cancel)
	var out bytes.Buffer
	c := &Coordinator{Params: coordParams(8), Prober: f, Out: NewWriter(&out), Confirm: true, Criteria: DefaultCriteria}
	rep, recs, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, r := range recs {
		if r.End != nil {
			ends++
			if !r.End.Interrupted {
				t.Errorf("end record %+v", r.End)
			}
		}
	}
	if ends != 8 || rep == nil || rep.Missing == 0 {
		t.Errorf("%d end records; report %v", ends, rep)
	}
}

// Parameters that cannot run are refused before anything.
func TestCoordinatorRefusesBadParams(t *testing.T) {
	f := newFakeFleet()
	p := coordParams(1)
	if _, _, err := (&Coordinator{Params: p, Prober: f}).Run(context.Background()); err == nil {
		t.Error("one host: no error")
	}
	c := &Coordinator{Params: coordParams(4), Prober: f, Confirm: true, Criteria: Criteria{BWFraction: 2}}
	if _, _, err := c.Run(context.Background()); err == nil {
		t.Error("bad criteria: no error")
	}
	if len(f.probes) > 0 || len(f.checkedAt) > 0 {
		t.Errorf("probed before refusing: %v", f.probes)
	}
}
