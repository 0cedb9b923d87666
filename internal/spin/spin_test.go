package spin

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// With one P, a loop that yields lets another goroutine run long before
// the runtime would preempt it (10 ms).
func TestYieldOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomic.Bool
	go ran.Store(true)
	for i := 0; !ran.Load(); i++ {
		if i == 1000 {
			t.Fatal("the other goroutine did not run in 1000 yields")
		}
		Yield()
	}
}

// How often Yield really yields: every call with one P, every
// yieldEvery-th with more.
func TestYieldEvery(t *testing.T) {
	defer func(f func()) { gosched = f }(gosched)
	var n int
	gosched = func() { n++ }
	for _, c := range []struct{ procs, want int }{{1, 80}, {2, 80 / yieldEvery}, {4, 80 / yieldEvery}} {
		prev := runtime.GOMAXPROCS(c.procs)
		n = 0
		for range 80 {
			Yield()
		}
		runtime.GOMAXPROCS(prev)
		if n != c.want {
			t.Errorf("GOMAXPROCS %d: %d yields in 80 calls, want %d", c.procs, n, c.want)
		}
	}
}

// Empty gives the CPU up on every kernelEvery-th empty poll, and only then.
func TestEmptyEvery(t *testing.T) {
	defer func(f func()) { osYield = f }(osYield)
	var n int
	osYield = func() { n++ }
	for i := 1; i <= 3*kernelEvery+1; i++ {
		Empty(i)
	}
	if n != 3 {
		t.Errorf("%d yields in %d empty polls, want 3", n, 3*kernelEvery+1)
	}
}
