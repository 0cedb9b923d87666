package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// Params is what every node of a sweep must agree on: the hosts in rank
// order, the schedule and the tests each pair runs. Nodes refuse a
// partner whose Params differ (by ID), and Build refuses records of
// different Params.
type Params struct {
	Hosts    []string `json:"hosts"`    // Host.String(), in rank order
	Schedule string   `json:"schedule"` // KindAllPairs or KindQuick
	// Tests are run by each pair in this order, with their defaults
	// filled in (verbsprobe.Test.WithDefaults): a bw test once each way,
	// a lat test once.
	Tests []verbsprobe.Test `json:"tests"`
}

// Default tests, sized for a quick sweep: a 512-node fleet has 511
// rounds, so each pair gets about a second. 500 ms of 64 KiB RDMA WRITEs
// each way reach a steady rate on hardware; 1000 ping-pongs of 2 bytes
// take a few milliseconds there (on an emulated bed give duration).
var (
	DefaultBW  = verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 65536, Duration: 500 * time.Millisecond}
	DefaultLat = verbsprobe.Test{Kind: verbsprobe.TestLatency, Op: verbsprobe.OpWrite, Size: 2, Iters: 1000}
)

// ID names the parameters in every record: the first 12 hex digits of
// the SHA-256 of their JSON encoding.
func (p Params) ID() string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Validate reports parameters a sweep cannot run.
func (p Params) Validate() error {
	switch {
	case len(p.Hosts) < 2:
		return fmt.Errorf("%d host(s): a sweep needs at least two", len(p.Hosts))
	case p.Schedule != KindAllPairs && p.Schedule != KindQuick:
		return fmt.Errorf("unknown schedule %q", p.Schedule)
	case len(p.Tests) == 0:
		return fmt.Errorf("no test: bw, lat or both")
	}
	for _, t := range p.Tests {
		if t.Kind != verbsprobe.TestBandwidth && t.Kind != verbsprobe.TestLatency {
			return fmt.Errorf("a sweep runs bw and lat tests, not %s", t.Kind)
		}
		if err := t.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Rounds returns the schedule the parameters call for.
func (p Params) Rounds() Schedule {
	if p.Schedule == KindQuick {
		return Quick(len(p.Hosts))
	}
	return AllPairs(len(p.Hosts))
}

// String says what the sweep runs: "all-pairs of 8 hosts: bw write 65536
// B 500ms each way, lat write 2 B x1000".
func (p Params) String() string {
	var tests []string
	for _, t := range p.Tests {
		tests = append(tests, describeTest(t))
	}
	return fmt.Sprintf("%s of %d hosts: %s", p.Schedule, len(p.Hosts), strings.Join(tests, ", "))
}

func describeTest(t verbsprobe.Test) string {
	s := fmt.Sprintf("%s %d B", t, t.Size)
	if t.Duration > 0 {
		s += " " + t.Duration.String()
	} else {
		s += fmt.Sprintf(" x%d", t.Iters)
	}
	if t.Kind == verbsprobe.TestBandwidth {
		s += " each way"
	}
	return s
}

// Diff says how q differs from p, the first difference found: "the host
// lists differ (8 hosts, 7 hosts)", "the tests differ (...)"; "" when
// they are equal.
func (p Params) Diff(q Params) string {
	switch {
	case !slices.Equal(p.Hosts, q.Hosts):
		if len(p.Hosts) != len(q.Hosts) {
			return fmt.Sprintf("the host lists differ (%d hosts, %d hosts)", len(p.Hosts), len(q.Hosts))
		}
		for i := range p.Hosts {
			if p.Hosts[i] != q.Hosts[i] {
				return fmt.Sprintf("the host lists differ at rank %d (%s, %s)", i, p.Hosts[i], q.Hosts[i])
			}
		}
	case p.Schedule != q.Schedule:
		return fmt.Sprintf("the schedules differ (%s, %s)", p.Schedule, q.Schedule)
	case !slices.Equal(p.Tests, q.Tests):
		return fmt.Sprintf("the tests differ (%s; %s)", testsString(p.Tests), testsString(q.Tests))
	}
	return ""
}

func testsString(ts []verbsprobe.Test) string {
	var s []string
	for _, t := range ts {
		s = append(s, describeTest(t))
	}
	return strings.Join(s, ", ")
}

// Planned is one test of a pair: Client connects to Server (ranks) and
// runs Test. Index is its place in the pair's plan.
type Planned struct {
	Index          int
	Client, Server int
	Test           verbsprobe.Test
}

// Plan is what pair p runs, in order: each bw test A to B then B to A
// (the client sends: RDMA WRITE and SEND move data from client to server,
// READ from server to client), each lat test once with A as the client.
func Plan(p Pair, tests []verbsprobe.Test) []Planned {
	var out []Planned
	for _, t := range tests {
		out = append(out, Planned{Index: len(out), Client: p.A, Server: p.B, Test: t})
		if t.Kind == verbsprobe.TestBandwidth {
			out = append(out, Planned{Index: len(out), Client: p.B, Server: p.A, Test: t})
		}
	}
	return out
}
