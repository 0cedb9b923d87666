package sweep

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/grdma/grdma/verbsprobe"
)

// Criteria say when a pair is bad. The relative limits are ClusterKit's:
// bandwidth below BWFraction of the fleet's best pair, latency above
// LatFactor times the best. Spread relaxes them on a fleet whose healthy
// pairs spread more than that allows (see the package documentation);
// the floors are absolute, whatever the fleet does.
type Criteria struct {
	BWFraction float64 // of the best bandwidth (0.93)
	LatFactor  float64 // of the best latency (2.1)
	// Spread: a pair is bad only below the median bandwidth lowered
	// Spread times by the ratio of the median to the pairs' 90th
	// percentile (AnchorPercentile; above the median latency raised
	// likewise by its ratio to the best), when that is further from the
	// median than the relative limit. 0 keeps ClusterKit's limits.
	Spread float64
	// BWFloorGbps: bad below this many Gb/s; 0: none.
	BWFloorGbps float64
	// BWPortFraction: bad below this fraction of the slower port's rate
	// (the nodes' start records say it); 0: none.
	BWPortFraction float64
	// LatCeilingUsec: bad above this many microseconds; 0: none.
	LatCeilingUsec float64
}

// DefaultCriteria are ClusterKit's limits with Spread 2.5.
var DefaultCriteria = Criteria{BWFraction: 0.93, LatFactor: 2.1, Spread: 2.5}

// Validate reports criteria that cannot be applied.
func (c Criteria) Validate() error {
	switch {
	case c.BWFraction <= 0 || c.BWFraction > 1:
		return fmt.Errorf("bw-fraction %g: from 0 to 1", c.BWFraction)
	case c.LatFactor < 1:
		return fmt.Errorf("lat-factor %g: 1 or more", c.LatFactor)
	case c.Spread < 0 || c.Spread > 10:
		return fmt.Errorf("spread %g: from 0 to 10", c.Spread)
	case c.BWFloorGbps < 0 || c.LatCeilingUsec < 0:
		return errors.New("floors are not negative")
	case c.BWPortFraction < 0 || c.BWPortFraction > 1:
		return fmt.Errorf("port fraction %g: from 0 to 1", c.BWPortFraction)
	}
	return nil
}

// Threshold is the limit one metric was judged by, and what it came
// from.
type Threshold struct {
	Metric  string  `json:"metric"`  // "bw_gbps" or "lat_usec"
	Samples int     `json:"samples"` // measurements of the main pass
	Best    float64 `json:"best"`
	Median  float64 `json:"median"`
	// Anchor is what the spread is measured to from the median: for
	// bandwidth the 90th percentile of the pairs (AnchorPercentile), for
	// latency the best. On emulated fleets the single best bandwidth pair
	// is an outlier (3 times the median), and a limit anchored on it fell
	// below a planted fault.
	Anchor float64 `json:"anchor"`
	// Relative is ClusterKit's limit: BWFraction of the best, LatFactor
	// times the best.
	Relative float64 `json:"relative"`
	// Limit is the one applied: Relative, or relaxed by the spread.
	Limit   float64 `json:"limit"`
	Relaxed bool    `json:"relaxed"`
	// Floor is the absolute limit (BWFloorGbps, LatCeilingUsec), 0: none.
	Floor float64 `json:"floor,omitempty"`
}

// bad reports whether v breaks the threshold, and how.
func (t Threshold) bad(v float64) (string, bool) {
	if t.Samples == 0 {
		return "", false
	}
	if t.Metric == metricBW {
		switch {
		case v < t.Limit:
			return fmt.Sprintf("below %.3g", t.Limit), true
		case t.Floor > 0 && v < t.Floor:
			return fmt.Sprintf("below the floor %.3g", t.Floor), true
		}
		return "", false
	}
	switch {
	case v > t.Limit:
		return fmt.Sprintf("above %.3g", t.Limit), true
	case t.Floor > 0 && v > t.Floor:
		return fmt.Sprintf("above the ceiling %.3g", t.Floor), true
	}
	return "", false
}

// Metrics.
const (
	metricBW  = "bw_gbps"
	metricLat = "lat_usec"
)

// State is what a cell of a matrix, or a test, came to.
type State string

