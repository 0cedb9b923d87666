package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// The pair's NICs: A listens on the wire, B connects to it.
const (
	macA = "52:54:00:00:00:0a"
	macB = "52:54:00:00:00:0b"
)

// Bounds of BootPair's own waits.
const (
	// listenWait: QEMU binds the wire's socket while it sets up its
	// devices, well before the guest runs.
	listenWait = 60 * time.Second
	// stopGrace: guest A powers off when B's scenarios tell its agent to
	// stop; after B stopped, A gets this long before it is killed.
	stopGrace = 30 * time.Second
	// portAttempts: a free port found by listening on :0 can be taken by
	// someone else before QEMU binds it; then A is started again.
	portAttempts = 5
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
	// Port is the wire's TCP port on 127.0.0.1.
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
// QEMUs on 127.0.0.1 (the only network either guest has). A's QEMU listens
// on a free port; B's is started once that socket listens, and connects.
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

	var ma *machine
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return p, err
		}
		a.Link = &Link{Backend: fmt.Sprintf("socket,listen=127.0.0.1:%d", port), MAC: macA,
			Address: fmt.Sprintf("%s/%d", layout.PeerA, layout.PairPrefix), Name: layout.PeerAName}
		m, err := b.launch(ctx, &a, optA)
		if err != nil {
			if m != nil {
				p.A = m.r
			}
			return p, err
		}
		if err := m.waitListening(port); err != nil {
			m.kill(err.Error())
			p.A, _ = m.wait()
			return p, fmt.Errorf("e2e: guest A: %v", err)
		}
		if !m.exited() {
			ma, p.Port = m, port
			break
		}
		r, err := m.wait()
		if err != nil {
			p.A = r
			return p, err
		}
		if strings.Contains(r.Console, "Address already in use") && attempt < portAttempts {
			b.logf("e2e: %s: port %d was taken before QEMU bound it; again with another", spec.Kernel.Label, port)
			r.Cleanup()
			continue
		}
		p.A = r
		return p, fmt.Errorf("e2e: guest A's QEMU stopped before it listened on 127.0.0.1:%d; console:\n%s", port, tail(r.Console, 20))
	}

	bg.Link = &Link{Backend: fmt.Sprintf("socket,connect=127.0.0.1:%d", p.Port), MAC: macB,
		Address: fmt.Sprintf("%s/%d", layout.PeerB, layout.PairPrefix), Name: layout.PeerBName}
	mb, err := b.launch(ctx, &bg, optB)
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

// freePort finds a TCP port on 127.0.0.1 that nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening polls until this QEMU listens on 127.0.0.1:port, or it
// stopped (the caller looks at why), for at most listenWait. It only looks
// (in /proc), never connects: QEMU would take a probe for its peer.
func (m *machine) waitListening(port int) error {
	for end := time.Now().Add(listenWait); ; time.Sleep(20 * time.Millisecond) {
		if m.exited() || listensOn(m.cmd.Process.Pid, port) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("QEMU did not listen on 127.0.0.1:%d within %v", port, listenWait)
		}
	}
}

// listensOn reports whether process pid holds a socket listening on
// 127.0.0.1:port.
func listensOn(pid, port int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return false
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		// sl local_address rem_address st ... uid timeout inode
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false
	}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && inodes[link] {
			return true
		}
	}
	return false
}
