package sweep_test

import (
	"fmt"
	"testing"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/sweeptest"
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