// States.
const (
	StateNone     State = ""          // not measured (no record, or the diagonal)
	StateOK       State = "ok"        // measured and within the limits
	StateBad      State = "bad"       // measured and beyond a limit
	StateFailed   State = "failed"    // the test failed
	StateNoAnswer State = "no_answer" // a node did not take part
	StateRefused  State = "refused"   // a node refused
	StateSkipped  State = "skipped"   // not run
)

// Cell is one value of a matrix: Value is nil when nothing was measured.
type Cell struct {
	Value *float64 `json:"value"`
	State State    `json:"state"`
}

// Matrix is a metric of every ordered pair: Cells[i][j] is what rank i
// measured with rank j as its server (bandwidth: i sends to j; latency:
// both cells of a pair show the one measurement).
type Matrix struct {
	Metric string   `json:"metric"`
	Unit   string   `json:"unit"`
	Cells  [][]Cell `json:"cells"`
}

// PairReport is one pair's judgement.
type PairReport struct {
	A       string   `json:"a"`
	B       string   `json:"b"`
	RankA   int      `json:"rank_a"`
	RankB   int      `json:"rank_b"`
	Bad     bool     `json:"bad"`
	Reasons []string `json:"reasons,omitempty"`
	// Suspect is set, and Bad not, when a single measurement of the pair
	// is beyond a limit that the fleet's own spread relaxed while its
	// other measurements passed and no retest ran: on a fleet whose
	// healthy pairs spread that much, one such reading is not evidence
	// enough for a verdict of its own. A suspect pair counts against its
	// nodes (a node with most of its pairs flagged is bad) and is
	// retested (Confirm), but makes no link or pairs verdict.
	Suspect bool `json:"suspect,omitempty"`
	// Retested is set when a confirm pass retested the pair: its verdict
	// is the retest's; Cleared when the retest passed.
	Retested bool `json:"retested,omitempty"`
	Cleared  bool `json:"cleared,omitempty"`
	// Unreachable is set when a node of the pair took no part in the
	// sweep: the pair is explained by it, not judged.
	Unreachable bool `json:"unreachable,omitempty"`
}

// NodeReport is what is known of a node.
type NodeReport struct {
	Name    string `json:"name"`
	Rank    int    `json:"rank"`
	Records bool   `json:"records"` // its own records were given
	Device  string `json:"device,omitempty"`
	Grdma   string `json:"grdma,omitempty"`
	Error   string `json:"error,omitempty"` // its device failed at start
	Tests   int    `json:"tests"`           // tests it took part in that ran
	Bad     int    `json:"bad_pairs"`       // judged pairs bad or suspect
	Pairs   int    `json:"pairs"`           // judged pairs
}

// Report is the judgement of a sweep: matrices, thresholds, pairs,
// verdicts, and the retests to run (Confirm) when a pass flagged pairs.
type Report struct {
	Sweep  string `json:"sweep"`
	Params Params `json:"params"`
	// Mode is the start records' (StartRecord.Mode): ModeCoordinated
	// when sweep coordinate drove the sweep, whose retest is then the
	// coordinator's; "" when every node ran its part.
	Mode       string       `json:"mode,omitempty"`
	Nodes      []NodeReport `json:"nodes"`
	Criteria   Criteria     `json:"criteria"`
	BW         *Matrix      `json:"bw,omitempty"`
	Lat        *Matrix      `json:"lat,omitempty"`
	Thresholds []Threshold  `json:"thresholds"`
	Pairs      []PairReport `json:"pairs"`
	Verdicts   []Verdict    `json:"verdicts"`
	// Confirm is the retest of flagged pairs and suspect nodes, nil when
	// nothing was flagged or a confirm pass is already among the records.
	Confirm *Schedule `json:"confirm,omitempty"`
	// Missing counts planned tests that no record mentions (nodes whose
	// output was not given, and whose partners' was not either).
	Missing int `json:"missing"`
	// Skipped counts input lines that were not records.
	Skipped int  `json:"skipped_lines"`
	OK      bool `json:"ok"` // no verdict

	confirmRan bool // a confirm pass is among the records
}

// testKey names one test of a sweep.
type testKey struct {
	pass           string
	round, index   int
	client, server int
}

