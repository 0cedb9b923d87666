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
	"sync"
	"time"
)

// Result is what one boot brought back.
type Result struct {
	Kernel *Kernel
	// Name is the guest's host name on a link (Link.Name), else "".
	Name    string
	Console string // the serial console, kernel messages included
	Log     string // the run script's output (e2e/run.log on the share)
	// RC is the run script's exit status, or -1 when the guest never
	// reported one (crash, panic, timeout).
	RC       int
	TimedOut bool
	// Times: building the initramfs; QEMU start until init runs the
	// script; the script itself; the whole QEMU run.
	Build, Boot, Run, Total time.Duration
	// Image is the initramfs's size in bytes.
	Image  int64
	dir    string
	killed string // why the harness killed it before its time limit
}

// Out is the host directory holding what the guest wrote under /out.
func (r *Result) Out() string { return filepath.Join(r.dir, "share", "out") }

// Cleanup removes the boot's temporary files.
func (r *Result) Cleanup() { os.RemoveAll(r.dir) }

// Err explains a boot whose script did not exit 0, with the console's tail.
func (r *Result) Err() error {
	switch {
	case r.TimedOut && r.killed != "":
		return fmt.Errorf("guest %s killed after %v: %s; console tail:\n%s", r.label(), r.Total.Round(time.Second), r.killed, tail(r.Console, 40))
	case r.TimedOut:
		return fmt.Errorf("guest %s timed out after %v; console tail:\n%s", r.label(), r.Total.Round(time.Second), tail(r.Console, 40))
	case r.RC == -1:
		return fmt.Errorf("guest %s stopped without a result; console tail:\n%s", r.label(), tail(r.Console, 40))
	case r.RC != 0:
		return fmt.Errorf("guest %s: script exited %d", r.label(), r.RC)
	}
	return nil
}

// label names the guest in messages: its kernel, and its host name when
// it is on a link.
func (r *Result) label() string {
	if r.Name != "" {
		return r.Kernel.Label + " " + r.Name
	}
	return r.Kernel.Label
}

// BootOptions tune one boot.
type BootOptions struct {
	// Timeout kills a hung guest; 0 means 5 minutes.
	Timeout time.Duration
	// Console, if set, receives the serial console as it comes.
	Console io.Writer
	// MemoryMB is the guest's memory; 0 means 1024.
	MemoryMB int
	// QEMUArgs are appended to QEMU's command line: a PCIe topology
	// ("-machine", "q35", "-device", "pcie-root-port,..."), more CPUs or
	// NUMA nodes (a later -smp or -m replaces the default).
	QEMUArgs []string
	// KernelArgs are appended to the kernel command line.
	KernelArgs string
	// Files are handed to QEMU as its fds 3, 4, ... (a Link's "socket,fd=3").
	Files []*os.File

	// initramfs, if set, is an image built already (the fleet's guests
	// share one), used instead of building one from the Guest.
	initramfs string
	// share holds files put on the guest's 9p share before it boots
	// (path under the share → content): a fleet guest's run script and
	// link configuration.
	share map[string][]byte
}

// Boot builds the initramfs for g, boots it under QEMU (software
// emulation; no network device unless g.Link) and collects the result. The
// error is about the harness; the guest's own failure is in Result (see Err).
func (b *Bed) Boot(ctx context.Context, g *Guest, opt BootOptions) (*Result, error) {
	m, err := b.launch(ctx, g, opt)
	if err != nil {
		if m != nil {
			return m.r, err
		}
		return nil, err
	}
	return m.wait()
}

// machine is a running QEMU.
type machine struct {
	r       *Result
	cmd     *exec.Cmd
	ctx     context.Context // the caller's
	tctx    context.Context // with the time limit
	cancel  context.CancelFunc
	share   string
	started time.Time
	marks   map[string]time.Time
	done    chan struct{} // closed once QEMU exited and its console is read
	running chan struct{} // closed when init starts the script (its "run" mark)
	werr    error
	// killOnce keeps the first reason to kill it (the fleet's watchers
	// and its time limit may both try).
	killOnce sync.Once
	// fault is closed at the console's first line that says the guest's
	// kernel failed (an oops, a BUG, a panic: see kernelFault), which
	// faultLine then holds; QEMU keeps running after one, its guest
	// mostly dead.
	fault     chan struct{}
	faultLine string
	// faultLog is the console from faultLine on (at most faultLines):
	// the whole oops, its first lines included, however long.
	faultLog []string
	// linked guests print a heartbeat (heartbeatPrefix); beat is the last.
	linked bool
	beat   time.Time
	// hangAfter replaces hangSilence when set (tests).
	hangAfter time.Duration
	// qmp is a linked guest's QMP socket (see nicQueues), in a directory
	// of its own that goes when QEMU stops.
	qmp string
	// recent is the console's last recentLines lines, for a hang's report.
	recent []string
	mu     sync.Mutex // faultLine, faultLog, beat, marks and recent, for a watcher while QEMU runs
}

