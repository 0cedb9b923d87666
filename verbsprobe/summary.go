package verbsprobe

import (
	"context"
	"time"
)

// Repeat runs the probe up to count times, stopping after the first that
// does not pass or when ctx is done. It keeps the statistics of the runs
// and the last result, not every result: memory does not grow with count.
func Repeat(ctx context.Context, opts Options, count int) *Series {
	s := &Series{}
	for range count {
		r := Run(ctx, opts)
		s.Add(r)
		if !r.OK() || ctx.Err() != nil {
			break
		}
	}
	return s
}

// Timing is how long one step (or a whole probe) took over several runs.
type Timing struct {
	Name string
	Runs int
	Min  time.Duration
	// Median is of an even count the lower middle; beyond MedianSamples
	// runs, the median of a uniform sample of MedianSamples of them.
	Median time.Duration
	Max    time.Duration
}

// TotalName is the Name of the Timing of whole probes.
const TotalName = "total"

// Summarize times each step over the results that ran it, in the order
// steps first appear, and the whole probes (Name TotalName).
func Summarize(results []*Result) (steps []Timing, total Timing) {
	var s Series
	for _, r := range results {
		s.Add(r)
	}
	return s.Timings()
}
