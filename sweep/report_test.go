package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/verbsprobe"
)

// synth makes the records a sweep of params would write: bw(c, s) in
// Gb/s from client c to server s, lat(a, b) in µs; broken(x) marks what
// a pair's tests came to instead (nil: ok).
type synthSpec struct {
	bw      func(c, s int) float64
	lat     func(a, b int) float64
	failed  func(c, s int) *TestRecord // outcome and error of both sides
	sched   *Schedule
	skip    map[int]bool // ranks whose own records are left out
	noStart bool         // no start records (a second pass of the same run)
}

func synth(p Params, sp synthSpec) []Record {
	sched := p.Rounds()
	if sp.sched != nil {
		sched = *sp.sched
	}
	pass := sched.Kind
	id := p.ID()
	var recs []Record
	for i, h := range p.Hosts {
		if !sp.skip[i] && !sp.noStart {
			recs = append(recs, Record{Version: RecordVersion, Sweep: id, Node: h, Rank: i, Where: fmt.Sprintf("%s:1", h),
				Start: &StartRecord{Grdma: "grdma test", Device: "mlx5_0/1", Params: p}})
		}
	}
	for ri, round := range sched.Rounds {
		for _, pair := range round {
			for _, pl := range Plan(pair, p.Tests) {
				var fig *Figures
				if pl.Test.Kind == verbsprobe.TestBandwidth {
					fig = &Figures{BWGbps: sp.bw(pl.Client, pl.Server)}
				} else {
					v := sp.lat(pl.Client, pl.Server)
					fig = &Figures{LatUsec: &LatUsec{Min: v, Median: v, Avg: v, P99: v, Max: v}}
				}
				var bad *TestRecord
				if sp.failed != nil {
					bad = sp.failed(pl.Client, pl.Server)
				}
				for _, side := range []struct {
					rank, peer int
					role       string
				}{{pl.Client, pl.Server, verbsprobe.RoleClient}, {pl.Server, pl.Client, verbsprobe.RoleServer}} {
					if sp.skip[side.rank] {
						continue
					}
					t := &TestRecord{Pass: pass, Round: ri + 1, Index: pl.Index, Peer: p.Hosts[side.peer], PeerRank: side.peer,
						Role: side.role, Test: pl.Test, Outcome: OutcomeOK}
					if bad != nil {
						t.Outcome, t.Error, t.Down = bad.Outcome, bad.Error, bad.Down
					} else if side.role == verbsprobe.RoleClient {
						t.Figures = fig
					}
					recs = append(recs, Record{Version: RecordVersion, Sweep: id, Node: p.Hosts[side.rank], Rank: side.rank,
						Where: fmt.Sprintf("%s:%d", p.Hosts[side.rank], len(recs)), Test: t})
				}
			}
		}
	}
	return recs
}

func testParams(n int, kind string) Params {
	p := Params{Schedule: kind, Tests: []verbsprobe.Test{DefaultBW.WithDefaults(), DefaultLat.WithDefaults()}}
	for i := range n {
		p.Hosts = append(p.Hosts, fmt.Sprintf("node%02d", i+1))
	}
	return p
}

// noisy returns a value around base spread ×spread apart (uniform in
// log between base/sqrt(spread) and base×sqrt(spread)), fixed per pair.
func noisy(base, spread float64, seed uint64) func(a, b int) float64 {
	const max = 64
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var v [max][max]float64
	for a := range max {
		for b := range max {
			v[a][b] = base * math.Pow(spread, r.Float64()-0.5)
		}
	}
	return func(a, b int) float64 { return v[a][b] }
}

func verdictsOf(rep *Report) string {
	var s []string
	for _, v := range rep.Verdicts {
		s = append(s, string(v.Kind)+" "+strings.Join(v.Nodes, ","))
	}
	return strings.Join(s, "; ")
}