// recentLines bounds machine.recent.
const recentLines = 40

// faultLines bounds machine.faultLog (an oops with its trace and modules
// is 50 to 80 lines).
const faultLines = 150

// kernelFaultLine matches the first line the kernel prints when it
// fails: after its timestamp, "BUG: ..." (NULL dereference, page fault,
// scheduling while atomic), "Oops: ...", "general protection fault",
// "kernel BUG at", "Kernel panic", a soft lockup (kernel/watchdog.c:
// "watchdog: BUG: soft lockup - CPU#%d stuck for %us!") and a task stuck
// in the kernel (kernel/hung_task.c: "INFO: task %s:%d blocked for more
// than %ld seconds."; a wedged rxe leaves every rdma command that touches
// it so, unkillable) and a network device whose transmit queue has not
// moved for 5 s (net/sched/sch_generic.c: "NETDEV WATCHDOG: ... transmit
// queue %u timed out": QEMU stopped taking the guest's frames, which on
// the VDE switch it never resumes, and the guest is cut off). Each of
// these leaves the guest, or what touches RDMA or the link on it, dead
// while QEMU runs on. A WARNING is not one: the kernel carries on after it.
// The heartbeat's own "transmit stalled" line (guestfs/netbeat.sh) counts
// too: the same stall, told a minute after it starts where the kernel's
// watchdog waits for a full ring, minutes later on a quiet guest or never
// before the scenarios end.
var kernelFaultLine = regexp.MustCompile(`^(\[\s*\d+\.\d+\] (BUG: |Oops: |general protection fault|kernel BUG at |Kernel panic - |watchdog: BUG: soft lockup|INFO: task \S+ blocked for more than |.*NETDEV WATCHDOG: .*transmit queue \d+ timed out)|e2e-net: \S+ transmit stalled: )`)

// linkStall reports whether a kernel failure's line is a link that stopped
// sending (the kernel's NETDEV WATCHDOG or netbeat's stall) rather than
// the kernel failing.
func linkStall(line string) bool {
	return strings.Contains(line, "NETDEV WATCHDOG") || strings.HasPrefix(strings.TrimSpace(line), heartbeatPrefix) && strings.Contains(line, " transmit stalled: ")
}

// heartbeatPrefix starts the line init prints on the console every 30 s
// while a guest with a link runs (guestfs/init.sh): from user space, so
// its absence says the guest no longer schedules.
const heartbeatPrefix = "e2e-net: "

// hangSilence is how long a linked guest's heartbeat may be missing,
// once its script runs, before the guest counts as hung: eight beats,
// which no load on a 2-core host has delayed (the guests' timers run on
// the host's clock).
const hangSilence = 4 * time.Minute

// kernelFault reports whether a console line is a kernel failure's first.
func kernelFault(line string) bool { return kernelFaultLine.MatchString(line) }

// rxeFault reports whether a kernel failure's console (faultLog) shows it
// in rdma_rxe: its trace or RIP in the module ("rxe_receiver+0x1cc6/0x2410
// [rdma_rxe]"), the task an rxe work item ("Workqueue: rxe_wq"), or the
// defect's mark where another task met it: a double fault in the slab
// allocator, the next allocation finding the free list rdma_rxe broke
// (e2e/README.md, "6.12 and the fleet"). The "Modules linked in:" line
// names rdma_rxe in every oops and does not count.
func rxeFault(log []string) bool {
	doubleFault := false
	for _, l := range log {
		switch {
		case strings.Contains(l, " [rdma_rxe]") || strings.Contains(l, "Workqueue: rxe_wq "):
			return true
		case strings.Contains(l, "] Oops: double fault"):
			doubleFault = true
		case doubleFault && slabRIP.MatchString(l):
			return true
		}
	}
	return false
}