// instance is one test with what its two sides recorded.
type instance struct {
	key            testKey
	test           verbsprobe.Test
	client, server *TestRecord
	outcome        Outcome
	down           int // rank that took no part, -1
	reason         string
	figures        *Figures
	state          State
}

// MaxReportBytes bounds the JSON report ReadConfirm reads: a report of
// MaxHosts nodes, every pair with its reasons, stays well under it.
const MaxReportBytes = 256 << 20

// ReadConfirm reads a JSON report (grdma -j sweep report) and returns the
// sweep's parameters and the retest it asks for (Report.Confirm), for a
// launched retest: every node runs Runner with Retest set, and sweep
// report over both runs' records judges each flagged pair by its retest.
// It fails when the report asks for no retest (nothing was flagged, or
// its records already hold one), when the two do not fit together, and
// for a coordinated sweep (Report.Mode), whose nodes run no sweep of their
// own: its retest is the coordinator's.
func ReadConfirm(r io.Reader) (Params, Schedule, error) {
	var rep Report
	dec := json.NewDecoder(io.LimitReader(r, MaxReportBytes))
	if err := dec.Decode(&rep); err != nil {
		return Params{}, Schedule{}, fmt.Errorf("not a JSON sweep report (grdma -j sweep report): %v", err)
	}
	if rep.Sweep == "" || len(rep.Params.Hosts) == 0 {
		return Params{}, Schedule{}, errors.New("not a JSON sweep report (grdma -j sweep report): no sweep or hosts")
	}
	if err := rep.Params.Validate(); err != nil {
		return Params{}, Schedule{}, err
	}
	if id := rep.Params.ID(); id != rep.Sweep {
		return Params{}, Schedule{}, fmt.Errorf("the report names sweep %s but its parameters make sweep %s: it was edited or is of another grdma", rep.Sweep, id)
	}
	if rep.Mode == ModeCoordinated {
		return Params{}, Schedule{}, fmt.Errorf("sweep %s was driven by grdma sweep coordinate, whose nodes run no sweep of their own: retest with sweep coordinate and confirm on (its default), which retests what it flags", rep.Sweep)
	}
	if rep.Confirm == nil {
		return Params{}, Schedule{}, fmt.Errorf("sweep %s's report asks for no retest: no pair was flagged, or its records hold a retest already", rep.Sweep)
	}
	if err := rep.Confirm.check(len(rep.Params.Hosts)); err != nil {
		return Params{}, Schedule{}, fmt.Errorf("sweep %s's retest: %v", rep.Sweep, err)
	}
	return rep.Params, *rep.Confirm, nil
}

