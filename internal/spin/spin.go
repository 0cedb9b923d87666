// Package spin is how grdma's busy-polling loops (latency tests, polled
// pings) let other goroutines, and the kernel's threads, run.
package spin

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
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

// Empty is called by a loop polling a software device's queues (rxe)
// after its n-th poll in a row that found nothing: every kernelEvery-th
// call gives the CPU to a thread that is ready to run (sched_yield(2)).
// A software device's protocol runs in the kernel on the same CPUs, on
// 6.12 in kernel worker threads (rxe's tasks on a workqueue), and a loop
// that never leaves user space kept a woken worker waiting: in the
// one-CPU guests on 6.12 (two runs, medians of 9) lat write's one-way
// median went from 471 and 521 µs to 393 and 438 (ib_write_lat: 380 and
// 410), lat send from 534 and 488 to 432 and 446 (412, 418). On 6.1,
// whose rxe works in softirq, nothing moved beyond the spread. A
// hardware device's loop would not call it: its data path needs no CPU.
func Empty(n int) {
	if n%kernelEvery == 0 {
		osYield()
	}
}

// kernelEvery: every 8th empty poll did better than every 64th on 6.12
// (lat write 393 against 409 µs, send 432 against 449).
const kernelEvery = 8

// osYield is a raw system call: it returns at once when nothing else is
// ready, and the runtime's monitor thread is not woken by it (see
// uverbs' raw calls).
var osYield = func() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
