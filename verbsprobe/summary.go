package verbsprobe

import (
	"context"
	"slices"
	"time"
)

// Repeat runs the probe up to count times, stopping after the first that
// does not pass or when ctx is done, and returns every result.
func Repeat(ctx context.Context, opts Options, count int) []*Result {
	var results []*Result
	for range count {
		r := Run(ctx, opts)
		results = append(results, r)
		if !r.OK() || ctx.Err() != nil {
			break
		}
	}
	return results
}

// Timing is how long one step (or a whole probe) took over several runs.
type Timing struct {
	Name   string
	Runs   int
	Min    time.Duration
	Median time.Duration // of an even count, the lower middle
	Max    time.Duration
}

// TotalName is the Name of the Timing of whole probes.
const TotalName = "total"

// Summarize times each step over the results that ran it, in the order
// steps first appear, and the whole probes (Name TotalName).
func Summarize(results []*Result) (steps []Timing, total Timing) {
	var order []string
	durations := map[string][]time.Duration{}
	var totals []time.Duration
	for _, r := range results {
		for _, s := range r.Steps {
			if _, seen := durations[s.Name]; !seen {
				order = append(order, s.Name)
			}
			durations[s.Name] = append(durations[s.Name], s.Duration)
		}
		totals = append(totals, r.Duration())
	}
	for _, name := range order {
		steps = append(steps, timing(name, durations[name]))
	}
	return steps, timing(TotalName, totals)
}

func timing(name string, ds []time.Duration) Timing {
	if len(ds) == 0 {
		return Timing{Name: name}
	}
	sorted := slices.Sorted(slices.Values(ds))
	return Timing{Name: name, Runs: len(ds), Min: sorted[0], Median: sorted[(len(sorted)-1)/2], Max: sorted[len(sorted)-1]}
}
