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
