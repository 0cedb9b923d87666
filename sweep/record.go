package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// RecordVersion is the version of the record format, in every record as
// "grdma_sweep". A reader refuses records of a newer version.
//
// A node writes JSON lines: one start record, a test record for each
// test it took part in (as client or server, run or not), one end
// record:
//
//	{"grdma_sweep":1,"sweep":"3f9c...","node":"node01","rank":0,"time":"...","start":{"grdma":"grdma v1.2 (commit ...)","device":"mlx5_0/1","rank_from":"SLURM_PROCID","params":{...}}}
//	{"grdma_sweep":1,...,"test":{"pass":"all-pairs","round":1,"index":0,"peer":"node08","peer_rank":7,"role":"client","test":{...},"outcome":"ok","figures":{"bw_gbps":97.2,...},"seconds":0.52}}
//	{"grdma_sweep":1,...,"end":{"tests":21,"passed":21,"seconds":12.8}}
const RecordVersion = 1

// Record is one line of a node's results. Exactly one of Start, Test and
// End is set.
type Record struct {
	Version int       `json:"grdma_sweep"`
	Sweep   string    `json:"sweep"` // Params.ID()
	Node    string    `json:"node"`  // this node as the host list names it
	Rank    int       `json:"rank"`
	Time    time.Time `json:"time"`

	Start *StartRecord `json:"start,omitempty"`
	Test  *TestRecord  `json:"test,omitempty"`
	End   *EndRecord   `json:"end,omitempty"`

	// Where is the file and line it was read from (ReadRecords).
	Where string `json:"-"`
}

// StartRecord says what a node runs.
type StartRecord struct {
	Grdma    string `json:"grdma"`     // the version of grdma
	Device   string `json:"device"`    // "mlx5_0/1"
	RankFrom string `json:"rank_from"` // "rank", "SLURM_PROCID", ..., "host list"
	Params   Params `json:"params"`
	// PortRateGbps is the port's rate, when known (for Criteria's floor
	// relative to it).
	PortRateGbps float64 `json:"port_rate_gbps,omitempty"`
	// Error is why the node's device failed its check at start: the node
	// then refuses every pair, saying so, and its partners record it.
	Error string `json:"error,omitempty"`
	// Mode is ModeCoordinated when one host drove the sweep through the
	// nodes' exporters and wrote every node's records (Driver names it;
	// Device is then empty: each exporter picks its port per probe); ""
	// when the node ran its part itself.
	Mode   string `json:"mode,omitempty"`
	Driver string `json:"driver,omitempty"`
	// Pass is KindConfirm when the node ran a report's retest
	// (Runner.Retest): its records join the first pass's, whose start
	// record has none.
	Pass string `json:"pass,omitempty"`
}

// Outcome is what became of one test of a pair.
type Outcome string

// Outcomes.
const (
	OutcomeOK       Outcome = "ok"        // it ran and passed
	OutcomeFailed   Outcome = "failed"    // it ran and failed (Step, Error)
	OutcomeNoAnswer Outcome = "no_answer" // the partner showed no sign of life within the timeout
	OutcomeRefused  Outcome = "refused"   // the partner refused: other parameters, its device failed
	OutcomeSkipped  Outcome = "skipped"   // not run: one side took the other for unreachable
)

// TestRecord is one test of a pair as one of its nodes saw it.
type TestRecord struct {
	Pass     string          `json:"pass"`  // the schedule's kind: all-pairs, quick, confirm
	Round    int             `json:"round"` // from 1
	Index    int             `json:"index"` // in the pair's Plan
	Peer     string          `json:"peer"`
	PeerRank int             `json:"peer_rank"`
	Role     string          `json:"role"` // verbsprobe.RoleClient or RoleServer
	Test     verbsprobe.Test `json:"test"`
	Outcome  Outcome         `json:"outcome"`
	// Step and Error say what failed: this side's failed step and its
	// error, or what the partner said.
	Step  string `json:"step,omitempty"`
	Error string `json:"error,omitempty"`
	// Down is the rank of the node that took no part: it did not answer,
	// its device failed, or it was skipped as unreachable (reported by
	// another node, in Error).
	Down *int `json:"down,omitempty"`
	// Figures are the client's measurement (a server measures nothing).
	Figures *Figures `json:"figures,omitempty"`
	Seconds float64  `json:"seconds"` // this side's time for the test, waits included
}

