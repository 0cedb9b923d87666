package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Result is what one boot brought back.
type Result struct {
	Kernel  *Kernel
	Console string // the serial console, kernel messages included
	Log     string // the run script's output (e2e/run.log on the share)
	// RC is the run script's exit status, or -1 when the guest never
	// reported one (crash, panic, timeout).
	RC       int
	TimedOut bool
	// Times: building the initramfs; QEMU start until init runs the
	// script; the script itself; the whole QEMU run.
	Build, Boot, Run, Total time.Duration
	dir                     string
}

// Out is the host directory holding what the guest wrote under /out.
func (r *Result) Out() string { return filepath.Join(r.dir, "share", "out") }

// Cleanup removes the boot's temporary files.
func (r *Result) Cleanup() { os.RemoveAll(r.dir) }

// Err explains a boot whose script did not exit 0, with the console's tail.
func (r *Result) Err() error {
	switch {
	case r.TimedOut:
		return fmt.Errorf("guest %s timed out after %v; console tail:\n%s", r.Kernel.Label, r.Total.Round(time.Second), tail(r.Console, 40))
	case r.RC == -1:
		return fmt.Errorf("guest %s stopped without a result; console tail:\n%s", r.Kernel.Label, tail(r.Console, 40))
	case r.RC != 0:
		return fmt.Errorf("guest %s: script exited %d", r.Kernel.Label, r.RC)
	}
	return nil
}

// BootOptions tune one boot.
type BootOptions struct {
	// Timeout kills a hung guest; 0 means 5 minutes.
	Timeout time.Duration
	// Console, if set, receives the serial console as it comes.
	Console io.Writer
	// MemoryMB is the guest's memory; 0 means 1024.
	MemoryMB int
}

// Boot builds the initramfs for g, boots it under QEMU (software
// emulation, no network device) and collects the result. The error is
// about the harness; the guest's own failure is in Result (see Err).
func (b *Bed) Boot(ctx context.Context, g *Guest, opt BootOptions) (*Result, error) {
	if opt.Timeout == 0 {
		opt.Timeout = 5 * time.Minute
	}
	if opt.MemoryMB == 0 {
		opt.MemoryMB = 1024
	}
	runs := filepath.Join(b.Cache, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, err
	}
	sweep(runs, 6*time.Hour)
	dir, err := os.MkdirTemp(runs, g.Kernel.Label+"-")
	if err != nil {
		return nil, err
	}
	r := &Result{Kernel: g.Kernel, RC: -1, dir: dir}
	share := filepath.Join(dir, "share")
	for _, d := range []string{"out", "e2e"} {
		if err := os.MkdirAll(filepath.Join(share, d), 0o777); err != nil {
			return r, err
		}
	}
	start := time.Now()
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := b.buildInitramfs(ctx, g, initrd); err != nil {
		return r, err
	}
	r.Build = time.Since(start)

	qemu := findTool(hostQemu)
	if qemu == "" {
		return r, errors.New("e2e: qemu-system-x86_64 not found (EnsureTools not run?)")
	}
	args := []string{
		"-nographic", "-no-reboot", "-nic", "none",
		"-nodefaults", "-no-user-config", "-serial", "stdio",
		"-m", strconv.Itoa(opt.MemoryMB), "-smp", "1",
		"-kernel", g.Kernel.Vmlinuz(), "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet mitigations=off",
		"-fsdev", "local,id=host,path=" + share + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=host,mount_tag=host",
	}
	tctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, qemu, args...)
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	cmd.Stderr = cmd.Stdout
	b.logf("e2e: booting %s", g.Kernel)
	qstart := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	var console strings.Builder
	marks := map[string]time.Time{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := ansi.ReplaceAllString(strings.TrimRight(sc.Text(), "\r"), "")
		if m, ok := strings.CutPrefix(line, "e2e-mark: "); ok {
			marks[strings.Fields(m + " ")[0]] = time.Now()
		}
		console.WriteString(line + "\n")
		if opt.Console != nil {
			fmt.Fprintln(opt.Console, line)
		}
	}
	werr := cmd.Wait()
	r.Total = time.Since(qstart)
	r.Console = console.String()
	r.TimedOut = tctx.Err() == context.DeadlineExceeded
	if t, ok := marks["run"]; ok {
		r.Boot = t.Sub(qstart)
		if d, ok := marks["done"]; ok {
			r.Run = d.Sub(t)
		}
	}
	if log, err := os.ReadFile(filepath.Join(share, "e2e", "run.log")); err == nil {
		r.Log = string(log)
	}
	if rc, err := os.ReadFile(filepath.Join(share, "e2e", "rc")); err == nil && !r.TimedOut {
		if n, err := strconv.Atoi(strings.TrimSpace(string(rc))); err == nil {
			r.RC = n
		}
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if werr != nil && r.RC == -1 && !r.TimedOut {
		r.Console += fmt.Sprintf("[e2e: qemu: %v]\n", werr)
	}
	return r, nil
}

// ansi matches the terminal escapes SeaBIOS writes to the serial port.
var ansi = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)

// sweep removes run directories left behind by killed runs.
func sweep(dir string, age time.Duration) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
