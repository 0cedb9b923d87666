package sweep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// fabric is a fake network of nodes: what each pair measures, which
// pairs fail, which devices are broken. Its testers talk through the
// runners' real ports (a one-line hello each way), so the listener's
// routing of probe connections is exercised too.
type fabric struct {
	ranks  map[string]int                   // addr → rank
	bw     func(client, server int) float64 // Gb/s
	lat    func(a, b int) float64           // µs
	fail   func(client, server int) string  // a failed step's error, "" none
	slow   func(client, server int) time.Duration
	broken map[int]bool
}

type fakeTester struct {
	f    *fabric
	rank int
}

func (t fakeTester) Check(ctx context.Context) error {
	if t.f.broken[t.rank] {
		return errors.New("probe rxe0/1 failed at open: no such device\n  likely cause: no RDMA devices")
	}
	return nil
}

func (t fakeTester) Connect(ctx context.Context, addr string, test verbsprobe.Test, timeout time.Duration) *verbsprobe.Result {
	res := &verbsprobe.Result{Peer: &verbsprobe.PeerResult{Role: verbsprobe.RoleClient, Test: &test}}
	fail := func(step string, err error) *verbsprobe.Result {
		res.Steps = append(res.Steps, verbsprobe.Step{Name: step, Err: &verbsprobe.StepError{Step: step, Err: err}})
		return res
	}
	server, ok := t.f.ranks[addr]
	if !ok {
		return fail(verbsprobe.StepConnect, fmt.Errorf("unknown address %s", addr))
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return fail(verbsprobe.StepConnect, err)
	}
	defer c.Close()
	// As verbsprobe.Connect: the test with its defaults (iters beside a
	// duration too).
	hello, _ := json.Marshal(map[string]any{"type": "hello", "grdma_probe": 1, "test": test.WithDefaults()})
	c.SetDeadline(time.Now().Add(timeout + 5*time.Second))
	if _, err := c.Write(append(hello, '\n')); err != nil {
		return fail(verbsprobe.StepConnect, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fail(verbsprobe.StepConnect, fmt.Errorf("the server closed the connection: %v", err))
	}
	if strings.TrimSpace(line) != "welcome" {
		return fail(verbsprobe.StepConnect, fmt.Errorf("got %q", line))
	}
	res.Steps = append(res.Steps, verbsprobe.Step{Name: verbsprobe.StepConnect, OK: true})
	if t.f.slow != nil {
		time.Sleep(t.f.slow(t.rank, server))
	}
	// Both sides end together, as verbsprobe's finish exchange does.
	if _, err := c.Write([]byte("finish\n")); err != nil {
		return fail(verbsprobe.StepFinish, err)
	}
	if t.f.fail != nil {
		if msg := t.f.fail(t.rank, server); msg != "" {
			return fail(verbsprobe.StepRTR, errors.New(msg))
		}
	}
	m := verbsprobe.Measurement{Test: test.Kind, Op: test.Op, Size: test.Size, Iters: 1000, Elapsed: time.Second}
	if test.Kind == verbsprobe.TestBandwidth {
		m.Bytes = uint64(t.f.bw(t.rank, server) * 1e9 / 8)
	} else {
		d := time.Duration(t.f.lat(t.rank, server) * float64(time.Microsecond))
		m.Latency = &verbsprobe.LatencyStats{Samples: 1000, Min: d, Median: d, Avg: d, P99: d, Max: d}
	}
	res.Peer.Measurements = []verbsprobe.Measurement{m}
	return res
}

func (t fakeTester) Serve(ctx context.Context, ln net.Listener, timeout time.Duration) *verbsprobe.Result {
	res := &verbsprobe.Result{Peer: &verbsprobe.PeerResult{Role: verbsprobe.RoleServer}}
	ln.(interface{ SetDeadline(time.Time) error }).SetDeadline(time.Now().Add(timeout))
	c, err := ln.Accept()
	if err != nil {
		res.Steps = []verbsprobe.Step{{Name: verbsprobe.StepAccept, Err: &verbsprobe.StepError{Step: verbsprobe.StepAccept, Err: err}}}
		return res
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	if _, err := rd.ReadString('\n'); err != nil {
		res.Steps = []verbsprobe.Step{{Name: verbsprobe.StepAccept, Err: &verbsprobe.StepError{Step: verbsprobe.StepAccept, Err: err}}}
		return res
	}
	c.Write([]byte("welcome\n"))
	res.Steps = []verbsprobe.Step{{Name: verbsprobe.StepAccept, OK: true}}
	if _, err := rd.ReadString('\n'); err != nil {
		res.Steps = append(res.Steps, verbsprobe.Step{Name: verbsprobe.StepFinish, Err: &verbsprobe.StepError{Step: verbsprobe.StepFinish, Err: err}})
	}
	return res
}

// fleet is n runners on 127.0.0.1, each on its own port.
type fleet struct {
	t       *testing.T
	f       *fabric
	params  Params
	hosts   []Host
	lns     []net.Listener
	outs    []*bytes.Buffer
	sums    []Summary
	errs    []error
	timeout time.Duration
	start   time.Duration
	// dead ranks are never started (their port is closed); mod changes a
	// node's parameters.
	dead map[int]bool
	mod  func(rank int, p *Params)
	// retest, when set, says each rank's retest (Runner.Retest; nil:
	// the parameters' schedule).
	retest func(rank int) *Schedule
}

func newFleet(t *testing.T, n int, f *fabric) *fleet {
	fl := &fleet{t: t, f: f, timeout: 2 * time.Second, dead: map[int]bool{}}
	f.ranks = map[string]int{}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		h := Host{Name: "127.0.0.1", Port: port}
		fl.hosts = append(fl.hosts, h)
		fl.lns = append(fl.lns, ln)
		fl.params.Hosts = append(fl.params.Hosts, h.String())
		f.ranks[h.Addr(0)] = i
	}
	fl.params.Schedule = KindAllPairs
	fl.params.Tests = []verbsprobe.Test{DefaultBW, DefaultLat}
	return fl
}

// run runs every node at once and returns each node's records.
func (fl *fleet) run(ctx context.Context) [][]Record {
	n := len(fl.hosts)
	fl.outs, fl.sums, fl.errs = make([]*bytes.Buffer, n), make([]Summary, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		fl.outs[i] = &bytes.Buffer{}
		if fl.dead[i] {
			fl.lns[i].Close()
			continue
		}
		p := fl.params
		p.Hosts = append([]string(nil), p.Hosts...)
		p.Tests = append([]verbsprobe.Test(nil), p.Tests...)
		if fl.mod != nil {
			fl.mod(i, &p)
		}
		r := &Runner{Params: p, Hosts: fl.hosts, Rank: i, RankFrom: "rank", Device: "rxe0/1", Grdma: "grdma test",
			Tester: fakeTester{fl.f, i}, Listener: fl.lns[i], Out: NewWriter(fl.outs[i]), Timeout: fl.timeout, Start: fl.start}
		if fl.retest != nil {
			r.Retest = fl.retest(i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fl.sums[i], fl.errs[i] = r.Run(ctx)
		}()
	}
	wg.Wait()
	var all [][]Record
	for i, out := range fl.outs {
		if fl.errs[i] != nil {
			fl.t.Fatalf("rank %d: %v", i, fl.errs[i])
		}
		recs, skipped, err := ReadRecords(bytes.NewReader(out.Bytes()), fmt.Sprintf("rank%d", i))
		if err != nil || skipped != 0 {
			fl.t.Fatalf("rank %d's records: %v (%d skipped)\n%s", i, err, skipped, out)
		}
		all = append(all, recs)
	}
	return all
}

func flatten(recs [][]Record) []Record {
	var out []Record
	for _, r := range recs {
		out = append(out, r...)
	}
	return out
}

// healthy: every pair within 3% of 10 Gb/s and 2 µs.
func healthy() *fabric {
	return &fabric{
		bw:  func(c, s int) float64 { return 10 * (1 - 0.01*float64((c*7+s*3)%4)) },
		lat: func(a, b int) float64 { return 2 * (1 + 0.01*float64((a+b)%3)) },
	}
}

func TestRunnerHealthyFleet(t *testing.T) {
	for _, n := range []int{2, 5, 6} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			fl := newFleet(t, n, healthy())
			recs := fl.run(context.Background())
			pairs := n * (n - 1) / 2
			for i, rs := range recs {
				if rs[0].Start == nil || rs[len(rs)-1].End == nil {
					t.Fatalf("rank %d: want a start and an end record: %+v", i, rs)
				}
				if s := fl.sums[i]; s.Tests != 3*(n-1) || s.Passed != s.Tests {
					t.Errorf("rank %d: %+v, want %d tests all passed", i, s, 3*(n-1))
				}
			}
			rep, err := Build(flatten(recs), DefaultCriteria)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || len(rep.Verdicts) != 0 || len(rep.Pairs) != pairs || rep.Missing != 0 || rep.Confirm != nil {
				t.Fatalf("want a clean report of %d pairs: %+v", pairs, rep)
			}
			for i := range n {
				for j := range n {
					c := rep.BW.Cells[i][j]
					if (i == j) != (c.Value == nil) || (i != j && c.State != StateOK) {
						t.Errorf("bw cell %d,%d: %+v", i, j, c)
					}
				}
			}
		})
	}
}