// Build judges the records of a sweep (every node's, read with
// ReadRecords; a missing node's partners' records stand in for it). It
// refuses records of different parameters, of two runs, and records
// without the start record that says what they ran.
func Build(recs []Record, c Criteria) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("no sweep records")
	}
	rep := &Report{Criteria: c}
	// starts are the first pass's start records, retests a launched
	// retest's (StartRecord.Pass): one of each per rank.
	starts, retests := map[int]*Record{}, map[int]*Record{}
	var firstStart *Record
	for i := range recs {
		r := &recs[i]
		if r.Start == nil {
			continue
		}
		if firstStart == nil {
			firstStart = r
		} else if r.Sweep != firstStart.Sweep || r.Start.Params.ID() != firstStart.Start.Params.ID() {
			return nil, fmt.Errorf("records of different sweeps: %s ran %s; %s ran %s: %s; report each sweep on its own",
				firstStart.Where, firstStart.Start.Params, r.Where, r.Start.Params, firstStart.Start.Params.Diff(r.Start.Params))
		}
		by, what := starts, "start records"
		switch r.Start.Pass {
		case "":
		case KindConfirm:
			by, what = retests, "retests' start records"
		default:
			return nil, fmt.Errorf("%s: a start record of pass %q, which this grdma does not know", r.Where, r.Start.Pass)
		}
		if prev, dup := by[r.Rank]; dup {
			return nil, fmt.Errorf("two %s of rank %d (%s, %s): records of two runs are mixed; report each run on its own", what, r.Rank, prev.Where, r.Where)
		}
		by[r.Rank] = r
	}
	if firstStart == nil {
		return nil, fmt.Errorf("no start record (%s and the others): give each node's whole output", recs[0].Where)
	}
	if len(starts) == 0 {
		return nil, fmt.Errorf("only a retest's records (%s and the others): give the first pass's records too", firstStart.Where)
	}
	p := firstStart.Start.Params
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", firstStart.Where, err)
	}
	rep.Sweep, rep.Params, rep.Mode = firstStart.Sweep, p, firstStart.Start.Mode
	n := len(p.Hosts)
	for i := range recs {
		r := &recs[i]
		if r.Sweep != rep.Sweep {
			return nil, fmt.Errorf("%s belongs to sweep %s, %s to sweep %s: report each sweep on its own", r.Where, r.Sweep, firstStart.Where, rep.Sweep)
		}
		if r.Rank >= n || (r.Test != nil && r.Test.PeerRank >= n) {
			return nil, fmt.Errorf("%s: rank outside the sweep's %d hosts", r.Where, n)
		}
		if r.Node != p.Hosts[r.Rank] {
			return nil, fmt.Errorf("%s: node %q is not rank %d of the host list (%s)", r.Where, r.Node, r.Rank, p.Hosts[r.Rank])
		}
	}
	for i, h := range p.Hosts {
		nr := NodeReport{Name: h, Rank: i}
		if s := starts[i]; s != nil {
			nr.Records, nr.Device, nr.Grdma, nr.Error = true, s.Start.Device, s.Start.Grdma, s.Start.Error
		}
		rep.Nodes = append(rep.Nodes, nr)
	}

	insts, err := collect(recs, rep)
	if err != nil {
		return nil, err
	}
	main := p.Schedule
	rep.Thresholds = thresholds(insts, main, c, starts)
	unreachable := rep.judge(insts, main, c, starts)
	rep.matrices(insts, main)
	rep.attribute(unreachable)
	rep.OK = len(rep.Verdicts) == 0
	return rep, nil
}

// collect pairs up the test records of both sides of each test, and
// counts the planned tests no record mentions.
func collect(recs []Record, rep *Report) (map[testKey]*instance, error) {
	insts := map[testKey]*instance{}
	type side struct {
		rank         int
		pass         string
		round, index int
	}
	seen := map[side]string{}
	for i := range recs {
		r := &recs[i]
		t := r.Test
		if t == nil {
			continue
		}
		client, server := t.sides(r.Rank)
		k := testKey{pass: t.Pass, round: t.Round, index: t.Index, client: client, server: server}
		id := side{r.Rank, t.Pass, t.Round, t.Index}
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s and %s both record rank %d's test %d of round %d: records of two runs are mixed; report each run on its own",
				prev, r.Where, r.Rank, t.Index+1, t.Round)
		}
		seen[id] = r.Where
		in := insts[k]
		if in == nil {
			in = &instance{key: k, test: t.Test, down: -1}
			insts[k] = in
		}
		if t.Role == verbsprobe.RoleClient {
			in.client = t
		} else {
			in.server = t
		}
	}
	for _, in := range insts {
		in.merge()
	}
	// Planned tests of the main pass that nobody recorded.
	sched := rep.Params.Rounds()
	for ri, round := range sched.Rounds {
		for _, pair := range round {
			for _, pl := range Plan(pair, rep.Params.Tests) {
				k := testKey{pass: sched.Kind, round: ri + 1, index: pl.Index, client: pl.Client, server: pl.Server}
				if insts[k] == nil {
					rep.Missing++
				}
			}
		}
	}
	return insts, nil
}

// merge decides a test's outcome from its two sides.
func (in *instance) merge() {
	sides := []*TestRecord{in.client, in.server}
	first := func(o Outcome) *TestRecord {
		for _, s := range sides {
			if s != nil && s.Outcome == o {
				return s
			}
		}
		return nil
	}
	for _, o := range []Outcome{OutcomeNoAnswer, OutcomeSkipped, OutcomeRefused, OutcomeFailed} {
		s := first(o)
		if s == nil {
			continue
		}
		in.outcome, in.reason = o, s.Error
		if s.Down != nil {
			in.down = *s.Down
		}
		if o == OutcomeFailed {
			// The side that failed on its own says more than the one that
			// heard of it from its peer.
			for _, s := range sides {
				if s != nil && s.Outcome == OutcomeFailed && !strings.HasPrefix(s.Error, "the peer failed") {
					in.reason = s.Error
					if s.Step != "" {
						in.reason = "at " + s.Step + ": " + s.Error
					}
					break
				}
			}
		}
		return
	}
	in.outcome = OutcomeOK
	if in.client != nil {
		in.figures = in.client.Figures
	}
}

