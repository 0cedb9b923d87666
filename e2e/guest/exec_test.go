//go:build e2eguest

package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// grdma is the binary under test: $GRDMA, else layout.Grdma.
func grdma() string {
	if p := os.Getenv("GRDMA"); p != "" {
		return p
	}
	return layout.Grdma
}

// result is what a command did.
type result struct {
	cmd            string
	stdout, stderr string
	code           int    // exit status; -1 if it could not run or was killed
	signal         string // the signal that killed it, where not its time limit ("segmentation fault")
}

func (r result) String() string {
	return fmt.Sprintf("$ %s\nexit %d\nstdout:\n%sstderr:\n%s", r.cmd, r.code, indent(r.stdout), indent(r.stderr))
}

// brief is r's exit status and the last line it printed, stderr first.
func brief(r result) string {
	for _, out := range []string{r.stderr, r.stdout} {
		if out = strings.TrimSpace(out); out != "" {
			return fmt.Sprintf("exit %d, last line %q", r.code, out[strings.LastIndexByte(out, '\n')+1:])
		}
	}
	return fmt.Sprintf("exit %d, no output", r.code)
}

// crashLog prints the kernel's last lines on a crashed process (its
// "segfault at … in LIBRARY" line is KERN_INFO: the console, quiet, omits it).
const crashLog = "dmesg | grep -E 'segfault|trap|general protection|BUG|Oops' | tail -n 5"

func indent(s string) string {
	if s == "" {
		return "    (empty)\n"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// cmdTimeout bounds every command: a hung tool fails its test instead of
// eating the guest's whole time budget.
const cmdTimeout = 60 * time.Second

// runAs runs a command, optionally as another user (uid == gid here).
func runAs(uid int, name string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if uid >= 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	err := c.Run()
	r := result{cmd: strings.TrimSpace(name + " " + strings.Join(args, " ")), stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.code = -1
		r.stderr += fmt.Sprintf("[killed after %v]\n", cmdTimeout)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signal = ws.Signal().String()
			r.stderr += "[killed by signal: " + r.signal + "]\n"
		}
	default:
		r.code = -1
		r.stderr += fmt.Sprintf("[%v]\n", err)
	}
	return r
}

func run(name string, args ...string) result { return runAs(-1, name, args...) }

// must runs a command that has to succeed.
func must(t *testing.T, name string, args ...string) result {
	t.Helper()
	r := run(name, args...)
	if r.code != 0 {
		t.Fatalf("command failed:\n%s", r)
	}
	return r
}

// ip runs iproute2's ip (not busybox's).
func ip(t *testing.T, args ...string) { t.Helper(); must(t, layout.IP, args...) }

// eventually polls cond until it holds or the deadline passes.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
