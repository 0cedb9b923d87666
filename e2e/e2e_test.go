//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Knobs, all optional:
//
//	E2E_KERNELS=6.1          boot only these (comma list; default all)
//	E2E_RUN=LinkAddDelete    -test.run pattern for the guest tests
//	E2E_GRDMA=/path          install this grdma instead of bin/grdma
//	E2E_GUEST_GRDMA=/path    GRDMA inside the guest, e.g.
//	                         /usr/libexec/e2e/grdma-wrong-key
//	E2E_CHURN=60s            how long TestChurn churns devices
//	E2E_TIMEOUT=6m           per guest
//	E2E_VERBOSE=1            guest consoles to stderr

// TestGuest boots every kernel (in parallel), runs the e2e/guest tests in
// each and reports every guest test as TestGuest/KERNEL/NAME.
func TestGuest(t *testing.T) {
	t.Parallel() // alongside TestHungGuestIsKilled
	ctx := context.Background()
	bed, err := NewBed(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := bed.EnsureTools(ctx); err != nil {
		t.Fatal(err)
	}
	labels := Labels
	if k := os.Getenv("E2E_KERNELS"); k != "" {
		labels = strings.Split(k, ",")
	}
	timeout := 6 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("E2E_TIMEOUT")); err == nil {
		timeout = d
	}

	// Kernels download while grdma and the guest tests compile.
	type boot struct {
		k   *Kernel
		r   *Result
		err error
		dl  time.Duration
	}
	boots := make([]boot, len(labels))
	kernelsReady := make([]chan struct{}, len(labels))
	for i, label := range labels {
		kernelsReady[i] = make(chan struct{})
		go func() {
			defer close(kernelsReady[i])
			t0 := time.Now()
			boots[i].k, boots[i].err = bed.Kernel(ctx, label)
			boots[i].dl = time.Since(t0)
		}()
	}
	grdma := os.Getenv("E2E_GRDMA")
	if grdma == "" {
		if grdma, err = bed.BuildGrdma(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testBin := filepath.Join(t.TempDir(), "guest.test")
	if err := bed.BuildGuestTests(ctx, testBin); err != nil {
		t.Fatal(err)
	}
	t.Logf("tools and builds ready in %v", time.Since(start).Round(100*time.Millisecond))

	var wg sync.WaitGroup
	for i := range labels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-kernelsReady[i]
			if boots[i].err != nil {
				return
			}
			opt := BootOptions{}
			if os.Getenv("E2E_VERBOSE") != "" {
				opt.Console = os.Stderr
			}
			boots[i].r, boots[i].err = bed.RunGuestTests(ctx, &GuestTestRun{
				Kernel: boots[i].k, Grdma: grdma, TestBinary: testBin,
				Run: os.Getenv("E2E_RUN"), GuestGrdma: os.Getenv("E2E_GUEST_GRDMA"), Env: guestEnv(),
				Timeout: timeout, Verbose: os.Getenv("E2E_VERBOSE") != "",
			}, opt)
		}()
	}
	wg.Wait()

	for i, label := range labels {
		t.Run(label, func(t *testing.T) {
			b := boots[i]
			if b.r != nil {
				defer b.r.Cleanup()
			}
			if b.err != nil {
				t.Fatalf("%v", b.err)
			}
			r := b.r
			t.Logf("%s: kernel fetch %v, initramfs %v, boot %v, tests %v, qemu total %v",
				b.k, b.dl.Round(100*time.Millisecond), r.Build.Round(time.Millisecond),
				r.Boot.Round(100*time.Millisecond), r.Run.Round(100*time.Millisecond), r.Total.Round(100*time.Millisecond))
			nodes, err := ParseGuestTests(ctx, r.Log)
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) == 0 {
				t.Fatalf("no guest test ran: %v\nguest output:\n%s", r.Err(), tail(r.Log, 40))
			}
			t.Logf("guest tests: %s", Summary(nodes))
			for _, n := range nodes {
				report(t, n, r)
			}
			if err := r.Err(); err != nil && !t.Failed() {
				t.Errorf("%v\nguest output:\n%s", err, tail(r.Log, 40))
			}
		})
	}
}

// guestEnv passes the knobs the guest tests read on to them.
func guestEnv() []string {
	var env []string
	if v := os.Getenv("E2E_CHURN"); v != "" {
		env = append(env, "E2E_CHURN="+v)
	}
	return env
}

// report replays one guest test as a host subtest with the same outcome.
func report(t *testing.T, n *TestNode, r *Result) {
	t.Run(n.Short, func(t *testing.T) {
		for _, c := range n.Children {
			report(t, c, r)
		}
		out := strings.Join(n.Output, "\n")
		if !strings.Contains(n.Name, "/") && n.Action != "" {
			t.Logf("%s in the guest after %.2fs", n.Action, n.Elapsed)
		}
		switch n.Action {
		case "pass":
		case "skip":
			t.Skip(out)
		case "fail":
			if out != "" || len(n.Children) == 0 {
				t.Error(out)
			}
		default:
			t.Errorf("no result: the guest stopped during this test (%v)\n%s", r.Err(), out)
		}
	})
}

// TestHungGuestIsKilled proves the time bound: a guest that never finishes
// is killed and reported with its console's tail.
func TestHungGuestIsKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bed, err := NewBed(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.EnsureTools(ctx); err != nil {
		t.Fatal(err)
	}
	label := Labels[0]
	if ks := os.Getenv("E2E_KERNELS"); ks != "" {
		label, _, _ = strings.Cut(ks, ",")
	}
	k, err := bed.Kernel(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	r, err := bed.Boot(ctx, &Guest{Kernel: k, Run: "echo about to hang >/dev/console\nsleep 3600\n"},
		BootOptions{Timeout: 45 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Cleanup()
	e := r.Err()
	// How far the guest got depends on the machine's load; the report must
	// end with whatever the console printed last.
	lines := strings.Split(strings.TrimSpace(r.Console), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if !r.TimedOut || e == nil || !strings.Contains(e.Error(), "timed out") || last == "" || !strings.Contains(e.Error(), last) {
		t.Fatalf("want a timeout naming the console's last line %q, got TimedOut=%v err=%v", last, r.TimedOut, e)
	}
	t.Logf("killed after %v as expected", r.Total.Round(100*time.Millisecond))
}