// thresholds computes the limits from the main pass's measurements. The
// fleet's median is the median of the nodes' medians: a bad node's pairs
// (a quarter of an 8-node fleet's) pull the median of all pairs down, and
// with it the limit, but move the other nodes' medians little.
func thresholds(insts map[testKey]*instance, main string, c Criteria, starts map[int]*Record) []Threshold {
	var bw, lat []float64
	bwBy, latBy := map[int][]float64{}, map[int][]float64{}
	for _, in := range insts {
		if in.key.pass != main || in.outcome != OutcomeOK || in.figures == nil {
			continue
		}
		switch in.test.Kind {
		case verbsprobe.TestBandwidth:
			v := in.figures.BWGbps
			bw = append(bw, v)
			bwBy[in.key.client] = append(bwBy[in.key.client], v)
			bwBy[in.key.server] = append(bwBy[in.key.server], v)
		case verbsprobe.TestLatency:
			if in.figures.LatUsec != nil {
				v := in.figures.LatUsec.Median
				lat = append(lat, v)
				latBy[in.key.client] = append(latBy[in.key.client], v)
				latBy[in.key.server] = append(latBy[in.key.server], v)
			}
		}
	}
	var out []Threshold
	if len(bw) > 0 {
		t := Threshold{Metric: metricBW, Samples: len(bw), Best: slices.Max(bw), Median: medianOfMedians(bwBy), Floor: c.BWFloorGbps}
		t.Anchor = percentile(bw, AnchorPercentile)
		t.Relative = c.BWFraction * t.Best
		t.Limit = t.Relative
		if c.Spread > 0 && t.Anchor > 0 && t.Median > 0 {
			adapt := t.Median * math.Pow(t.Median/t.Anchor, c.Spread)
			if adapt < t.Limit {
				// Where the upper tail is short the spread above the
				// median understates the one below it: on the bed
				// healthy pairs read down to M/2.8 one way.
				t.Limit, t.Relaxed = min(adapt, RelaxedBWMax*t.Median), true
			}
		}
		out = append(out, t)
	}
	if len(lat) > 0 {
		t := Threshold{Metric: metricLat, Samples: len(lat), Best: slices.Min(lat), Median: medianOfMedians(latBy), Floor: c.LatCeilingUsec}
		t.Anchor = t.Best
		t.Relative = c.LatFactor * t.Best
		t.Limit = t.Relative
		if c.Spread > 0 && t.Anchor > 0 && t.Median > 0 {
			if adapt := t.Median * math.Pow(t.Median/t.Anchor, c.Spread); adapt > t.Limit {
				t.Limit, t.Relaxed = adapt, true
			}
		}
		out = append(out, t)
	}
	return out
}

// medianOfMedians is the median of each node's median.
func medianOfMedians(by map[int][]float64) float64 {
	var meds []float64
	for _, v := range by {
		meds = append(meds, median(v))
	}
	return median(meds)
}

// RelaxedBWMax is the most a relaxed bandwidth limit may be, as a
// fraction of the fleet's median: a fleet spread enough to relax the
// limit has healthy pairs far below its median (M/2.6 to M/2.8 one way
// on the emulated bed), its faults further still (4 Mb/s: M/8.7 to
// M/16), and where its pairs spread little above the median the 90th
// percentile alone put the limit at M/1.75, flagging four healthy pairs
// of one e2e sweep.
const RelaxedBWMax = 0.25

// AnchorPercentile is the percentile of the pairs' bandwidths that the
// relaxed limit measures the fleet's spread to (Threshold.Anchor).
const AnchorPercentile = 0.9

// percentile of values, p from 0 to 1, interpolated linearly between
// the two nearest ranks (p 1: the largest).
func percentile(v []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(v))
	pos := p * float64(len(s)-1)
	lo := int(pos)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (s[lo+1]-s[lo])*(pos-float64(lo))
}

