// Package e2e is grdma's real-kernel test bed: it fetches Debian's stock
// kernels, builds a small initramfs with rdma_rxe, iproute2, the ibverbs
// tools, perftest, grdma and the guest tests, boots it in QEMU (no KVM, no
// network device) and brings the results back over a 9p share. BootPair
// boots the two-host topology: two guests joined by one Ethernet link.
//
// The host side is driven by e2e_test.go (build tag e2e, `make e2e`) and by
// the capture tool cmd/guestrun; the guest side lives in e2e/guest.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Bed holds where the test bed lives and how it reports progress.
type Bed struct {
	// Repo is the grdma repository root (where go.mod is).
	Repo string
	// Cache keeps downloaded .debs and unpacked kernels between runs
	// (Repo/.cache/e2e, git-ignored).
	Cache string
	// Logf reports progress; nil means silent.
	Logf func(format string, args ...any)
}

// NewBed finds the repository root from the working directory upwards.
func NewBed(logf func(string, ...any)) (*Bed, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/grdma/grdma")) {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("e2e: no grdma go.mod above the working directory")
		}
		dir = parent
	}
	b := &Bed{Repo: dir, Cache: filepath.Join(dir, ".cache", "e2e"), Logf: logf}
	if err := os.MkdirAll(b.Cache, 0o755); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Bed) logf(format string, args ...any) {
	if b.Logf != nil {
		b.Logf(format, args...)
	}
}

// run executes a command and returns its stdout; the error carries stderr,
// because a bare "exit status 100" from apt-get says nothing.
func (b *Bed) run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err,
			tail(stdout.String(), 20), tail(stderr.String(), 20))
	}
	return stdout.String(), nil
}

// lock takes an exclusive flock on a file in the cache, so that two runs
// (say make e2e and guestrun) do not unpack the same kernel at once.
func (b *Bed) lock(name string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(b.Cache, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	if out != "" {
		out += "\n"
	}
	return out
}

// Tail is tail for callers reporting a console log.
func Tail(s string, n int) string { return tail(s, n) }