// The defaults on an emulated bed, where healthy concurrent pairs spread
// ×4 (0.043 to 0.166 Gb/s measured with 10 guests): no verdict; a node
// throttled to 0.004 Gb/s: a node verdict for it alone.
func TestDefaultsEmulatedBed(t *testing.T) {
	for seed := range uint64(20) {
		p := testParams(10, KindAllPairs)
		bw := noisy(0.085, 3.9, seed)
		lat := noisy(22000, 3.9, seed+100)
		rep, err := Build(synth(p, synthSpec{bw: bw, lat: lat}), DefaultCriteria)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK {
			t.Fatalf("seed %d: healthy bed gave verdicts: %s\n%+v", seed, verdictsOf(rep), rep.Thresholds)
		}
		if !rep.Thresholds[0].Relaxed {
			t.Errorf("seed %d: a ×4 spread relaxes ClusterKit's limit: %+v", seed, rep.Thresholds[0])
		}
		slow := func(c, s int) float64 {
			if c == 6 || s == 6 {
				return 0.004
			}
			return bw(c, s)
		}
		rep, err = Build(synth(p, synthSpec{bw: slow, lat: lat}), DefaultCriteria)
		if err != nil {
			t.Fatal(err)
		}
		if got := verdictsOf(rep); got != "node node07" {
			t.Fatalf("seed %d: throttled node07: %q\n%+v", seed, got, rep.Thresholds)
		}
	}
}

