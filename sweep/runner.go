package sweep

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// PairTester runs the tests of a pair on this node: verbsprobe's Connect
// and Serve (VerbsTester), or a fake in tests. A coordinated sweep drives
// other nodes' responders instead and writes the same records.
type PairTester interface {
	// Check tells whether this node's device can take part at all; a
	// node whose device fails refuses every pair, saying why.
	Check(ctx context.Context) error
	// Connect runs test against the server at addr (host:port).
	Connect(ctx context.Context, addr string, test verbsprobe.Test, timeout time.Duration) *verbsprobe.Result
	// Serve serves the test of the one client ln hands over.
	Serve(ctx context.Context, ln net.Listener, timeout time.Duration) *verbsprobe.Result
}

// VerbsTester runs the tests with verbsprobe on the device Options say.
type VerbsTester struct{ Options verbsprobe.Options }

// Check probes the device on its own: a queue pair to RTS.
func (v VerbsTester) Check(ctx context.Context) error {
	r := verbsprobe.Run(ctx, v.Options)
	return verbsprobe.Outcome(r, 1, 1)
}

// Connect runs verbsprobe.Connect.
func (v VerbsTester) Connect(ctx context.Context, addr string, test verbsprobe.Test, timeout time.Duration) *verbsprobe.Result {
	return verbsprobe.Connect(ctx, v.Options, addr, test, timeout)
}

// Serve runs verbsprobe.Serve.
func (v VerbsTester) Serve(ctx context.Context, ln net.Listener, timeout time.Duration) *verbsprobe.Result {
	return verbsprobe.Serve(ctx, v.Options, ln, verbsprobe.ServeConfig{Timeout: timeout})
}

// Defaults of a Runner.
const (
	// DefaultPort is the TCP port a node of a launched sweep listens on:
	// next to the probe's 18515.
	DefaultPort = 18516
	// DefaultTimeout is how long a partner may show no sign of life
	// before it counts as not answering.
	DefaultTimeout = 30 * time.Second
	// pollEvery is how often a node asks a partner that is behind how it
	// is doing, and asks again for its round.
	pollEvery = time.Second
)

// Runner runs one node's part of a launched sweep: each round, it meets
// its partner (A dials B's port), runs the pair's Plan as client or
// server, and writes a record of every test. Nodes keep in step through
// their partners alone: a node waits for a partner that is alive however
// far behind, and gives up on one that shows no sign of life for
// Timeout (Start at first).
type Runner struct {
	Params   Params
	Hosts    []Host // Params.Hosts parsed, in rank order
	Rank     int
	RankFrom string // where Rank came from, for the start record
	Port     int    // of hosts that name none (DefaultPort)
	Device   string // "mlx5_0/1", for the start record
	Grdma    string // the version, for the start record
	// PortRateGbps is the device port's rate, 0 when unknown.
	PortRateGbps float64
	Tester       PairTester
	// Listener is this node's port; Run closes it.
	Listener net.Listener
	Out      *Writer
	// Timeout: a partner's silence before it counts as not answering
	// (DefaultTimeout). Each test's own waits use it too.
	Timeout time.Duration
	// Start: how long after this node started a partner it has never
	// heard from is waited for (Timeout when shorter); launchers that
	// start nodes minutes apart need it longer.
	Start time.Duration
	// Retest, when set, is the schedule to run instead of the parameters'
	// own: a report's Confirm (ReadConfirm), the retest of the pairs a
	// first pass flagged. Its records join the first pass's in one
	// report (sweep report over both runs' records).
	Retest *Schedule
	// Log, when set, gets a line of progress per test.
	Log func(format string, args ...any)
	// Dial connects to a partner; nil uses net.Dialer.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Resolve returns a host's addresses (the probe connections a node
	// serves must come from one of them or from the control
	// connection's); nil uses net.DefaultResolver.
	Resolve func(ctx context.Context, host string) ([]net.IP, error)

	st      *state
	id      string // Params.ID(), in every record
	started time.Time
	sum     Summary
}