// slabRIP is an oops's RIP line in the slab allocator's allocation.
var slabRIP = regexp.MustCompile(`RIP: \w+:(kmem_cache_alloc|__kmalloc)\w*\+`)

// consoleLine takes one console line: its mark, a kernel failure.
// Called from the console reader only.
func (m *machine) consoleLine(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mark, ok := strings.CutPrefix(line, "e2e-mark: "); ok {
		name := strings.Fields(mark + " ")[0]
		if _, seen := m.marks[name]; !seen && name == "run" {
			close(m.running)
		}
		m.marks[name] = time.Now()
	}
	if strings.HasPrefix(line, heartbeatPrefix) {
		m.beat = time.Now()
	}
	if len(m.recent) == recentLines {
		m.recent = append(m.recent[:0], m.recent[1:]...)
	}
	m.recent = append(m.recent, line)
	if m.faultLine == "" && kernelFault(line) {
		m.failLocked(line)
	}
	if m.faultLine != "" && len(m.faultLog) < faultLines {
		m.faultLog = append(m.faultLog, line)
	}
}

// failLocked records the guest's failure (a console line, or the bed's
// words for a hang) and wakes its watcher. m.mu must be held.
func (m *machine) failLocked(line string) {
	m.faultLine = line
	close(m.fault)
}

// checkHeartbeat fails a guest whose heartbeat has been missing for
// longer than silence since its script started (or its last beat), and
// reports whether it did. Guests without a link print none: never hung.
func (m *machine) checkHeartbeat(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	silence := m.hangAfter
	if silence == 0 {
		silence = hangSilence
	}
	if m.faultLine != "" || !m.linked {
		return false
	}
	last := m.beat
	if t, ok := m.marks["run"]; ok && t.After(last) {
		last = t
	}
	if last.IsZero() || now.Sub(last) < silence {
		return false
	}
	m.failLocked(fmt.Sprintf("[e2e: its console's heartbeat (%q, every 30 s) stopped %v ago: the guest hangs]", heartbeatPrefix+"…", now.Sub(last).Round(time.Second)))
	m.faultLog = append([]string{"(its console's last lines)"}, m.recent...)
	return true
}

// failure is the console line that said the guest failed ("" if none) and
// whether the failure was in rdma_rxe (rxeFault).
func (m *machine) failure() (line string, rxe bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.faultLine == "" {
		return "", false
	}
	return strings.TrimSpace(m.faultLine), rxeFault(m.faultLog)
}

// faultText is the console from the kernel's failure on.
func (m *machine) faultText() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.faultLog, "\n") + "\n"
}