// median of values (the mean of the middle two of an even count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func (rep *Report) threshold(metric string) Threshold {
	for _, t := range rep.Thresholds {
		if t.Metric == metric {
			return t
		}
	}
	return Threshold{Metric: metric}
}

// judge sets each test's state and each pair's verdict, and returns the
// nodes that took no part (unreachable, with the reason).
func (rep *Report) judge(insts map[testKey]*instance, main string, c Criteria, starts map[int]*Record) map[int]string {
	name := func(r int) string { return rep.Params.Hosts[r] }
	// A node that never took part in a test, and that a partner found
	// down, is unreachable.
	tookPart, downBy := map[int]bool{}, map[int][]string{}
	for _, in := range insts {
		switch {
		case in.outcome == OutcomeOK || in.outcome == OutcomeFailed:
			tookPart[in.key.client], tookPart[in.key.server] = true, true
		case in.down >= 0:
			downBy[in.down] = append(downBy[in.down], in.reason)
		}
	}
	unreachable := map[int]string{}
	for r, reasons := range downBy {
		if tookPart[r] {
			continue
		}
		why := fmt.Sprintf("took part in no test: %s", firstReason(reasons))
		if s := starts[r]; s != nil && s.Start.Error != "" {
			why = "its device failed at start: " + strings.Join(strings.Fields(s.Start.Error), " ") // one line: the error may hold its hint on a line of its own
		}
		unreachable[r] = why
	}

	bwT, latT := rep.threshold(metricBW), rep.threshold(metricLat)
	type pairAcc struct {
		main, confirm []string // reasons the tests were bad
		// mainOK counts the main pass's measurements within the limits,
		// mainWeak its bad ones beyond a relaxed limit only.
		mainOK, mainWeak int
		ranMain          bool
		ranConfirm       bool
		unreachable      bool
	}
	pairs := map[Pair]*pairAcc{}
	acc := func(a, b int) *pairAcc {
		k := Pair{a, b}.key()
		if pairs[k] == nil {
			pairs[k] = &pairAcc{}
		}
		return pairs[k]
	}
	keys := slices.SortedFunc(mapKeys(insts), func(a, b testKey) int {
		return cmp.Or(cmp.Compare(a.pass, b.pass), cmp.Compare(a.round, b.round), cmp.Compare(a.client, b.client), cmp.Compare(a.index, b.index))
	})
	for _, k := range keys {
		in := insts[k]
		pa := acc(k.client, k.server)
		_, uc := unreachable[k.client]
		_, us := unreachable[k.server]
		var why string
		weak := false // beyond a relaxed limit only: no floor, no failure
		switch {
		case uc || us:
			pa.unreachable = true
			in.state = State(in.outcome)
			continue
		case in.outcome == OutcomeOK && in.figures != nil:
			in.state = StateOK
			if in.test.Kind == verbsprobe.TestBandwidth {
				v := in.figures.BWGbps
				if how, bad := bwT.bad(v); bad {
					why = fmt.Sprintf("bw %s %s→%s %.3g Gb/s, %s", in.test.Op, name(k.client), name(k.server), v, how)
					weak = bwT.Relaxed && !(bwT.Floor > 0 && v < bwT.Floor)
				} else if f := c.BWPortFraction; f > 0 {
					if limit := f * slowerPort(starts, k.client, k.server); limit > 0 && v < limit {
						why = fmt.Sprintf("bw %s %s→%s %.3g Gb/s, below %.0f%% of the port rate (%.3g)", in.test.Op, name(k.client), name(k.server), v, f*100, limit)
					}
				}
			} else if l := in.figures.LatUsec; l != nil {
				if how, bad := latT.bad(l.Median); bad {
					why = fmt.Sprintf("lat %s %s–%s %.3g µs, %s", in.test.Op, name(k.client), name(k.server), l.Median, how)
					weak = latT.Relaxed && !(latT.Floor > 0 && l.Median > latT.Floor)
				}
			}
			if why != "" {
				in.state = StateBad
			}
		case in.outcome == OutcomeOK:
			in.state = StateNone // the client's record is missing
		default:
			in.state = State(in.outcome)
			why = fmt.Sprintf("%s %s→%s %s: %s", in.test, name(k.client), name(k.server), strings.ReplaceAll(string(in.outcome), "_", " "), in.reason)
		}
		if k.pass == KindConfirm {
			pa.ranConfirm = true
			if why != "" {
				pa.confirm = append(pa.confirm, why)
			}
		} else if k.pass == main {
			pa.ranMain = true
			switch {
			case why == "" && in.state == StateOK:
				pa.mainOK++
			case why != "":
				pa.main = append(pa.main, why)
				if weak {
					pa.mainWeak++
				}
			}
		}
	}
	confirmRan := false
	for _, k := range slices.SortedFunc(mapKeys(pairs), func(a, b Pair) int { return cmp.Or(cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B)) }) {
		pa := pairs[k]
		pr := PairReport{A: name(k.A), B: name(k.B), RankA: k.A, RankB: k.B, Unreachable: pa.unreachable}
		switch {
		case pa.unreachable:
		case pa.ranConfirm:
			confirmRan = true
			pr.Retested = true
			pr.Bad, pr.Reasons = len(pa.confirm) > 0, pa.confirm
			pr.Cleared = !pr.Bad && len(pa.main) > 0
		case pa.ranMain:
			pr.Bad, pr.Reasons = len(pa.main) > 0, pa.main
			if len(pa.main) == 1 && pa.mainWeak == 1 && pa.mainOK > 0 {
				pr.Bad, pr.Suspect = false, true
			}
		default:
			continue
		}
		rep.Pairs = append(rep.Pairs, pr)
	}
	for _, in := range insts {
		if in.state == StateOK || in.state == StateBad || in.state == StateFailed {
			rep.Nodes[in.key.client].Tests++
			rep.Nodes[in.key.server].Tests++
		}
	}
	rep.confirmRan = confirmRan
	return unreachable
}

