package verbsprobe

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// trafficResult is shaped like a passing traffic probe: every step, with
// details, as Run returns it.
func trafficResult(i int) *Result {
	r := &Result{Device: "rxe0", Port: 1, Driver: "rxe", VerbsDevice: "uverbs0", GIDIndex: 1, QPN: uint32(17 + i), Traffic: true}
	for j, name := range []string{StepOpen, StepQueryDevice, StepQueryPort, StepAddress, StepAllocPD, StepCreateCQ, StepCreateQP,
		StepInit, StepRTR, StepRTS, StepQueryQP, StepRegMR, StepSend, StepRDMAWrite, StepRDMARead, StepDeregMR, StepDestroyQP,
		StepDestroyCQ, StepDeallocPD, StepClose} {
		r.Steps = append(r.Steps, Step{Name: name, OK: true, Duration: time.Duration(1+(i*7+j)%1000) * time.Microsecond,
			Detail: fmt.Sprintf("%s detail of run %d", name, i)})
	}
	return r
}

// TestSeriesBounded: however many runs, a Series keeps one result and at
// most MedianSamples durations per step; up to MedianSamples runs the
// median is exact, beyond it close to the true one.
func TestSeriesBounded(t *testing.T) {
	var s Series
	const n = 20 * MedianSamples
	for i := range n {
		r := &Result{Steps: []Step{{Name: StepOpen, OK: true, Duration: time.Duration(i % 1000)}}}
		s.Add(r)
		if i == MedianSamples-1 {
			steps, _ := s.Timings()
			if steps[0].Median != 499 { // 0, 0, 1, ..., 999
				t.Errorf("exact median: %v, want 499", steps[0].Median)
			}
		}
	}
	if len(s.steps[StepOpen].sample) != MedianSamples || len(s.total.sample) != MedianSamples {
		t.Fatalf("kept %d and %d durations, want %d", len(s.steps[StepOpen].sample), len(s.total.sample), MedianSamples)
	}
	steps, total := s.Timings()
	if st := steps[0]; st.Runs != n || st.Min != 0 || st.Max != 999 || st.Median < 400 || st.Median > 600 || total.Runs != n {
		t.Errorf("timing %+v (total %+v): want %d runs, 0..999, median near 500", st, total, n)
	}
	if s.Runs != n || s.Passed != n || s.Last == nil {
		t.Errorf("runs %d passed %d last %v", s.Runs, s.Passed, s.Last)
	}
}

// BenchmarkSeriesMemory shows that the memory a probe with count N keeps
// does not grow with N (retained-B/run falls as 1/N), where keeping every
// result (as Repeat did) costs ~3.5 KB per traffic run.
func BenchmarkSeriesMemory(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("series/N=%d", n), func(b *testing.B) {
			var retained uint64
			for range b.N {
				before := heapInUse()
				s := &Series{}
				for i := range n {
					s.Add(trafficResult(i))
				}
				retained = heapInUse() - before
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(retained), "retained-B")
			b.ReportMetric(float64(retained)/float64(n), "retained-B/run")
		})
	}
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("every-result/N=%d", n), func(b *testing.B) {
			var retained uint64
			for range b.N {
				before := heapInUse()
				var all []*Result
				for i := range n {
					all = append(all, trafficResult(i))
				}
				retained = heapInUse() - before
				runtime.KeepAlive(all)
			}
			b.ReportMetric(float64(retained), "retained-B")
			b.ReportMetric(float64(retained)/float64(n), "retained-B/run")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
