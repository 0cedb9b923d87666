package sweep_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/sweeptest"
	"github.com/grdma/grdma/verbsprobe"
)

// BenchmarkBuild: the report over a whole fleet's records (N-1 rounds,
// three tests a pair, both sides' records).
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{64, 512} {
		recs := sweeptest.Flat(sweeptest.Records(sweeptest.Params(n), sweeptest.SlowNode(n/2, 98, 2)))
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sweep.Build(recs, sweep.DefaultCriteria); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(recs)), "records")
		})
	}
}

// BenchmarkAllPairs: the schedule every node computes at start.
func BenchmarkAllPairs(b *testing.B) {
	for _, n := range []int{512, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				sweep.AllPairs(n)
			}
		})
	}
}

// instantProber answers every test at once: what is left is the
// coordinator's own work (scheduling, records, the report).
type instantProber struct{}

func (instantProber) Check(context.Context, int) error { return nil }

func (instantProber) Probe(_ context.Context, client, server int, t verbsprobe.Test, _ time.Duration) sweep.ProbeResult {
	if t.Kind == verbsprobe.TestLatency {
		return sweep.ProbeResult{Outcome: sweep.OutcomeOK, Down: -1, Figures: &sweep.Figures{Iters: 1000, LatUsec: &sweep.LatUsec{Min: 2, Median: 2, Avg: 2, P99: 3, Max: 4}}}
	}
	return sweep.ProbeResult{Outcome: sweep.OutcomeOK, Down: -1, Figures: &sweep.Figures{Iters: 1000, Bytes: 1 << 30, Seconds: 0.5, BWGbps: 97 + float64((client+server)%3)}}
}

// BenchmarkCoordinator: a whole coordinated sweep of N nodes over a
// prober that answers at once, records written (to nowhere) and judged:
// the coordinator's CPU and memory beside the tests themselves.
// retained-heap-B is the heap still in use once the report is made (the
// records it was built from).
func BenchmarkCoordinator(b *testing.B) {
	for _, n := range []int{64, 512} {
		p := sweeptest.Params(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			tests := 0
			var retained uint64
			for b.Loop() {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := ms.HeapAlloc
				c := &sweep.Coordinator{Params: p, Prober: instantProber{}, Out: sweep.NewWriter(io.Discard), Confirm: true, Criteria: sweep.DefaultCriteria}
				_, recs, err := c.Run(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				retained = max(retained, ms.HeapAlloc-min(base, ms.HeapAlloc))
				tests = len(recs)
			}
			b.ReportMetric(float64(tests), "records")
			b.ReportMetric(float64(retained), "retained-heap-B")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*(n-1)/2*3), "ns/test")
		})
	}
}
