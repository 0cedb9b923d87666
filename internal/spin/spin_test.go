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

// Empty gives the CPU up on every kernelEvery-th empty poll, and only
// then; never where rxe works in softirq.
func TestEmptyEvery(t *testing.T) {
	defer func(f func()) { osYield = f }(osYield)
	defer func(f func() bool) { rxeThreads = f }(rxeThreads)
	var n int
	osYield = func() { n++ }
	for _, c := range []struct {
		threads bool
		want    int
	}{{true, 3}, {false, 0}} {
		rxeThreads = func() bool { return c.threads }
		n = 0
		for i := 1; i <= 3*kernelEvery+1; i++ {
			Empty(i)
		}
		if n != c.want {
			t.Errorf("rxe in threads %v: %d yields in %d empty polls, want %d", c.threads, n, 3*kernelEvery+1, c.want)
		}
	}
}

// Where rxe works: its BTF's rxe_alloc_wq first, then the release.
func TestThreaded(t *testing.T) {
	// What /sys/kernel/btf/rdma_rxe holds (strings table excerpts, NUL
	// separated): Debian's 6.1.0-56 has tasklets, 6.12.117 the workqueue.
	tasklets := []byte("\x00rxe_sched_task\x00rxe_run_task\x00rxe_do_task\x00")
	workqueue := []byte("\x00rxe_sched_task\x00rxe_run_task\x00rxe_alloc_wq\x00do_task\x00")
	for _, c := range []struct {
		btf     []byte
		release string
		want    bool
	}{
		{tasklets, "6.1.0-56-amd64", false},
		{workqueue, "6.12.117+deb12-amd64", true},
		{nil, "6.1.0-56-amd64", false},             // no BTF: the release decides
		{nil, "6.12.117+deb12-amd64", true},        // the same
		{nil, "6.4.0", true},                       // the first release that may
		{nil, "6.3.13", false},                     // the last one that cannot
		{workqueue, "5.14.0-427.el9.x86_64", true}, // a backport: BTF wins
		{tasklets, "6.8.0-45-generic", true},       // a name gone in a later rxe: the release wins
		{nil, "", true},                            // unknown: yield, as before
		{[]byte("xrxe_alloc_wqx"), "6.1", false},   // a whole name only
	} {
		if got := threaded(c.btf, c.release); got != c.want {
			t.Errorf("threaded(%q, %q) = %v, want %v", c.btf, c.release, got, c.want)
		}
	}
}
