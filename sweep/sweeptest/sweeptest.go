// Package sweeptest makes the records of a sweep without running one,
// for tests of what reads them (sweep.Build, the report's renderers,
// grdma sweep report): every node's start record and both sides of every
// planned test, with the figures or the failure a function says.
package sweeptest

import (
	"fmt"
	"time"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
)

// Outcome is what one planned test came to.
type Outcome struct {
	BWGbps  float64 // a bw test's figure
	LatUsec float64 // a lat test's median
	// Failed, when set, is the error both sides record: the test failed.
	Failed string
}

// Params are the parameters of an all-pairs sweep of n nodes named
// node01, node02, ... running the default tests.
func Params(n int) sweep.Params {
	p := sweep.Params{Schedule: sweep.KindAllPairs, Tests: []verbsprobe.Test{sweep.DefaultBW, sweep.DefaultLat}}
	for i := range n {
		p.Hosts = append(p.Hosts, fmt.Sprintf("node%02d", i+1))
	}
	return p
}

// Records returns the records the nodes of a sweep of p would write, in
// node order, if each planned test came to f's outcome.
func Records(p sweep.Params, f func(pl sweep.Planned) Outcome) [][]sweep.Record {
	id := p.ID()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	byNode := make([][]sweep.Record, len(p.Hosts))
	for i, h := range p.Hosts {
		byNode[i] = append(byNode[i], sweep.Record{Version: sweep.RecordVersion, Sweep: id, Node: h, Rank: i, Time: at,
			Start: &sweep.StartRecord{Grdma: "grdma sweeptest", Device: "mlx5_0/1", RankFrom: "rank", Params: p}})
	}
	sched := p.Rounds()
	for ri, round := range sched.Rounds {
		for _, pair := range round {
			for _, pl := range sweep.Plan(pair, p.Tests) {
				o := f(pl)
				for _, side := range []struct {
					rank, peer int
					role       string
				}{{pl.Client, pl.Server, verbsprobe.RoleClient}, {pl.Server, pl.Client, verbsprobe.RoleServer}} {
					t := &sweep.TestRecord{Pass: sched.Kind, Round: ri + 1, Index: pl.Index, Peer: p.Hosts[side.peer],
						PeerRank: side.peer, Role: side.role, Test: pl.Test, Outcome: sweep.OutcomeOK, Seconds: 0.5}
					switch {
					case o.Failed != "":
						t.Outcome, t.Error = sweep.OutcomeFailed, o.Failed
					case side.role != verbsprobe.RoleClient:
					case pl.Test.Kind == verbsprobe.TestBandwidth:
						t.Figures = &sweep.Figures{Iters: 1000, Bytes: uint64(o.BWGbps * 1e9 / 16), Seconds: 0.5, BWGbps: o.BWGbps}
					default:
						l := o.LatUsec
						t.Figures = &sweep.Figures{Iters: 1000, LatUsec: &sweep.LatUsec{Min: l, Median: l, Avg: l, P99: l, Max: l}}
					}
					byNode[side.rank] = append(byNode[side.rank], sweep.Record{Version: sweep.RecordVersion, Sweep: id,
						Node: p.Hosts[side.rank], Rank: side.rank, Time: at, Test: t})
				}
			}
		}
	}
	for i, h := range p.Hosts {
		n := len(byNode[i]) - 1
		byNode[i] = append(byNode[i], sweep.Record{Version: sweep.RecordVersion, Sweep: id, Node: h, Rank: i, Time: at,
			End: &sweep.EndRecord{Tests: n, Passed: n, Seconds: float64(len(sched.Rounds))}})
	}
	return byNode
}

// Flat is every node's records in one list.
func Flat(byNode [][]sweep.Record) []sweep.Record {
	var out []sweep.Record
	for _, rs := range byNode {
		out = append(out, rs...)
	}
	return out
}

// SlowNode is an outcome function: every pair at about bw Gb/s and lat µs
// (within 2 %), but bad's pairs at a twentieth of the bandwidth.
func SlowNode(bad int, bw, lat float64) func(sweep.Planned) Outcome {
	return func(pl sweep.Planned) Outcome {
		wobble := 1 - 0.01*float64((pl.Client+pl.Server)%3)
		o := Outcome{BWGbps: bw * wobble, LatUsec: lat / wobble}
		if pl.Client == bad || pl.Server == bad {
			o.BWGbps /= 20
		}
		return o
	}
}
