// Package spin is how grdma's busy-polling loops (latency tests, polled
// pings) let other goroutines, and the kernel's threads, run.
package spin

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/internal/kver"
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
// after its n-th poll in a row that found nothing: where rxe works in
// kernel threads, every kernelEvery-th call gives the CPU to a thread
// that is ready to run (sched_yield(2)). Since 2023 (Linux 6.4 at the
// earliest) rxe runs its tasks in kernel worker threads (a workqueue) on
// the same CPUs, and a loop that never leaves user space kept a woken
// worker waiting: in the one-CPU guests on 6.12 (two runs, medians of 9)
// lat write's one-way median went from 471 and 521 µs to 393 and 438
// (ib_write_lat: 380 and 410), lat send from 534 and 488 to 432 and 446
// (412, 418). Before that, rxe works in softirq and within the caller's
// system call, none of it waits for a yield, and a yield only let other
// threads (the Go runtime's first) in mid-cycle: on 6.1 (one run, 15
// interleaved rounds of 300 exchanges) not yielding made lat write
// 325.9 -> 298.3 µs (ib_write_lat 270.3), send 352.7 -> 331.3 (272.3),
// read 295.7 -> 285.4 (259.3), faster in 11, 12 and 13 rounds of 15. A
// hardware device's loop would not call it: its data path needs no CPU.
func Empty(n int) {
	if n%kernelEvery == 0 && rxeThreads() {
		osYield()
	}
}

// RxeThreads reports whether this kernel's rxe works in kernel threads,
// which Empty yields to (see threaded); read once a process.
func RxeThreads() bool { return rxeThreads() }

var rxeThreads = sync.OnceValue(func() bool {
	btf, _ := os.ReadFile(rxeBTF)
	release, _ := os.ReadFile(osRelease)
	return threaded(btf, strings.TrimSpace(string(release)))
})

const (
	rxeBTF    = "/sys/kernel/btf/rdma_rxe" // the module's names, 40 KB
	osRelease = "/proc/sys/kernel/osrelease"
)

// threaded decides from rdma_rxe's BTF (its type and function names,
// where the kernel publishes them; nil when not) and the kernel release.
// A module with rxe_alloc_wq (which makes the workqueue its tasks run
// on) works in threads whatever the release says, as distributions
// backport rxe; so does any module on 6.4 or newer or on a release that
// does not parse. Only a release before 6.4 whose module lacks the name,
// or publishes none, is taken to work in softirq.
func threaded(btf []byte, release string) bool {
	if bytes.Contains(btf, []byte("\x00rxe_alloc_wq\x00")) {
		return true
	}
	v, ok := kver.Parse(release)
	return !ok || v.AtLeast(6, 4)
}

// kernelEvery: every 8th empty poll did better than every 64th on 6.12
// (lat write 393 against 409 µs, send 432 against 449).
const kernelEvery = 8

// osYield is a raw system call: it returns at once when nothing else is
// ready, and the runtime's monitor thread is not woken by it (see
// uverbs' raw calls).
var osYield = func() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
