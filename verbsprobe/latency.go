package verbsprobe

import (
	"math/rand/v2"
	"slices"
	"time"
)

// LatencyStats summarizes latency samples.
type LatencyStats struct {
	Samples int
	Min     time.Duration
	Median  time.Duration
	Avg     time.Duration
	P99     time.Duration
	Max     time.Duration
}

// maxLatencySamples bounds the samples kept for the percentiles: a long
// run keeps a uniform reservoir of them, so memory does not grow with it;
// the count, minimum, average and maximum are exact.
const maxLatencySamples = 1 << 16

// latencyRecorder collects samples in bounded memory.
type latencyRecorder struct {
	n        int
	sum      time.Duration
	min, max time.Duration
	kept     []time.Duration
	rng      *rand.Rand
}

func (r *latencyRecorder) add(d time.Duration) {
	r.n++
	r.sum += d
	if r.n == 1 || d < r.min {
		r.min = d
	}
	if d > r.max {
		r.max = d
	}
	if len(r.kept) < maxLatencySamples {
		r.kept = append(r.kept, d)
		return
	}
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if i := r.rng.IntN(r.n); i < maxLatencySamples { // reservoir sampling
		r.kept[i] = d
	}
}

// stats returns the summary; nil without samples.
func (r *latencyRecorder) stats() *LatencyStats {
	if r.n == 0 {
		return nil
	}
	sorted := slices.Clone(r.kept)
	slices.Sort(sorted)
	at := func(q float64) time.Duration { return sorted[int(q*float64(len(sorted)-1)+0.5)] }
	return &LatencyStats{Samples: r.n, Min: r.min, Median: at(0.5), Avg: r.sum / time.Duration(r.n), P99: at(0.99), Max: r.max}
}

// LatencyOf summarizes samples as a probe's lat test does (nil without
// any): for protocols that time exchanges outside this package.
func LatencyOf(samples []time.Duration) *LatencyStats {
	var r latencyRecorder
	for _, d := range samples {
		r.add(d)
	}
	return r.stats()
}