// sides returns the ranks of the test's client and server.
func (t *TestRecord) sides(rank int) (client, server int) {
	if t.Role == verbsprobe.RoleClient {
		return rank, t.PeerRank
	}
	return t.PeerRank, rank
}

// Figures are what a bw or lat test measured, named as `grdma -j probe`
// names them.
type Figures struct {
	Iters       int      `json:"iters"`
	Bytes       uint64   `json:"bytes"`
	Seconds     float64  `json:"seconds"`
	BWGbps      float64  `json:"bw_gbps"`
	MsgRateMpps float64  `json:"msg_rate_mpps"`
	LatUsec     *LatUsec `json:"lat_usec,omitempty"`
}

// LatUsec is a latency summary in microseconds.
type LatUsec struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Avg    float64 `json:"avg"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// FiguresOf converts a probe's measurement.
func FiguresOf(m verbsprobe.Measurement) *Figures {
	f := &Figures{Iters: m.Iters, Bytes: m.Bytes, Seconds: round(m.Elapsed.Seconds(), 6),
		BWGbps: round(m.BWGbps(), 6), MsgRateMpps: round(m.MsgRateMpps(), 6)}
	if l := m.Latency; l != nil {
		us := func(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 1) }
		f.LatUsec = &LatUsec{Min: us(l.Min), Median: us(l.Median), Avg: us(l.Avg), P99: us(l.P99), Max: us(l.Max)}
	}
	return f
}

func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// EndRecord sums up a node's run.
type EndRecord struct {
	Tests   int     `json:"tests"`
	Passed  int     `json:"passed"`
	Seconds float64 `json:"seconds"` // from start to end
	// Interrupted is set when the node was stopped before its last round.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Writer writes records as JSON lines, one Write at a time: safe for
// concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one record and a newline; after an error every Write
// returns it.
func (w *Writer) Write(r Record) error {
	r.Version = RecordVersion
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		_, w.err = w.w.Write(append(b, '\n'))
	}
	return w.err
}

// maxRecordLine bounds one record: a start record lists every host.
const maxRecordLine = 16 << 20

// ReadRecords reads the records of one node's output (name says where,
// for errors). Lines that do not start with '{' are skipped and counted
// (a launcher's log may interleave other lines); a line that does but is
// not a record of a known version is an error naming name:line.
func ReadRecords(r io.Reader, name string) (recs []Record, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] != '{' {
			if len(b) > 0 {
				skipped++
			}
			continue
		}
		where := fmt.Sprintf("%s:%d", name, line)
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&rec); err != nil {
			return nil, skipped, fmt.Errorf("%s: not a sweep record: %v", where, err)
		}
		if err := rec.check(); err != nil {
			return nil, skipped, fmt.Errorf("%s: %v", where, err)
		}
		rec.Where = where
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, skipped, fmt.Errorf("%s: %w", name, err)
	}
	return recs, skipped, nil
}

// check refuses a record that cannot be one of ours.
func (r *Record) check() error {
	n := 0
	for _, set := range []bool{r.Start != nil, r.Test != nil, r.End != nil} {
		if set {
			n++
		}
	}
	switch {
	case r.Version == 0:
		return fmt.Errorf("not a sweep record (no \"grdma_sweep\" version)")
	case r.Version > RecordVersion:
		return fmt.Errorf("record format %d is newer than this grdma's %d: use a newer grdma", r.Version, RecordVersion)
	case n != 1:
		return fmt.Errorf("a record has one of start, test and end")
	case r.Rank < 0 || r.Rank >= MaxHosts:
		return fmt.Errorf("rank %d out of range", r.Rank)
	case r.Test != nil && (r.Test.PeerRank < 0 || r.Test.PeerRank >= MaxHosts || r.Test.PeerRank == r.Rank):
		return fmt.Errorf("peer rank %d out of range", r.Test.PeerRank)
	case r.Test != nil && r.Test.Role != verbsprobe.RoleClient && r.Test.Role != verbsprobe.RoleServer:
		return fmt.Errorf("role %q: client or server", r.Test.Role)
	}
	return nil
}