func firstReason(reasons []string) string {
	slices.Sort(reasons)
	for _, r := range reasons {
		if r != "" {
			return r
		}
	}
	return "no partner heard from it"
}

func slowerPort(starts map[int]*Record, a, b int) float64 {
	ra, rb := starts[a], starts[b]
	if ra == nil || rb == nil || ra.Start.PortRateGbps <= 0 || rb.Start.PortRateGbps <= 0 {
		return 0
	}
	return min(ra.Start.PortRateGbps, rb.Start.PortRateGbps)
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// matrices fills the bandwidth and latency matrices from the main pass.
func (rep *Report) matrices(insts map[testKey]*instance, main string) {
	n := len(rep.Params.Hosts)
	newMatrix := func(metric, unit string) *Matrix {
		m := &Matrix{Metric: metric, Unit: unit, Cells: make([][]Cell, n)}
		for i := range m.Cells {
			m.Cells[i] = make([]Cell, n)
		}
		return m
	}
	for _, t := range rep.Params.Tests {
		switch {
		case t.Kind == verbsprobe.TestBandwidth && rep.BW == nil:
			rep.BW = newMatrix(metricBW, "Gb/s")
		case t.Kind == verbsprobe.TestLatency && rep.Lat == nil:
			rep.Lat = newMatrix(metricLat, "µs")
		}
	}
	// Worse states win when a pair has several tests of a kind.
	rank := map[State]int{StateNone: 0, StateOK: 1, StateSkipped: 2, StateRefused: 3, StateNoAnswer: 4, StateFailed: 5, StateBad: 6}
	set := func(m *Matrix, i, j int, v *float64, st State) {
		if m == nil {
			return
		}
		c := &m.Cells[i][j]
		if rank[st] >= rank[c.State] {
			c.State = st
			if v != nil || rank[st] > rank[StateOK] {
				c.Value = v
			}
		}
	}
	for _, in := range insts {
		if in.key.pass != main {
			continue
		}
		i, j := in.key.client, in.key.server
		var v *float64
		switch in.test.Kind {
		case verbsprobe.TestBandwidth:
			if in.figures != nil {
				x := in.figures.BWGbps
				v = &x
			}
			set(rep.BW, i, j, v, in.state)
		case verbsprobe.TestLatency:
			if in.figures != nil && in.figures.LatUsec != nil {
				x := in.figures.LatUsec.Median
				v = &x
			}
			set(rep.Lat, i, j, v, in.state)
			set(rep.Lat, j, i, v, in.state)
		}
	}
}
