package sweep

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// TestProber runs the tests of a coordinated sweep from afar: node
// client's test against node server's responder (the exporters' /probe:
// package sweep/httpprobe; a fake in tests).
type TestProber interface {
	// Check tells whether node rank can be driven at all (its exporter
	// answers and takes the credentials); a node that cannot is the
	// client of no test, each recorded as skipped.
	Check(ctx context.Context, rank int) error
	// Probe runs test from client to server within timeout.
	Probe(ctx context.Context, client, server int, test verbsprobe.Test, timeout time.Duration) ProbeResult
}

// ProbeResult is what one test driven from afar came to.
type ProbeResult struct {
	Outcome Outcome
	// Step and Error say what failed (Error already fit to print: peer
	// text escaped).
	Step, Error string
	// Down is the rank that took no part, -1 none: the client (its
	// exporter did not answer, it has no RDMA port) or the server
	// (nothing answers on its responder's port).
	Down    int
	Figures *Figures // the client's measurement when the test passed
}

// Defaults of a Coordinator.
const (
	// DefaultProbeTimeout is a coordinated test's time: the exporters'
	// built-in modules allow 10 s.
	DefaultProbeTimeout = 10 * time.Second
	// maxChecks bounds the nodes checked at once.
	maxChecks = 64
)

// Coordinator runs a coordinated sweep from one host: round after
// round, the pairs of a round at once (at most Parallel), each pair's
// Plan in order through Prober, so that a node takes part in one test at
// a time; then, when Build flags pairs and Confirm is set, the retests
// Report.Confirm names. It writes every node's records, both sides of
// each test, as the nodes of a launched sweep would: the same report
// reads them.
type Coordinator struct {
	Params Params
	Prober TestProber
	Out    *Writer
	Grdma  string // the version, for the start records
	// Driver names the host that coordinates, for the start records.
	Driver string
	// Timeout is each test's time (DefaultProbeTimeout).
	Timeout time.Duration
	// Parallel bounds the pairs tested at once (0: every pair of a
	// round), for a fabric that should not carry all of them.
	Parallel int
	// Confirm runs Report.Confirm's retests when the main pass flags
	// pairs, judged by Criteria.
	Confirm  bool
	Criteria Criteria
	// Log, when set, gets a line of progress per test and round.
	Log func(format string, args ...any)

	mu      sync.Mutex
	recs    []Record
	sums    []Summary
	noSrc   map[int]string // ranks that cannot be clients, and why
	noDst   map[int]string // ranks whose responder does not answer
	started time.Time
	sweepID string
}

// ModeCoordinated is StartRecord.Mode of a coordinated sweep.
const ModeCoordinated = "coordinated"

// Run runs the sweep and returns the report over every record written
// (the confirm pass's included), and the records. The error is a failure
// to write records or parameters that cannot run; failed tests are in
// the records and the report.
func (c *Coordinator) Run(ctx context.Context) (*Report, []Record, error) {
	if err := c.Params.Validate(); err != nil {
		return nil, nil, err
	}
	if c.Confirm {
		if err := c.Criteria.Validate(); err != nil {
			return nil, nil, err
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultProbeTimeout
	}
	n := len(c.Params.Hosts)
	c.started = time.Now()
	c.sweepID = c.Params.ID()
	c.sums = make([]Summary, n)
	c.noSrc, c.noDst = map[int]string{}, map[int]string{}

	checks := c.check(ctx)
	for i := range n {
		start := &StartRecord{Grdma: c.Grdma, RankFrom: "host list", Params: c.Params, Mode: ModeCoordinated, Driver: c.Driver}
		if err := c.write(i, Record{Start: start}); err != nil {
			return nil, nil, err
		}
		if checks[i] != nil {
			c.noSrc[i] = fmt.Sprintf("%s cannot be driven: %v", c.Params.Hosts[i], checks[i])
			c.logf("%s", c.noSrc[i])
		}
	}
	var rep *Report
	err := c.pass(ctx, c.Params.Rounds())
	if err == nil && c.Confirm && ctx.Err() == nil {
		rep, err = c.build()
		if err == nil && rep.Confirm != nil && len(rep.Confirm.Rounds) > 0 {
			c.logf("confirming: %d pairs in %d rounds", len(rep.Confirm.Pairs()), len(rep.Confirm.Rounds))
			err = c.pass(ctx, *rep.Confirm)
			rep = nil
		}
	}
	if err != nil {
		return nil, c.records(), err
	}
	secs := round(time.Since(c.started).Seconds(), 3)
	for i := range n {
		s := c.sums[i]
		end := &EndRecord{Tests: s.Tests, Passed: s.Passed, Seconds: secs, Interrupted: ctx.Err() != nil}
		if err := c.write(i, Record{End: end}); err != nil {
			return nil, c.records(), err
		}
	}
	if rep == nil {
		if rep, err = c.build(); err != nil {
			return nil, c.records(), err
		}
	}
	return rep, c.records(), nil
}

// Summaries are each node's tests and passes so far, in rank order.
func (c *Coordinator) Summaries() []Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Summary(nil), c.sums...)
}

func (c *Coordinator) records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

func (c *Coordinator) build() (*Report, error) {
	crit := c.Criteria
	if crit == (Criteria{}) {
		crit = DefaultCriteria
	}
	return Build(c.records(), crit)
}

func (c *Coordinator) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