// On hardware, where healthy pairs agree within a few %, the defaults
// are ClusterKit's: a link 10 % slow (89 of 98 Gb/s) is flagged, and a
// pair at 94 % of the best is not.
func TestDefaultsHardware(t *testing.T) {
	p := testParams(16, KindAllPairs)
	bw := noisy(98, 1.03, 1)
	lat := noisy(2.1, 1.03, 2)
	rep, err := Build(synth(p, synthSpec{bw: bw, lat: lat}), DefaultCriteria)
	if err != nil || !rep.OK {
		t.Fatalf("healthy fleet: %v %s", err, verdictsOf(rep))
	}
	th := rep.Thresholds[0]
	if th.Relaxed || math.Abs(th.Limit-0.93*th.Best) > 1e-9 {
		t.Errorf("within a few %% the limit is ClusterKit's 93 %% of the best: %+v", th)
	}
	slowLink := func(c, s int) float64 {
		if (c == 3 && s == 9) || (c == 9 && s == 3) {
			return 0.89 * 98
		}
		return bw(c, s)
	}
	rep, err = Build(synth(p, synthSpec{bw: slowLink, lat: lat}), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if got := verdictsOf(rep); got != "link node04,node10" {
		t.Errorf("a link at 89 %%: %q", got)
	}
	// A latency 2.2 times the best on one link.
	slowLat := func(a, b int) float64 {
		if a+b == 5 && (a == 2 || b == 2) {
			return 2.2 * 2.1 * 1.03
		}
		return lat(a, b)
	}
	rep, err = Build(synth(p, synthSpec{bw: bw, lat: slowLat}), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if got := verdictsOf(rep); got != "link node03,node04" {
		t.Errorf("a link with 2.2× the latency: %q %+v", got, rep.Thresholds)
	}
	// Spread 0: ClusterKit's limits whatever the fleet does.
	c := DefaultCriteria
	c.Spread = 0
	rep, _ = Build(synth(testParams(10, KindAllPairs), synthSpec{bw: noisy(0.085, 3.9, 3), lat: lat}), c)
	if rep.OK {
		t.Error("spread 0 on a ×4 fleet: want verdicts (ClusterKit's limit alone)")
	}
}

func TestFloors(t *testing.T) {
	p := testParams(6, KindAllPairs)
	flat := func(c, s int) float64 { return 50 }
	c := DefaultCriteria
	c.BWFloorGbps = 60
	rep, _ := Build(synth(p, synthSpec{bw: flat, lat: func(a, b int) float64 { return 3 }}), c)
	if rep.OK || len(rep.Pairs) != 15 || !rep.Pairs[0].Bad || !strings.Contains(rep.Pairs[0].Reasons[0], "below the floor 60") {
		t.Fatalf("a floor above every pair: %+v", rep.Pairs[0])
	}
	if got := verdictsOf(rep); !strings.HasPrefix(got, "pairs ") {
		t.Errorf("every pair bad: neither a node nor a link: %q", got)
	}
	c = DefaultCriteria
	c.LatCeilingUsec = 2
	if rep, _ := Build(synth(p, synthSpec{bw: flat, lat: func(a, b int) float64 { return 3 }}), c); rep.OK {
		t.Error("a latency ceiling below every pair: want verdicts")
	}
	// A fraction of the port rate: 50 of 200 Gb/s is below 80 %.
	recs := synth(p, synthSpec{bw: flat, lat: func(a, b int) float64 { return 3 }})
	for _, r := range recs {
		if r.Start != nil {
			r.Start.PortRateGbps = 200
		}
	}
	c = DefaultCriteria
	c.BWPortFraction = 0.8
	if rep, _ := Build(recs, c); rep.OK || !strings.Contains(rep.Pairs[0].Reasons[0], "80% of the port rate") {
		t.Errorf("below 80 %% of the port rate: %+v", rep.Pairs[0])
	}
}

// Quick mode: two partners each are enough to tell a node from a link.
func TestQuickAttribution(t *testing.T) {
	p := testParams(8, KindQuick)
	lat := func(a, b int) float64 { return 2 }
	base := func(c, s int) float64 { return 100 }
	node := func(c, s int) float64 {
		if c == 5 || s == 5 {
			return 10
		}
		return 100
	}
	rep, _ := Build(synth(p, synthSpec{bw: node, lat: lat}), DefaultCriteria)
	if got := verdictsOf(rep); got != "node node06" {
		t.Errorf("quick, bad node06: %q", got)
	}
	link := func(c, s int) float64 {
		if c+s == 5 && (c == 2 || c == 3) {
			return 10
		}
		return base(c, s)
	}
	rep, _ = Build(synth(p, synthSpec{bw: link, lat: lat}), DefaultCriteria)
	if got := verdictsOf(rep); got != "link node03,node04" {
		t.Errorf("quick, bad link 3-4: %q", got)
	}
}

// Two nodes: a bad pair cannot be blamed on one of them.
func TestTwoNodes(t *testing.T) {
	p := testParams(2, KindAllPairs)
	fail := func(c, s int) *TestRecord {
		return &TestRecord{Outcome: OutcomeFailed, Error: "modify_qp_rtr: connection timed out"}
	}
	rep, err := Build(synth(p, synthSpec{bw: func(c, s int) float64 { return 1 }, lat: func(a, b int) float64 { return 1 }, failed: fail}), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != VerdictPairs || !strings.Contains(rep.Verdicts[0].Reason, "two nodes") {
		t.Errorf("%+v", rep.Verdicts)
	}
}

// A confirm pass: the retest clears a flagged pair, or confirms it.
func TestConfirmPass(t *testing.T) {
	p := testParams(6, KindAllPairs)
	lat := func(a, b int) float64 { return 2 }
	bw := func(c, s int) float64 {
		if c+s == 1 {
			return 40
		}
		return 100
	}
	main := synth(p, synthSpec{bw: bw, lat: lat})
	rep, _ := Build(main, DefaultCriteria)
	if rep.OK || rep.Confirm == nil {
		t.Fatalf("want the flagged pair 0-1 and a confirm schedule: %+v", rep)
	}
	confirm := *rep.Confirm
	retest := func(good bool) []Record {
		f := func(c, s int) float64 {
			if good {
				return 99
			}
			return 40
		}
		recs := synth(p, synthSpec{bw: f, lat: lat, sched: &confirm, noStart: true})
		return append(append([]Record(nil), main...), recs...)
	}
	rep, err := Build(retest(true), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Confirm != nil || !rep.Pairs[0].Retested || !rep.Pairs[0].Cleared {
		t.Errorf("cleared on retest: %s %+v", verdictsOf(rep), rep.Pairs[0])
	}
	rep, _ = Build(retest(false), DefaultCriteria)
	if rep.OK || !rep.Pairs[0].Retested || rep.Pairs[0].Cleared {
		t.Errorf("confirmed on retest: %s %+v", verdictsOf(rep), rep.Pairs[0])
	}
}

func TestBuildRefuses(t *testing.T) {
	p := testParams(4, KindAllPairs)
	ok := synthSpec{bw: func(c, s int) float64 { return 1 }, lat: func(a, b int) float64 { return 1 }}
	recs := synth(p, ok)
	q := p
	q.Tests = []verbsprobe.Test{DefaultBW.WithDefaults()}
	other := synth(q, ok)
	for _, tc := range []struct {
		name string
		recs []Record
		want string
	}{
		{"none", nil, "no sweep records"},
		{"other parameters", append(append([]Record(nil), recs...), other...), "records of different sweeps"},
		{"two runs", append(append([]Record(nil), recs...), recs...), "two runs are mixed"},
		{"no start", recs[4:], "no start record"},
		{"test of another sweep", append(append([]Record(nil), recs[:4]...), other[5]), "belongs to sweep"},
		{"foreign node name", func() []Record {
			r := append([]Record(nil), recs...)
			r[5].Node = "intruder"
			return r
		}(), `node "intruder" is not rank`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(tc.recs, DefaultCriteria); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Build(recs, Criteria{BWFraction: 2}); err == nil {
		t.Error("bad criteria accepted")
	}
}

// A node's records missing: its partners' stand in for it.
func TestMissingNode(t *testing.T) {
	p := testParams(5, KindAllPairs)
	recs := synth(p, synthSpec{bw: func(c, s int) float64 { return 10 }, lat: func(a, b int) float64 { return 2 }, skip: map[int]bool{2: true}})
	rep, err := Build(recs, DefaultCriteria)
	if err != nil || !rep.OK || rep.Missing != 0 || rep.Nodes[2].Records || rep.Nodes[2].Tests == 0 {
		t.Fatalf("%v %+v", err, rep)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	p := testParams(3, KindAllPairs)
	recs := synth(p, synthSpec{bw: func(c, s int) float64 { return 10 }, lat: func(a, b int) float64 { return 2 }})
	var buf bytes.Buffer
	w := NewWriter(&buf)
	buf.WriteString("srun: launching step 0\n\n")
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	back, skipped, err := ReadRecords(&buf, "out.jsonl")
	if err != nil || skipped != 1 || len(back) != len(recs) {
		t.Fatalf("ReadRecords: %d records, %d skipped, %v", len(back), skipped, err)
	}
	if back[0].Where != "out.jsonl:3" {
		t.Errorf("Where = %q", back[0].Where)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"grdma_sweep":2,"start":{}}`, "newer than this grdma's 1"},
		{`{"hello":1}`, "no \"grdma_sweep\" version"},
		{`{"grdma_sweep":1}`, "one of start, test and end"},
		{`{"grdma_sweep":1,"start":{},"end":{}}`, "one of start, test and end"},
		{`{"grdma_sweep":1,"rank":-1,"end":{}}`, "rank -1"},
		{`{"grdma_sweep":1,"rank":0,"test":{"peer_rank":0,"role":"client"}}`, "peer rank 0"},
		{`{"grdma_sweep":1,"rank":0,"test":{"peer_rank":1,"role":"boss"}}`, `role "boss"`},
		{`{"grdma_sweep":1,`, "not a sweep record"},
	} {
		_, _, err := ReadRecords(strings.NewReader(tc.line), "f")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "f:1") {
			t.Errorf("%s: %v, want %q", tc.line, err, tc.want)
		}
	}
	b, _ := json.Marshal(recs[3])
	if !strings.Contains(string(b), `"grdma_sweep":1`) || strings.Contains(string(b), "Where") {
		t.Errorf("record JSON: %s", b)
	}
}

// One test of one pair beyond a relaxed limit, the pair's other tests
// within it (6.1's healthy bed in main's make e2e: node2→node5 at a fifth
// of the median, node5→node2 fine): suspect, retested, no verdict. Two
// tests of the pair beyond it, a node slow in one direction only, or a
// retest that fails again: verdicts as before. On hardware (no
// relaxation) one bad test is a verdict, as in ClusterKit.
func TestSuspectPair(t *testing.T) {
	p := testParams(8, KindAllPairs)
	bw := noisy(0.03, 3.3, 7)
	lat := noisy(11000, 3.3, 8)
	with := func(bad func(c, s int) bool) func(c, s int) float64 {
		return func(c, s int) float64 {
			if bad(c, s) {
				return 0.003
			}
			return bw(c, s)
		}
	}
	build := func(recs []Record) *Report {
		t.Helper()
		rep, err := Build(recs, DefaultCriteria)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	pairOf := func(rep *Report, a, b int) PairReport {
		for _, pr := range rep.Pairs {
			if pr.RankA == a && pr.RankB == b {
				return pr
			}
		}
		t.Fatalf("no pair %d-%d", a, b)
		return PairReport{}
	}

	oneWay := with(func(c, s int) bool { return c == 1 && s == 4 })
	main := synth(p, synthSpec{bw: oneWay, lat: lat})
	rep := build(main)
	pr := pairOf(rep, 1, 4)
	if !rep.OK || !rep.Thresholds[0].Relaxed || pr.Bad || !pr.Suspect || len(pr.Reasons) != 1 {
		t.Fatalf("one test beyond the relaxed limit: want no verdict and a suspect pair: %s %+v %+v", verdictsOf(rep), pr, rep.Thresholds[0])
	}
	if rep.Confirm == nil || !slices.Contains(rep.Confirm.Pairs(), Pair{1, 4}) {
		t.Errorf("the suspect pair is retested: %+v", rep.Confirm)
	}
	var text bytes.Buffer
	if err := json.NewEncoder(&text).Encode(pr); err != nil || !strings.Contains(text.String(), `"suspect":true`) {
		t.Errorf("JSON of a suspect pair: %s %v", text.String(), err)
	}

	// The retest fails too: a link verdict.
	confirm := *rep.Confirm
	again := append(slices.Clone(main), synth(p, synthSpec{bw: oneWay, lat: lat, sched: &confirm, noStart: true})...)
	if rep := build(again); verdictsOf(rep) != "link node02,node05" || !pairOf(rep, 1, 4).Retested {
		t.Errorf("a suspect pair bad on its retest: %q", verdictsOf(rep))
	}
	// Both ways bad: a link verdict from the first pass.
	both := with(func(c, s int) bool { return (c == 1 && s == 4) || (c == 4 && s == 1) })
	if rep := build(synth(p, synthSpec{bw: both, lat: lat})); verdictsOf(rep) != "link node02,node05" {
		t.Errorf("both ways bad: %q", verdictsOf(rep))
	}
	// A node slow sending only: every pair of it suspect, the node bad.
	egress := with(func(c, s int) bool { return c == 6 })
	if rep := build(synth(p, synthSpec{bw: egress, lat: lat})); verdictsOf(rep) != "node node07" {
		t.Errorf("a node slow one way: %q", verdictsOf(rep))
	}
	// A failed test is never merely suspect.
	failed := func(c, s int) *TestRecord {
		if c == 1 && s == 4 {
			return &TestRecord{Outcome: OutcomeFailed, Error: "send: 0 of 1 completions"}
		}
		return nil
	}
	if rep := build(synth(p, synthSpec{bw: bw, lat: lat, failed: failed})); rep.OK || pairOf(rep, 1, 4).Suspect {
		t.Errorf("a failed test: %q %+v", verdictsOf(rep), pairOf(rep, 1, 4))
	}

	// Hardware: one direction at 89 % of 98 Gb/s is a link verdict.
	hp := testParams(16, KindAllPairs)
	hbw := noisy(98, 1.03, 1)
	oneSlow := func(c, s int) float64 {
		if c == 3 && s == 9 {
			return 0.89 * 98
		}
		return hbw(c, s)
	}
	if rep := build(synth(hp, synthSpec{bw: oneSlow, lat: noisy(2.1, 1.03, 2)})); verdictsOf(rep) != "link node04,node10" {
		t.Errorf("hardware, one direction at 89 %%: %q", verdictsOf(rep))
	}
}