// A node whose port sends 20 times slower: a node verdict for it alone.
func TestRunnerSlowNode(t *testing.T) {
	f := healthy()
	base := f.bw
	f.bw = func(c, s int) float64 {
		if c == 3 || s == 3 {
			return base(c, s) / 20
		}
		return base(c, s)
	}
	fl := newFleet(t, 6, f)
	rep, err := Build(flatten(fl.run(context.Background())), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != VerdictNode || rep.Verdicts[0].Nodes[0] != fl.params.Hosts[3] {
		t.Fatalf("want a node verdict for rank 3: %+v", rep.Verdicts)
	}
	if rep.Confirm == nil || len(rep.Confirm.Pairs()) == 0 {
		t.Errorf("want a confirm schedule, got %+v", rep.Confirm)
	}
}

// One path fails its tests (a refused connection between two nodes): a
// link verdict for that pair alone.
func TestRunnerBadLink(t *testing.T) {
	f := healthy()
	f.fail = func(c, s int) string {
		if (c == 1 && s == 4) || (c == 4 && s == 1) {
			return "connection refused"
		}
		return ""
	}
	fl := newFleet(t, 6, f)
	rep, err := Build(flatten(fl.run(context.Background())), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != VerdictLink ||
		rep.Verdicts[0].Ranks[0] != 1 || rep.Verdicts[0].Ranks[1] != 4 {
		t.Fatalf("want a link verdict for ranks 1 and 4: %+v", rep.Verdicts)
	}
	if !strings.Contains(strings.Join(rep.Verdicts[0].Evidence, "\n"), "connection refused") {
		t.Errorf("the evidence names the failure: %q", rep.Verdicts[0].Evidence)
	}
}

// A dead node (never started): its partners record it, the run ends in
// bounded time, and the report calls it unreachable.
func TestRunnerDeadPartner(t *testing.T) {
	fl := newFleet(t, 6, healthy())
	fl.timeout = 500 * time.Millisecond
	fl.dead[2] = true
	begin := time.Now()
	recs := fl.run(context.Background())
	took := time.Since(begin)
	rep, err := Build(flatten(recs), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != VerdictUnreachable || rep.Verdicts[0].Ranks[0] != 2 {
		t.Fatalf("want rank 2 unreachable: %+v", rep.Verdicts)
	}
	noAnswer := 0
	for _, r := range flatten(recs) {
		if r.Test != nil && r.Test.PeerRank == 2 {
			if r.Test.Outcome == OutcomeOK || r.Test.Down == nil || *r.Test.Down != 2 {
				t.Errorf("a test with the dead node: %+v", r.Test)
			}
			if r.Test.Outcome == OutcomeNoAnswer {
				noAnswer++
			}
		}
	}
	if noAnswer == 0 {
		t.Error("no partner recorded that rank 2 did not answer")
	}
	t.Logf("%v with a dead node; %d tests waited the timeout, the others skipped it", took, noAnswer)
}

// A node whose device fails its check takes part by refusing: its
// partners record why at once, and the report calls it unreachable with
// the reason.
func TestRunnerBrokenDevice(t *testing.T) {
	f := healthy()
	f.broken = map[int]bool{4: true}
	fl := newFleet(t, 5, f)
	fl.timeout = 5 * time.Second
	recs := fl.run(context.Background())
	// Its partners heard its refusal: none waited out the timeout.
	for _, r := range flatten(recs) {
		if r.Test != nil && r.Test.Outcome == OutcomeNoAnswer {
			t.Errorf("%s waited for the broken node: %+v", r.Where, r.Test)
		}
	}
	rep, err := Build(flatten(recs), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != VerdictUnreachable || rep.Verdicts[0].Ranks[0] != 4 ||
		!strings.Contains(rep.Verdicts[0].Reason, "no such device likely cause: no RDMA devices") {
		t.Fatalf("want rank 4 unreachable with its device's error on one line: %+v", rep.Verdicts)
	}
}

// A pair that takes longer than the timeout does not make its waiting
// neighbours give up: they see it alive.
func TestRunnerSlowPairKeepsOthersWaiting(t *testing.T) {
	f := healthy()
	f.slow = func(c, s int) time.Duration {
		if c+s == 1 { // ranks 0 and 1
			return 3 * time.Second
		}
		return 0
	}
	fl := newFleet(t, 4, f)
	// Twice the timeout for the slow pair, and a timeout no scheduling
	// delay of a loaded machine reaches for the others' instant tests.
	fl.timeout = 1500 * time.Millisecond
	recs := fl.run(context.Background())
	for _, r := range flatten(recs) {
		if r.Test != nil && r.Test.Outcome != OutcomeOK {
			t.Errorf("%s: %+v", r.Where, r.Test)
		}
	}
}

// A node started with other parameters: both sides of each of its pairs
// record the refusal, and the report refuses to mix its records.
func TestRunnerMismatchedParameters(t *testing.T) {
	fl := newFleet(t, 4, healthy())
	fl.mod = func(rank int, p *Params) {
		if rank == 1 {
			p.Tests[0].Duration = time.Second
		}
	}
	recs := fl.run(context.Background())
	for _, r := range flatten(recs) {
		if r.Test == nil {
			continue
		}
		involved := r.Rank == 1 || r.Test.PeerRank == 1
		if involved != (r.Test.Outcome == OutcomeRefused) || (involved && !strings.Contains(r.Test.Error, "parameters differ")) {
			t.Errorf("%s: %+v", r.Where, r.Test)
		}
	}
	if _, err := Build(flatten(recs), DefaultCriteria); err == nil || !strings.Contains(err.Error(), "different sweeps") {
		t.Errorf("Build mixed parameters: %v", err)
	}
	var others []Record
	for i, rs := range recs {
		if i != 1 {
			others = append(others, rs...)
		}
	}
	if rep, err := Build(others, DefaultCriteria); err != nil || rep.OK {
		t.Errorf("without rank 1's records the refusals still show: %v %+v", err, rep)
	}
}

// Interrupted: every node stops, its end record says so.
func TestRunnerInterrupted(t *testing.T) {
	fl := newFleet(t, 4, healthy())
	fl.dead[3] = true
	fl.timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	recs := fl.run(ctx)
	for i, rs := range recs {
		if i == 3 {
			continue
		}
		end := rs[len(rs)-1].End
		if end == nil || !end.Interrupted {
			t.Errorf("rank %d: want an interrupted end record, got %+v", i, rs[len(rs)-1])
		}
	}
}

// relisten opens each node's port again (Run closed it) for a second run.
func (fl *fleet) relisten() {
	for i, h := range fl.hosts {
		ln, err := net.Listen("tcp", h.Addr(0))
		if err != nil {
			fl.t.Fatal(err)
		}
		fl.lns[i] = ln
	}
}

// A launched retest (ReadConfirm, Runner.Retest): a pair slow in the
// first pass alone is cleared by its retest, a slow node stays bad, and
// sweep report over both runs' records says so.
func TestRunnerRetest(t *testing.T) {
	f := healthy()
	base := f.bw
	first := true
	f.bw = func(c, s int) float64 {
		switch {
		case c == 3 || s == 3:
			return base(c, s) / 20
		case first && ((c == 1 && s == 4) || (c == 4 && s == 1)):
			return base(c, s) / 8
		}
		return base(c, s)
	}
	fl := newFleet(t, 6, f)
	main := flatten(fl.run(context.Background()))
	rep, err := Build(main, DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if got := rankVerdicts(rep); got != "node rank 3; link ranks 1,4" || rep.Confirm == nil {
		t.Fatalf("first pass: %s, confirm %+v", got, rep.Confirm)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	params, sched, err := ReadConfirm(bytes.NewReader(js))
	if err != nil || params.ID() != rep.Sweep || sched.Kind != KindConfirm {
		t.Fatalf("ReadConfirm: %v, %s, %+v", err, params.ID(), sched)
	}
	first = false
	fl.relisten()
	fl.retest = func(int) *Schedule { return &sched }
	retest := flatten(fl.run(context.Background()))
	for _, r := range retest {
		if r.Sweep != rep.Sweep || (r.Start != nil && r.Start.Pass != KindConfirm) || (r.Test != nil && r.Test.Pass != KindConfirm) {
			t.Fatalf("a retest record of another sweep or pass: %+v", r)
		}
	}
	rep2, err := Build(append(main, retest...), DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	if got := rankVerdicts(rep2); got != "node rank 3" || rep2.Confirm != nil {
		t.Fatalf("after the retest: %s, confirm %+v", got, rep2.Confirm)
	}
	for _, p := range rep2.Pairs {
		if p.RankA == 1 && p.RankB == 4 && (!p.Retested || !p.Cleared || p.Bad) {
			t.Errorf("pair 1-4 after its retest: %+v", p)
		}
	}
	if _, err := Build(append(append(main, retest...), retest[0]), DefaultCriteria); err == nil || !strings.Contains(err.Error(), "two retests' start records of rank") {
		t.Errorf("two retests of one rank: %v", err)
	}
	if _, err := Build(retest, DefaultCriteria); err == nil || !strings.Contains(err.Error(), "give the first pass's records too") {
		t.Errorf("a retest alone: %v", err)
	}
	if _, _, err := ReadConfirm(strings.NewReader(`{"sweep":"x"}`)); err == nil || !strings.Contains(err.Error(), "not a JSON sweep report") {
		t.Errorf("ReadConfirm of no report: %v", err)
	}
	js2, _ := json.Marshal(rep2)
	if _, _, err := ReadConfirm(bytes.NewReader(js2)); err == nil || !strings.Contains(err.Error(), "asks for no retest") {
		t.Errorf("ReadConfirm of a report with its retest: %v", err)
	}
	bad := *rep
	bad.Confirm = &Schedule{Kind: KindConfirm, N: 6, Rounds: []Round{{{0, 9}}}}
	js3, _ := json.Marshal(&bad)
	if _, _, err := ReadConfirm(bytes.NewReader(js3)); err == nil || !strings.Contains(err.Error(), "rank 9 outside") {
		t.Errorf("ReadConfirm of a retest naming rank 9 of 6: %v", err)
	}
}

// A node retesting meets one still in the first pass: each refuses the
// other, saying why.
func TestRunnerRetestMismatch(t *testing.T) {
	fl := newFleet(t, 2, healthy())
	fl.timeout = time.Second
	fl.retest = func(rank int) *Schedule {
		if rank == 0 {
			return &Schedule{Kind: KindConfirm, N: 2, Rounds: []Round{{{0, 1}}}}
		}
		return nil
	}
	refused := map[int]int{}
	for _, r := range flatten(fl.run(context.Background())) {
		if r.Test == nil {
			continue
		}
		if r.Test.Outcome == OutcomeRefused && strings.Contains(r.Test.Error, "the retest of a report's flagged pairs") {
			refused[r.Rank]++
			continue
		}
		// A side whose every test was refused ends at once; its partner,
		// later to ask (a loaded machine, the race detector), then finds
		// nobody: no answer, not a wrong answer.
		if r.Test.Outcome != OutcomeNoAnswer {
			t.Errorf("%s: %+v", r.Where, r.Test)
		}
	}
	if refused[0]+refused[1] == 0 {
		t.Errorf("want the refusal recorded, by both sides or by the one that asked first: %v", refused)
	}
}

// Two nodes given different reports' retests of one sweep refuse each
// other, naming the retests, rather than wait for each other.
func TestRunnerRetestOtherReport(t *testing.T) {
	fl := newFleet(t, 3, healthy())
	fl.timeout = time.Second
	a := Schedule{Kind: KindConfirm, N: 3, Rounds: []Round{{{0, 1}}}}
	b := Schedule{Kind: KindConfirm, N: 3, Rounds: []Round{{{0, 1}}, {{1, 2}}}}
	fl.retest = func(rank int) *Schedule {
		if rank == 0 {
			return &a
		}
		return &b
	}
	refused := 0
	for _, r := range flatten(fl.run(context.Background())) {
		if r.Test != nil && r.Test.PeerRank+r.Rank == 1 {
			switch {
			case r.Test.Outcome == OutcomeRefused && strings.Contains(r.Test.Error, "1 pairs in 1 rounds") && strings.Contains(r.Test.Error, "2 pairs in 2 rounds"):
				refused++
			case r.Test.Outcome == OutcomeNoAnswer:
				// The side refused first may end before the other asks
				// (as in TestRunnerRetestMismatch): nobody, not a wrong
				// answer.
			default:
				t.Errorf("%s: %+v", r.Where, r.Test)
			}
		}
	}
	if refused == 0 {
		t.Error("want pair 0-1's refusal recorded, naming both retests")
	}
}

// rankVerdicts says a report's verdicts by rank: "node rank 3; link
// ranks 1,4".
func rankVerdicts(rep *Report) string {
	var s []string
	for _, v := range rep.Verdicts {
		w := fmt.Sprintf("%s rank %d", v.Kind, v.Ranks[0])
		if len(v.Ranks) > 1 {
			w = fmt.Sprintf("%s ranks %d,%d", v.Kind, v.Ranks[0], v.Ranks[1])
		}
		s = append(s, w)
	}
	return strings.Join(s, "; ")
}
