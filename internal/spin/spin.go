// Package spin is how grdma's busy-polling loops (latency tests, polled
// pings) let other goroutines run.
package spin

import (
	"runtime"
	"sync/atomic"
)

// Yield lets other goroutines run while a busy-polling loop waits. With one
// P (GOMAXPROCS=1) it is runtime.Gosched; with more, only every
// yieldEvery-th call is. runtime.Gosched also wakes a thread for an idle P
// to look for work: grdma runs with two Ps even on one CPU (cmd/grdma), and
// there each yield cost two thread switches on that CPU in the middle of
// the round trip being timed (lat send in the one-CPU guests on 6.12: 783
// µs yielding on every call, 676 µs on every 8th, 476 µs for ib_send_lat;
// never yielding, in another run, 708 -> 517 µs, but it leaves the other
// goroutines to the runtime's 10 ms preemption when every P spins). With
// more Ps than spinning loops the other goroutines run on the others; with
// as many loops as Ps they still get a turn every yieldEvery calls.
func Yield() {
	if runtime.GOMAXPROCS(0) == 1 || calls.Add(1)%yieldEvery == 0 {
		gosched()
	}
}

const yieldEvery = 8

var (
	calls   atomic.Uint32
	gosched = runtime.Gosched // a test counts the yields
)
