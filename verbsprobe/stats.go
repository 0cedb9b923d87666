package verbsprobe

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Series is what repeated probes add up to, in bounded memory: how many
// ran and passed, the last result (the failure, when Repeat stopped at
// one) and the timing of each step.
type Series struct {
	Runs, Passed int
	Last         *Result
	order        []string // step names in the order they first ran
	steps        map[string]*durations
	total        durations
}

// Add counts one probe.
func (s *Series) Add(r *Result) {
	s.Runs++
	if r.OK() {
		s.Passed++
	}
	s.Last = r
	if s.steps == nil {
		s.steps = map[string]*durations{}
	}
	for _, st := range r.Steps {
		d := s.steps[st.Name]
		if d == nil {
			d = &durations{}
			s.steps[st.Name] = d
			s.order = append(s.order, st.Name)
		}
		d.add(st.Duration)
	}
	s.total.add(r.Duration())
}

// Timings times each step over the runs that ran it, in the order steps
// first ran, and the whole probes (Name TotalName).
func (s *Series) Timings() (steps []Timing, total Timing) {
	for _, name := range s.order {
		steps = append(steps, s.steps[name].timing(name))
	}
	return steps, s.total.timing(TotalName)
}

// MedianSamples bounds the durations kept per step for the median.
const MedianSamples = 1001

// durations keeps the count, extremes and a uniform sample (reservoir
// sampling, algorithm R) of a stream of durations.
type durations struct {
	runs     int
	min, max time.Duration
	sample   []time.Duration
}

func (d *durations) add(v time.Duration) {
	d.runs++
	if d.runs == 1 || v < d.min {
		d.min = v
	}
	if d.runs == 1 || v > d.max {
		d.max = v
	}
	if len(d.sample) < MedianSamples {
		d.sample = append(d.sample, v)
	} else if i := rand.IntN(d.runs); i < MedianSamples {
		d.sample[i] = v
	}
}

func (d *durations) timing(name string) Timing {
	if d.runs == 0 {
		return Timing{Name: name}
	}
	sorted := slices.Sorted(slices.Values(d.sample))
	return Timing{Name: name, Runs: d.runs, Min: d.min, Median: sorted[(len(sorted)-1)/2], Max: d.max}
}