// check asks every node at once (at most maxChecks) whether it can be
// driven.
func (c *Coordinator) check(ctx context.Context) []error {
	n := len(c.Params.Hosts)
	errs := make([]error, n)
	sem := make(chan struct{}, maxChecks)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.Prober.Check(ctx, i)
		}()
	}
	wg.Wait()
	return errs
}

// pass runs a schedule's rounds, one after the other.
func (c *Coordinator) pass(ctx context.Context, s Schedule) error {
	for k, r := range s.Rounds {
		if ctx.Err() != nil {
			return nil
		}
		begin := time.Now()
		if err := c.round(ctx, s.Kind, k+1, len(s.Rounds), r); err != nil {
			return err
		}
		c.logf("%s round %d/%d: %d pairs in %.1fs", s.Kind, k+1, len(s.Rounds), len(r), time.Since(begin).Seconds())
	}
	return nil
}

// round runs a round's pairs at once, at most Parallel of them.
func (c *Coordinator) round(ctx context.Context, pass string, k, rounds int, r Round) error {
	limit := c.Parallel
	if limit <= 0 || limit > len(r) {
		limit = len(r)
	}
	sem := make(chan struct{}, max(limit, 1))
	errs := make([]error, len(r))
	var wg sync.WaitGroup
	for i, p := range r {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.pair(ctx, pass, k, rounds, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pair runs a pair's Plan in order.
func (c *Coordinator) pair(ctx context.Context, pass string, k, rounds int, p Pair) error {
	hosts := c.Params.Hosts
	for _, pl := range Plan(p, c.Params.Tests) {
		begin := time.Now()
		res, ran := c.skip(ctx, pl)
		if !ran {
			res = c.Prober.Probe(ctx, pl.Client, pl.Server, pl.Test, c.Timeout)
			c.learn(pl, res)
		}
		took := time.Since(begin)
		line := fmt.Sprintf("%s round %d/%d: %s %s→%s", pass, k, rounds, pl.Test, hosts[pl.Client], hosts[pl.Server])
		switch {
		case res.Outcome != OutcomeOK:
			c.logf("%s: %s: %s", line, res.Outcome, res.Error)
		case res.Figures != nil && res.Figures.LatUsec != nil && pl.Test.Kind == verbsprobe.TestLatency:
			c.logf("%s: median %.1f µs", line, res.Figures.LatUsec.Median)
		case res.Figures != nil:
			c.logf("%s: %.3f Gb/s", line, res.Figures.BWGbps)
		}
		if err := c.record(pass, k, pl, res, took); err != nil {
			return err
		}
	}
	return nil
}

// skip says whether a test need not run: interrupted, or a node already
// found to take no part in its role.
func (c *Coordinator) skip(ctx context.Context, pl Planned) (ProbeResult, bool) {
	if ctx.Err() != nil {
		return ProbeResult{Outcome: OutcomeSkipped, Error: "interrupted", Down: -1}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if why, ok := c.noSrc[pl.Client]; ok {
		return ProbeResult{Outcome: OutcomeSkipped, Error: why, Down: pl.Client}, true
	}
	if why, ok := c.noDst[pl.Server]; ok {
		return ProbeResult{Outcome: OutcomeSkipped, Error: why, Down: pl.Server}, true
	}
	return ProbeResult{}, false
}

// learn remembers a node that took no part, so that its later tests in
// that role are skipped rather than waited for.
func (c *Coordinator) learn(pl Planned, res ProbeResult) {
	if res.Down < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch res.Down {
	case pl.Client:
		if _, ok := c.noSrc[pl.Client]; !ok {
			c.noSrc[pl.Client] = res.Error
		}
	case pl.Server:
		if _, ok := c.noDst[pl.Server]; !ok {
			c.noDst[pl.Server] = res.Error
		}
	}
}

// record writes both sides' records of a test.
func (c *Coordinator) record(pass string, k int, pl Planned, res ProbeResult, took time.Duration) error {
	for _, side := range []struct {
		rank, peer int
		role       string
	}{{pl.Client, pl.Server, verbsprobe.RoleClient}, {pl.Server, pl.Client, verbsprobe.RoleServer}} {
		t := &TestRecord{Pass: pass, Round: k, Index: pl.Index, Peer: c.Params.Hosts[side.peer], PeerRank: side.peer,
			Role: side.role, Test: pl.Test, Outcome: res.Outcome, Step: res.Step, Error: res.Error, Seconds: round(took.Seconds(), 3)}
		if res.Outcome == "" {
			t.Outcome = OutcomeFailed
		}
		if res.Down >= 0 {
			d := res.Down
			t.Down = &d
		}
		if side.role == verbsprobe.RoleClient && t.Outcome == OutcomeOK {
			t.Figures = res.Figures
		}
		c.mu.Lock()
		c.sums[side.rank].Tests++
		if t.Outcome == OutcomeOK {
			c.sums[side.rank].Passed++
		}
		c.mu.Unlock()
		if err := c.write(side.rank, Record{Test: t}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Coordinator) write(rank int, rec Record) error {
	rec.Version, rec.Sweep, rec.Node, rec.Rank, rec.Time = RecordVersion, c.sweepID, c.Params.Hosts[rank], rank, time.Now().UTC()
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	if c.Out == nil {
		return nil
	}
	return c.Out.Write(rec)
}