// launch builds the image and starts QEMU; wait collects the result.
func (b *Bed) launch(ctx context.Context, g *Guest, opt BootOptions) (*machine, error) {
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
	m := &machine{r: &Result{Kernel: g.Kernel, RC: -1, dir: dir}, ctx: ctx,
		share: filepath.Join(dir, "share"), marks: map[string]time.Time{}, done: make(chan struct{}), running: make(chan struct{}), fault: make(chan struct{})}
	if g.Link != nil {
		m.r.Name = g.Link.Name
		m.linked = true
	}
	for _, d := range []string{"out", "e2e"} {
		if err := os.MkdirAll(filepath.Join(m.share, d), 0o777); err != nil {
			return m, err
		}
	}
	for name, data := range opt.share {
		if err := os.WriteFile(filepath.Join(m.share, name), data, 0o644); err != nil {
			return m, err
		}
	}
	start := time.Now()
	initrd := opt.initramfs
	if initrd == "" {
		initrd = filepath.Join(dir, "initramfs.cpio")
		if err := b.buildInitramfs(ctx, g, initrd); err != nil {
			return m, err
		}
		m.r.Build = time.Since(start)
	}
	if st, err := os.Stat(initrd); err == nil {
		m.r.Image = st.Size()
	}

	qemu := findTool(hostQemu)
	if qemu == "" {
		return m, errors.New("e2e: qemu-system-x86_64 not found (EnsureTools not run?)")
	}
	cmdline := "console=ttyS0 panic=-1 quiet mitigations=off"
	if opt.KernelArgs != "" {
		cmdline += " " + opt.KernelArgs
	}
	args := []string{
		"-nographic", "-no-reboot",
		"-nodefaults", "-no-user-config", "-serial", "stdio",
		"-m", strconv.Itoa(opt.MemoryMB), "-smp", "1",
		"-kernel", g.Kernel.Vmlinuz(), "-initrd", initrd,
		"-append", cmdline,
		"-fsdev", "local,id=host,path=" + m.share + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=host,mount_tag=host",
	}
	if g.Link == nil {
		args = append(args, "-nic", "none")
	} else {
		backend, opts, _ := strings.Cut(g.Link.Backend, ",")
		args = append(args, "-netdev", backend+",id=n0,"+opts,
			"-device", "virtio-net-pci,id="+nicID+",netdev=n0,mac="+g.Link.MAC)
		// A unix socket's path must stay short: not under the cache.
		if d, err := os.MkdirTemp("", "e2e-qmp-"); err == nil {
			m.qmp = filepath.Join(d, "qmp")
			args = append(args, "-qmp", "unix:"+m.qmp+",server=on,wait=off")
		}
	}
	args = append(args, opt.QEMUArgs...)
	m.tctx, m.cancel = context.WithTimeout(ctx, opt.Timeout)
	m.cmd = exec.CommandContext(m.tctx, qemu, args...)
	m.cmd.WaitDelay = 5 * time.Second
	m.cmd.ExtraFiles = opt.Files
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		m.cancel()
		m.removeQMP()
		return m, err
	}
	m.cmd.Stderr = m.cmd.Stdout
	b.logf("e2e: booting %s", g.Kernel)
	m.started = time.Now()
	if err := m.cmd.Start(); err != nil {
		m.cancel()
		m.removeQMP()
		return m, err
	}
	go func() {
		defer close(m.done)
		var console strings.Builder
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := ansi.ReplaceAllString(strings.TrimRight(sc.Text(), "\r"), "")
			m.consoleLine(line)
			console.WriteString(line + "\n")
			if opt.Console != nil {
				fmt.Fprintln(opt.Console, line)
			}
		}
		m.werr = m.cmd.Wait()
		m.removeQMP()
		m.r.Total = time.Since(m.started)
		m.r.Console = console.String()
	}()
	return m, nil
}

// removeQMP removes the QMP socket's directory.
func (m *machine) removeQMP() {
	if m.qmp != "" {
		os.RemoveAll(filepath.Dir(m.qmp))
	}
}

// kill stops QEMU now; the result reports it as timed out, for the first
// reason given.
func (m *machine) kill(reason string) {
	m.killOnce.Do(func() { m.r.killed = reason })
	m.cancel()
}

// wait waits for QEMU to stop and collects what the guest brought back.
func (m *machine) wait() (*Result, error) {
	<-m.done
	defer m.cancel()
	r := m.r
	r.TimedOut = m.tctx.Err() != nil && m.ctx.Err() == nil
	if t, ok := m.marks["run"]; ok {
		r.Boot = t.Sub(m.started)
		if d, ok := m.marks["done"]; ok {
			r.Run = d.Sub(t)
		}
	}
	if log, err := os.ReadFile(filepath.Join(m.share, "e2e", "run.log")); err == nil {
		r.Log = string(log)
	}
	if rc, err := os.ReadFile(filepath.Join(m.share, "e2e", "rc")); err == nil && !r.TimedOut {
		if n, err := strconv.Atoi(strings.TrimSpace(string(rc))); err == nil {
			r.RC = n
		}
	}
	if m.ctx.Err() != nil {
		return r, m.ctx.Err()
	}
	if m.werr != nil && r.RC == -1 && !r.TimedOut {
		r.Console += fmt.Sprintf("[e2e: qemu: %v]\n", m.werr)
	}
	return r, nil
}

// Consoles shares one writer among the consoles of guests running at
// once: each line whole, after its guest's prefix.
type Consoles struct {
	mu sync.Mutex
	w  io.Writer
}

// NewConsoles returns Consoles writing to w.
func NewConsoles(w io.Writer) *Consoles { return &Consoles{w: w} }

// Prefixed is a BootOptions.Console whose lines start with prefix (Boot
// writes a console one line per Write).
func (c *Consoles) Prefixed(prefix string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, err := io.WriteString(c.w, prefix); err != nil {
			return 0, err
		}
		return c.w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

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