// Summary is what a node's run came to.
type Summary struct {
	Tests, Passed int
	Seconds       float64
	Interrupted   bool
}

// Run runs every round of the schedule and writes the records. The
// returned error is a failure to write records or to start; tests that
// fail are in the records and the Summary.
func (r *Runner) Run(ctx context.Context) (Summary, error) {
	if err := r.Params.Validate(); err != nil {
		return Summary{}, err
	}
	n := len(r.Params.Hosts)
	if len(r.Hosts) != n || r.Rank < 0 || r.Rank >= n {
		return Summary{}, fmt.Errorf("rank %d and %d hosts do not fit the parameters' %d hosts", r.Rank, len(r.Hosts), n)
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.Port == 0 {
		r.Port = DefaultPort
	}
	r.started = time.Now()
	sched := r.Params.Rounds()
	// The pass is part of what partners must agree on: a node still in
	// the first pass refuses one already retesting, and the other way.
	r.id = r.Params.ID()
	sweepID, about := r.id, r.Params.String()
	if r.Retest != nil {
		if err := r.Retest.check(n); err != nil {
			return Summary{}, err
		}
		sched = *r.Retest
		// Nodes given different reports' retests of one sweep refuse each
		// other rather than wait for partners that are elsewhere.
		b, _ := json.Marshal(sched)
		sum := sha256.Sum256(b)
		sweepID = sweepID + "/" + KindConfirm + "/" + hex.EncodeToString(sum[:6])
		about = fmt.Sprintf("%s, the retest of a report's flagged pairs (%d pairs in %d rounds, %s)", about, len(sched.Pairs()), len(sched.Rounds), hex.EncodeToString(sum[:6]))
	}
	r.st = &state{sweep: sweepID, about: about, rank: r.Rank, n: n,
		down: map[int]string{}, skipped: map[int]string{}, others: map[int]string{}}
	l := newListener(r.Listener, r.st, r.Timeout)
	go l.serve()
	defer l.close()

	checkErr := r.Tester.Check(ctx)
	start := &StartRecord{Grdma: r.Grdma, Device: r.Device, RankFrom: r.RankFrom, Params: r.Params, PortRateGbps: r.PortRateGbps}
	if r.Retest != nil {
		start.Pass = KindConfirm
	}
	if checkErr != nil {
		start.Error = peerText(strings.Join(strings.Fields(checkErr.Error()), " ")) // one line: the hint comes on a line of its own
		r.st.mu.Lock()
		r.st.broken = true
		r.st.mu.Unlock()
		r.logf("the device failed its check, refusing every pair: %v", checkErr)
	}
	if err := r.write(Record{Start: start}); err != nil {
		return Summary{}, err
	}
	for k, round := range sched.Rounds {
		if ctx.Err() != nil {
			r.sum.Interrupted = true
			break
		}
		if err := r.runRound(ctx, sched.Kind, k+1, len(sched.Rounds), round); err != nil {
			return r.sum, err
		}
	}
	r.st.mu.Lock()
	r.st.done = true
	r.st.round = len(sched.Rounds) + 1
	r.st.mu.Unlock()
	if ctx.Err() != nil {
		r.sum.Interrupted = true
	}
	r.sum.Seconds = round(time.Since(r.started).Seconds(), 3)
	err := r.write(Record{End: &EndRecord{Tests: r.sum.Tests, Passed: r.sum.Passed, Seconds: r.sum.Seconds, Interrupted: r.sum.Interrupted}})
	return r.sum, err
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

func (r *Runner) write(rec Record) error {
	rec.Sweep, rec.Node, rec.Rank, rec.Time = r.id, r.Params.Hosts[r.Rank], r.Rank, time.Now().UTC()
	return r.Out.Write(rec)
}

// failure is why a pair did not run: the outcome of each of its tests.
type failure struct {
	outcome Outcome
	err     string
	down    int // the rank that took no part, -1
}

// runRound runs this node's pair of round k, if it has one.
func (r *Runner) runRound(ctx context.Context, pass string, k, rounds int, round Round) error {
	pair, ok := round.PairOf(r.Rank)
	st := r.st
	if !ok {
		st.mu.Lock()
		st.round = k
		st.mu.Unlock()
		r.logf("round %d/%d: a bye", k, rounds)
		return nil
	}
	partner := pair.Other(r.Rank)
	plan := Plan(pair, r.Params.Tests)
	var ctl *ctlConn
	var f *failure
	if pair.A == r.Rank {
		st.mu.Lock()
		st.round = k
		st.mu.Unlock()
		ctl, f = r.dialPair(ctx, k, partner)
	} else {
		ctl, f = r.awaitPair(ctx, k, partner)
	}
	if f != nil {
		r.logf("round %d/%d: %s with %s: %s", k, rounds, f.outcome, r.Hosts[partner], f.err)
		for _, pl := range plan {
			if err := r.record(pass, k, pl, partner, nil, f, 0); err != nil {
				return err
			}
		}
		return nil
	}
	defer ctl.close()
	allowed := r.partnerIPs(ctx, partner, ctl.conn.RemoteAddr())
	for _, pl := range plan {
		var err error
		if pl.Client == r.Rank {
			err = r.clientTest(ctx, pass, k, rounds, pl, partner, ctl)
		} else {
			err = r.serverTest(ctx, pass, k, rounds, pl, partner, ctl, allowed)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// partnerIPs are the addresses the partner's probe connections may come
// from: its control connection's and those its host name resolves to.
func (r *Runner) partnerIPs(ctx context.Context, partner int, ctlAddr net.Addr) []net.IP {
	var ips []net.IP
	if ta, ok := ctlAddr.(*net.TCPAddr); ok {
		ips = append(ips, ta.IP)
	}
	if ip := net.ParseIP(r.Hosts[partner].Name); ip != nil {
		return append(ips, ip)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	more, _ := r.resolve(rctx, r.Hosts[partner].Name)
	return append(ips, more...)
}

func (r *Runner) resolve(ctx context.Context, host string) ([]net.IP, error) {
	if r.Resolve != nil {
		return r.Resolve(ctx, host)
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	var ips []net.IP
	for _, a := range addrs {
		ips = append(ips, a.IP)
	}
	return ips, err
}

func (r *Runner) dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.Dial != nil {
		return r.Dial(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// patience is the wait for a partner: until Start after this node
// began, or Timeout after the last sign of life, whichever is later.
type patience struct {
	deadline time.Time
	timeout  time.Duration
}

func (r *Runner) patience() *patience {
	p := &patience{deadline: time.Now().Add(r.Timeout), timeout: r.Timeout}
	if s := r.started.Add(r.Start); s.After(p.deadline) {
		p.deadline = s
	}
	return p
}

func (p *patience) alive() {
	if d := time.Now().Add(p.timeout); d.After(p.deadline) {
		p.deadline = d
	}
}

func (p *patience) over() bool { return time.Now().After(p.deadline) }

// downReason says whether rank was found unreachable, and by whom.
func (r *Runner) downReason(rank int) (string, bool) {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	why, ok := r.st.down[rank]
	return why, ok
}

func (r *Runner) markDown(rank int, why string) {
	r.st.mu.Lock()
	r.st.down[rank] = why
	r.st.mu.Unlock()
}

func (r *Runner) heardFrom(rank int, down []int) {
	r.st.mu.Lock()
	r.st.alive(rank)
	r.st.merge(rank, down)
	r.st.mu.Unlock()
}

func (r *Runner) hello(k, partner int) message {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return message{Type: msgHello, Sweep: r.st.sweep, Round: k, From: r.Rank, To: partner, About: r.st.about,
		Broken: r.st.broken, Down: r.st.downList()}
}

// dialPair is A's side of a round: ask B for the round until it is
// ready, goes past, refuses or shows no sign of life for the timeout.
func (r *Runner) dialPair(ctx context.Context, k, partner int) (*ctlConn, *failure) {
	addr := r.Hosts[partner].Addr(r.Port)
	pat := r.patience()
	wait := 100 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return nil, &failure{outcome: OutcomeSkipped, err: "interrupted", down: -1}
		}
		if why, down := r.downReason(partner); down {
			return nil, &failure{outcome: OutcomeSkipped, err: fmt.Sprintf("%s was %s", r.Hosts[partner], why), down: partner}
		}
		if c, err := r.dial(ctx, addr, min(r.Timeout, 5*time.Second)); err == nil {
			ctl := newCtlConn(c, nil)
			reply, err := r.ask(ctl, r.hello(k, partner))
			if err == nil {
				pat.alive()
				r.heardFrom(partner, reply.Down)
				switch reply.Type {
				case msgReady:
					return ctl, nil
				case msgGone:
					ctl.close()
					return nil, &failure{outcome: OutcomeSkipped, err: fmt.Sprintf("%s went past this round: %s", r.Hosts[partner], reply.Error), down: -1}
				case msgRefused:
					ctl.close()
					f := &failure{outcome: OutcomeRefused, err: fmt.Sprintf("%s refused: %s", r.Hosts[partner], reply.Error), down: -1}
					switch {
					case reply.Broken:
						f.down = partner
					case r.st.broken:
						f.err, f.down = "this node's device failed at start", r.Rank
					}
					return nil, f
				}
			} else if strings.HasPrefix(err.Error(), "the partner speaks") {
				ctl.close()
				return nil, &failure{outcome: OutcomeRefused, err: err.Error(), down: -1}
			}
			ctl.close()
		}
		if pat.over() {
			why := fmt.Sprintf("did not answer %s for %v", r.Hosts[r.Rank], r.Timeout)
			r.markDown(partner, why)
			return nil, &failure{outcome: OutcomeNoAnswer, err: fmt.Sprintf("%s %s", r.Hosts[partner], why), down: partner}
		}
		if !sleep(ctx, wait) {
			continue
		}
		wait = min(2*wait, r.poll())
	}
}

// poll is how often to ask a partner again: often enough that a live
// one is heard from several times within the timeout.
func (r *Runner) poll() time.Duration { return min(pollEvery, r.Timeout/4) }

// ask sends m on a fresh connection and reads the one reply.
func (r *Runner) ask(ctl *ctlConn, m message) (message, error) {
	if err := ctl.send(m, r.Timeout); err != nil {
		return message{}, err
	}
	return ctl.receive(min(r.Timeout, 10*time.Second))
}

// sleep waits d or until ctx is done; false when ctx is.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitPair is B's side of a round: wait for A's hello, asking A how it
// is doing meanwhile, until it comes, A goes past, or A shows no sign of
// life for the timeout.
func (r *Runner) awaitPair(ctx context.Context, k, partner int) (*ctlConn, *failure) {
	st := r.st
	exp := &expectation{round: k, from: partner, ch: make(chan handed, 1)}
	st.mu.Lock()
	st.round = k
	if why, other := st.others[partner]; other {
		st.mu.Unlock()
		return nil, &failure{outcome: OutcomeRefused, err: why, down: -1}
	}
	why, down := st.down[partner]
	if down {
		st.skipped[k] = fmt.Sprintf("%s skipped the round: %s was %s", r.Hosts[r.Rank], r.Hosts[partner], why)
	} else {
		st.expect = exp
	}
	broken := st.broken
	st.mu.Unlock()
	if down {
		return nil, &failure{outcome: OutcomeSkipped, err: fmt.Sprintf("%s was %s", r.Hosts[partner], why), down: partner}
	}
	giveUp := func(f *failure) (*ctlConn, *failure) {
		st.mu.Lock()
		if st.expect == exp {
			st.expect = nil
		}
		if f.outcome == OutcomeNoAnswer {
			st.skipped[k] = fmt.Sprintf("%s gave up the round: %s", r.Hosts[r.Rank], f.err)
		}
		st.mu.Unlock()
		select { // it may have come meanwhile
		case h := <-exp.ch:
			if c, f2 := r.accepted(h, partner, broken); f2 == nil {
				return c, nil
			}
		default:
		}
		return nil, f
	}
	pat := r.patience()
	tick := time.NewTicker(r.poll())
	defer tick.Stop()
	for {
		select {
		case h := <-exp.ch:
			return r.accepted(h, partner, broken)
		case <-ctx.Done():
			return giveUp(&failure{outcome: OutcomeSkipped, err: "interrupted", down: -1})
		case <-tick.C:
			if reply, err := r.status(ctx, partner); err == nil {
				pat.alive()
				if reply.Sweep != r.st.sweep {
					return giveUp(&failure{outcome: OutcomeRefused, err: mismatch(r.st.about, reply.About), down: -1})
				}
				r.heardFrom(partner, reply.Down)
				if reply.Done || reply.Round > k {
					return giveUp(&failure{outcome: OutcomeSkipped, err: fmt.Sprintf("%s went past round %d without this node", r.Hosts[partner], k), down: -1})
				}
			}
			if pat.over() {
				why := fmt.Sprintf("did not answer %s for %v", r.Hosts[r.Rank], r.Timeout)
				r.markDown(partner, why)
				return giveUp(&failure{outcome: OutcomeNoAnswer, err: fmt.Sprintf("%s %s", r.Hosts[partner], why), down: partner})
			}
		}
	}
}

// accepted answers the hello the listener handed over: ready, or the
// refusal of a node whose device failed (this one or the partner).
func (r *Runner) accepted(h handed, partner int, broken bool) (*ctlConn, *failure) {
	ctl := h.ctl
	r.st.mu.Lock()
	down := r.st.downList()
	r.st.mu.Unlock()
	if h.m.Sweep != r.st.sweep {
		why := mismatch(r.st.about, h.m.About)
		ctl.send(message{Type: msgRefused, From: r.Rank, Error: why}, r.Timeout)
		ctl.close()
		return nil, &failure{outcome: OutcomeRefused, err: why, down: -1}
	}
	if h.m.Broken {
		ctl.send(message{Type: msgRefused, From: r.Rank, Error: "its device failed at start", Down: down}, r.Timeout)
		ctl.close()
		return nil, &failure{outcome: OutcomeRefused, err: fmt.Sprintf("%s: its device failed at start", r.Hosts[partner]), down: partner}
	}
	if broken {
		ctl.send(message{Type: msgRefused, From: r.Rank, Broken: true, Error: "its device failed at start", Down: down}, r.Timeout)
		ctl.close()
		return nil, &failure{outcome: OutcomeRefused, err: "this node's device failed at start", down: r.Rank}
	}
	if err := ctl.send(message{Type: msgReady, From: r.Rank, Down: down}, r.Timeout); err != nil {
		ctl.close()
		return nil, &failure{outcome: OutcomeFailed, err: fmt.Sprintf("answering %s: %v", r.Hosts[partner], err), down: -1}
	}
	return ctl, nil
}

// status asks a partner how it is doing.
func (r *Runner) status(ctx context.Context, partner int) (message, error) {
	c, err := r.dial(ctx, r.Hosts[partner].Addr(r.Port), min(r.Timeout, 2*time.Second))
	if err != nil {
		return message{}, err
	}
	ctl := newCtlConn(c, nil)
	defer ctl.close()
	r.st.mu.Lock()
	m := message{Type: msgStatus, From: r.Rank, Down: r.st.downList()}
	r.st.mu.Unlock()
	reply, err := r.ask(ctl, m)
	if err == nil && reply.Type != msgStatus {
		err = fmt.Errorf("unexpected %q", reply.Type)
	}
	return reply, err
}

// clientTest runs test pl as its client: waits for the partner to serve,
// connects, and exchanges the outcomes.
func (r *Runner) clientTest(ctx context.Context, pass string, k, rounds int, pl Planned, partner int, ctl *ctlConn) error {
	begin := time.Now()
	m, err := ctl.receive(r.Timeout)
	if err == nil && (m.Type != msgServing || m.Test != pl.Index) {
		err = fmt.Errorf("expected serving test %d, got %q", pl.Index, m.Type)
	}
	if err != nil {
		f := &failure{outcome: OutcomeFailed, err: fmt.Sprintf("the control connection to %s: %v", r.Hosts[partner], err), down: -1}
		return r.record(pass, k, pl, partner, nil, f, time.Since(begin))
	}
	res := r.Tester.Connect(ctx, r.Hosts[partner].Addr(r.Port), pl.Test, r.Timeout)
	mine := doneOf(pl.Index, res)
	ctl.send(mine, r.Timeout)
	theirs, err := ctl.receive(r.Timeout)
	f := judgeSides(res, mine, theirs, err, r.Hosts[partner])
	if f == nil {
		r.logf("round %d/%d: %s", k, rounds, progress(pl, r.Hosts, res))
	} else {
		r.logf("round %d/%d: %s with %s %s: %s", k, rounds, pl.Test, r.Hosts[partner], f.outcome, f.err)
	}
	return r.record(pass, k, pl, partner, res, f, time.Since(begin))
}

// serverTest serves test pl: opens the slot for the partner's probe
// connection, says so, and serves; a client that fails before it
// connects closes the slot.
func (r *Runner) serverTest(ctx context.Context, pass string, k, rounds int, pl Planned, partner int, ctl *ctlConn, allowed []net.IP) error {
	begin := time.Now()
	ch := make(chan net.Conn, 1)
	sl := newSlotListener(ch, r.Listener.Addr())
	st := r.st
	st.mu.Lock()
	st.slot = &slot{ips: allowed, test: pl.Test, ch: ch}
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		if st.slot != nil && st.slot.ch == ch {
			st.slot = nil
		}
		st.mu.Unlock()
		select {
		case c := <-ch: // handed over after all
			if c != nil {
				c.Close()
			}
		default:
		}
	}()
	if err := ctl.send(message{Type: msgServing, From: r.Rank, Test: pl.Index}, r.Timeout); err != nil {
		f := &failure{outcome: OutcomeFailed, err: fmt.Sprintf("the control connection to %s: %v", r.Hosts[partner], err), down: -1}
		return r.record(pass, k, pl, partner, nil, f, time.Since(begin))
	}
	resCh := make(chan *verbsprobe.Result, 1)
	go func() { resCh <- r.Tester.Serve(ctx, sl, r.Timeout) }()
	type got struct {
		m   message
		err error
	}
	theirsCh := make(chan got, 1)
	// The client's done comes when its test ends, as this side's: wait
	// for it without a deadline until Serve returns, then for Timeout.
	ctl.conn.SetReadDeadline(time.Time{})
	go func() {
		line, err := readLine(ctl.rd)
		if err != nil {
			theirsCh <- got{err: err}
			return
		}
		m, err := parseMessage(line)
		theirsCh <- got{m, err}
	}()
	var res *verbsprobe.Result
	var theirs got
	select {
	case res = <-resCh:
		ctl.conn.SetReadDeadline(time.Now().Add(r.Timeout))
		theirs = <-theirsCh
	case theirs = <-theirsCh:
		if theirs.err != nil || !theirs.m.OK {
			sl.Close() // it will not connect
		}
		res = <-resCh
	}
	sl.Close()
	mine := doneOf(pl.Index, res)
	ctl.send(mine, r.Timeout)
	f := judgeSides(res, mine, theirs.m, theirs.err, r.Hosts[partner])
	if f != nil {
		r.logf("round %d/%d: serving %s to %s %s: %s", k, rounds, pl.Test, r.Hosts[partner], f.outcome, f.err)
	}
	return r.record(pass, k, pl, partner, res, f, time.Since(begin))
}

// doneOf is the done message of a side's result.
func doneOf(index int, res *verbsprobe.Result) message {
	m := message{Type: msgDone, Test: index, OK: res.OK()}
	if s := res.Failed(); s != nil {
		m.Step, m.Error = s.Name, s.Err.Err.Error()
	} else if res.Unsupported != "" {
		m.Error = res.Unsupported
	}
	return m
}

// judgeSides decides a test from this side's result and the partner's
// done message (theirsErr: it did not come); nil when both passed.
func judgeSides(res *verbsprobe.Result, mine, theirs message, theirsErr error, partner Host) *failure {
	switch {
	case !mine.OK:
		err := mine.Error
		if mine.Step != "" {
			err = mine.Step + ": " + err
		}
		// This side's failure may only echo the partner's: say the
		// partner's own words too.
		if theirsErr == nil && theirs.Type == msgDone && !theirs.OK && theirs.Error != "" {
			if !strings.Contains(err, theirs.Error) {
				err += fmt.Sprintf(" (%s: %s)", partner, theirs.Error)
			}
		}
		return &failure{outcome: OutcomeFailed, err: peerText(err), down: -1}
	case theirsErr != nil:
		return &failure{outcome: OutcomeFailed, err: fmt.Sprintf("no word from %s after the test: %v", partner, theirsErr), down: -1}
	case theirs.Type != msgDone:
		return &failure{outcome: OutcomeFailed, err: fmt.Sprintf("%s sent %q after the test", partner, theirs.Type), down: -1}
	case !theirs.OK:
		err := theirs.Error
		if theirs.Step != "" {
			err = theirs.Step + ": " + err
		}
		return &failure{outcome: OutcomeFailed, err: fmt.Sprintf("the peer failed at %s", err), down: -1}
	}
	return nil
}

// progress is a passed test's line: "client of bw write to node05: 9.81 Gb/s".
func progress(pl Planned, hosts []Host, res *verbsprobe.Result) string {
	s := fmt.Sprintf("%s %s→%s", pl.Test, hosts[pl.Client], hosts[pl.Server])
	if ms := measurements(res); len(ms) > 0 {
		f := FiguresOf(ms[0])
		if f.LatUsec != nil && pl.Test.Kind == verbsprobe.TestLatency {
			s += fmt.Sprintf(": median %.1f µs", f.LatUsec.Median)
		} else {
			s += fmt.Sprintf(": %.3f Gb/s", f.BWGbps)
		}
	}
	return s
}

// record writes the record of one test of a pair.
func (r *Runner) record(pass string, k int, pl Planned, partner int, res *verbsprobe.Result, f *failure, took time.Duration) error {
	role := verbsprobe.RoleServer
	if pl.Client == r.Rank {
		role = verbsprobe.RoleClient
	}
	t := &TestRecord{Pass: pass, Round: k, Index: pl.Index, Peer: r.Params.Hosts[partner], PeerRank: partner,
		Role: role, Test: pl.Test, Outcome: OutcomeOK, Seconds: round(took.Seconds(), 3)}
	if f != nil {
		t.Outcome, t.Error = f.outcome, f.err
		if f.down >= 0 {
			d := f.down
			t.Down = &d
		}
		if res != nil {
			if s := res.Failed(); s != nil {
				t.Step = s.Name
			}
		}
	}
	if ms := measurements(res); role == verbsprobe.RoleClient && len(ms) > 0 {
		t.Figures = FiguresOf(ms[0])
	}
	r.sum.Tests++
	if t.Outcome == OutcomeOK {
		r.sum.Passed++
	}
	return r.write(Record{Test: t})
}

// measurements are what a probe between hosts measured, if anything.
func measurements(res *verbsprobe.Result) []verbsprobe.Measurement {
	if res == nil || res.Peer == nil {
		return nil
	}
	return res.Peer.Measurements
}
