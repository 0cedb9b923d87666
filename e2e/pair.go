package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// The pair's NICs.
const (
	macA = "52:54:00:00:00:0a"
	macB = "52:54:00:00:00:0b"
)

// Bounds of BootPair's own waits.
const (
	// stopGrace: guest A powers off when B's scenarios tell its agent to
	// stop; after B stopped, A gets this long before it is killed.
	stopGrace = 30 * time.Second
)

// PairSpec is what the two guests of the two-host topology run.
type PairSpec struct {
	Kernel *Kernel
	// A and B are the two guests (grdma, test binary, script...); BootPair
	// sets their Kernel and Link: A gets layout.PeerA, B layout.PeerB.
	A, B *Guest
	// Timeout is B's time limit (0 means DefaultGuestTimeout); A may run a minute
	// longer, having started first.
	Timeout time.Duration
	// Console, if set, receives both consoles as they come, each line
	// prefixed with "A: " or "B: ".
	Console io.Writer
}

// PairResult is what a pair's boot brought back.
type PairResult struct {
	A, B *Result
	// Port is the 127.0.0.1 port the wire's connection was made on (its
	// listener is closed once the bed's own connection is accepted).
	Port int
	// Boot runs from starting A's QEMU until both guests run their scripts.
	Boot time.Duration
	// Faults are the console lines that stopped the pair: a guest's
	// kernel failed (watchFault), "guest A: [ … ] Oops: …".
	Faults []string
	// RxeFaults is how many of Faults are the guest kernel failing in
	// rdma_rxe (rxeFault).
	RxeFaults int
}

// Cleanup removes both boots' temporary files.
func (p *PairResult) Cleanup() {
	for _, r := range []*Result{p.A, p.B} {
		if r != nil {
			r.Cleanup()
		}
	}
}

// Err explains a pair whose guests did not both end well, B first (its
// scripts are the scenarios).
func (p *PairResult) Err() error {
	var errs []string
	for _, r := range []*Result{p.B, p.A} {
		if r == nil {
			continue
		}
		if err := r.Err(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "\n"))
}

// BootPair boots two guests of one kernel joined by one Ethernet link: a
// virtio-net NIC in each, whose wire is a TCP connection between the two
// QEMUs on 127.0.0.1 (the only network either guest has), made by the bed
// (wire) and handed to them.
// BootPair returns when B has stopped and A has powered off (or was killed
// stopGrace later). As with Boot, the error is about the harness; the
// guests' own failures are in the results.
func (b *Bed) BootPair(ctx context.Context, spec PairSpec) (*PairResult, error) {
	if spec.Timeout == 0 {
		spec.Timeout = DefaultGuestTimeout
	}
	a, bg := *spec.A, *spec.B
	a.Kernel, bg.Kernel = spec.Kernel, spec.Kernel
	optA := BootOptions{Timeout: spec.Timeout + time.Minute}
	optB := BootOptions{Timeout: spec.Timeout}
	if spec.Console != nil {
		c := NewConsoles(spec.Console)
		optA.Console, optB.Console = c.Prefixed("A: "), c.Prefixed("B: ")
	}
	p := &PairResult{}

	// The wire: a TCP connection the bed makes and hands to both QEMUs as
	// their fd 3, with Nagle off. QEMU's own socket,listen/connect leaves
	// Nagle on: a small frame written while the one before was
	// unacknowledged waited for the other host's delayed ACK (up to 40 ms),
	// so a UD probe's echo, written after the report before it, waited for
	// the next probe (BENCHMARKS.md, "Which side is late").
	wa, wb, port, err := wire()
	if err != nil {
		return p, err
	}
	// Each QEMU holds its own copy of its end: the bed closes its copies
	// as soon as the QEMU has started. Go's runtime poller watches a
	// socket the process holds, so while the bed kept them every frame
	// on the link woke this process on the host's two cores — 1.2 to 1.6
	// times a UD ping, preempting a guest's CPU thousands of times a
	// benchmark round (BENCHMARKS.md, "The host's view, and the bed's
	// own wake-ups").
	defer wa.Close() // on the paths that return before a launch
	defer wb.Close()
	p.Port = port
	a.Link = &Link{Backend: "socket,fd=3", MAC: macA,
		Address: fmt.Sprintf("%s/%d", layout.PeerA, layout.PairPrefix), Name: layout.PeerAName}
	optA.Files = []*os.File{wa}
	ma, err := b.launch(ctx, &a, optA)
	wa.Close()
	if err != nil {
		if ma != nil {
			p.A = ma.r
		}
		return p, err
	}

	bg.Link = &Link{Backend: "socket,fd=3", MAC: macB,
		Address: fmt.Sprintf("%s/%d", layout.PeerB, layout.PairPrefix), Name: layout.PeerBName}
	optB.Files = []*os.File{wb}
	mb, err := b.launch(ctx, &bg, optB)
	wb.Close()
	if err != nil {
		ma.kill("guest B could not start")
		p.A, _ = ma.wait()
		if mb != nil {
			p.B = mb.r
		}
		return p, err
	}
	// A kernel failure of either guest stops the pair at once (see
	// watchFault): B's scenarios would wait for A's agent, or for B.
	go watchFault(b, "guest A", ma, mb)
	go watchFault(b, "guest B", mb, mb)
	p.B, err = mb.wait()
	select {
	case <-ma.done:
	case <-time.After(stopGrace):
		ma.kill(fmt.Sprintf("still running %v after guest B stopped", stopGrace))
	}
	var errA error
	p.A, errA = ma.wait()
	if ra, rb := ma.marks["run"], mb.marks["run"]; !ra.IsZero() && !rb.IsZero() {
		p.Boot = max(ra.Sub(ma.started), rb.Sub(ma.started))
	}
	for _, g := range []struct {
		name string
		m    *machine
	}{{"guest A", ma}, {"guest B", mb}} {
		if line, rxe := g.m.failure(); line != "" {
			p.Faults = append(p.Faults, g.name+": "+line)
			if rxe {
				p.RxeFaults++
			}
		}
	}
	if err == nil {
		err = errA
	}
	return p, err
}

// wire makes the pair's link: a TCP connection on 127.0.0.1 with Nagle
// off at both ends, as files for the two QEMUs, and the listener's port
// (for the log).
func wire() (a, b *os.File, port int, err error) {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, nil, 0, err
	}
	defer l.Close()
	cb, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		return nil, nil, 0, err
	}
	defer cb.Close()
	ca, err := l.AcceptTCP()
	if err != nil {
		return nil, nil, 0, err
	}
	defer ca.Close()
	if ca.RemoteAddr().String() != cb.LocalAddr().String() {
		return nil, nil, 0, fmt.Errorf("e2e: the wire's listener accepted %v, not the bed's own connection", ca.RemoteAddr())
	}
	for _, c := range []*net.TCPConn{ca, cb} {
		if err := c.SetNoDelay(true); err != nil {
			return nil, nil, 0, err
		}
	}
	if a, err = ca.File(); err != nil {
		return nil, nil, 0, err
	}
	if b, err = cb.File(); err != nil {
		a.Close()
		return nil, nil, 0, err
	}
	return a, b, l.Addr().(*net.TCPAddr).Port, nil
}
