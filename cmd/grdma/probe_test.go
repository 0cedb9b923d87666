package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/nldev"
)

// The probe runs for real in the e2e guest (e2e/guest/probe_test.go);
// here: its command line, its output for results made by hand, and its
// failures on the captured sysfs tree, which has no /dev.

const rxeTree = "../../sysfs/testdata/rxe-6.12"

func runProbe(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	a.dial = func() (*nldev.Client, error) {
		t.Error("probe dialled RDMA netlink")
		return nil, nil
	}
	code = a.main(args)
	return out.String(), errOut.String(), code
}

func TestProbeUsage(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"probe"}, "probe needs a device: DEV[/PORT]"},
		{[]string{"probe", "rxe0/0"}, `invalid port "0"`},
		{[]string{"probe", "rxe0", "gid-index"}, "missing gid-index value"},
		{[]string{"probe", "rxe0", "gid-index", "x"}, `gid-index must be a number from 0 to 255, not "x"`},
		{[]string{"probe", "rxe0", "gid-index", "256"}, "gid-index must be a number from 0 to 255"},
		{[]string{"probe", "rxe0", "count", "0"}, "count must be a number from 1 to 1000000"},
		{[]string{"probe", "rxe0", "traffic", "fast"}, `unknown argument "fast": expected gid-index, traffic, count`},
	} {
		_, stderr, code := runProbe(t, tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.stderr) || !strings.Contains(stderr, "Try 'grdma probe help'") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.stderr)
		}
	}
	if stdout, _, code := runProbe(t, "probe", "help"); code != exitOK || !strings.Contains(stdout, "probe DEV[/PORT] [gid-index N] [traffic] [count N]") {
		t.Errorf("probe help: exit %d\n%s", code, stdout)
	}
}

// durations matches a step's time with the padding before it.
var durations = regexp.MustCompile(` +\d+(\.\d+)?(µs|ms|s)\b`)

// A missing device fails at open, with the devices there are; the
// checklist goes to stdout, the failure to stderr, exit 1.
func TestProbeMissingDevice(t *testing.T) {
	stdout, stderr, code := runProbe(t, "--sysfs-root", rxeTree, "probe", "rxe9", "traffic")
	wantOut := `probe rxe9/1
  [FAIL] open D  RDMA device rxe9 not found
                          likely cause: the RDMA devices are: rxe0, rxe1
FAIL at open
`
	if got := durations.ReplaceAllString(stdout, " D"); code != exitFailed || got != wantOut {
		t.Errorf("exit %d, stdout\n%s\nwant\n%s", code, got, wantOut)
	}
	if want := "grdma: probe rxe9/1 failed at open: RDMA device rxe9 not found\n  likely cause: the RDMA devices are: rxe0, rxe1\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// The JSON of a failing run: the object the issue asks for, the errno and
// cause of the failed step, and with count the runs made and their times.
func TestProbeJSONFailure(t *testing.T) {
	stdout, stderr, code := runProbe(t, "--sysfs-root", rxeTree, "-j", "probe", "rxe0/1", "count", "3")
	if code != exitFailed || !strings.Contains(stderr, "failed at open") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got struct {
		Ifname   string `json:"ifname"`
		Port     int    `json:"port"`
		Driver   string `json:"driver"`
		GIDIndex *int   `json:"gid_index"`
		OK       *bool  `json:"ok"`
		Steps    []struct {
			Name  string   `json:"name"`
			OK    bool     `json:"ok"`
			Usec  *float64 `json:"usec"`
			Error *string  `json:"error"`
			Errno string   `json:"errno"`
			Cause string   `json:"cause"`
		} `json:"steps"`
		Count, Runs, Passed int
		Timing              struct {
			Total struct {
				Runs   int      `json:"runs"`
				Median *float64 `json:"median_usec"`
			} `json:"total"`
			Steps []struct {
				Name string `json:"name"`
			} `json:"steps"`
		} `json:"timing"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if got.Ifname != "rxe0" || got.Port != 1 || got.Driver != "rxe" || got.GIDIndex == nil || *got.GIDIndex != -1 ||
		got.OK == nil || *got.OK || len(got.Steps) != 1 {
		t.Fatalf("%s", stdout)
	}
	s := got.Steps[0]
	if s.Name != "open" || s.OK || s.Usec == nil || s.Error == nil || !strings.Contains(*s.Error, "/dev/infiniband/uverbs0") ||
		s.Errno != "ENOENT" || !strings.Contains(s.Cause, "does not exist") {
		t.Errorf("step %+v", s)
	}
	// The first run failed: the probe stopped there.
	if got.Count != 3 || got.Runs != 1 || got.Passed != 0 || got.Timing.Total.Runs != 1 || got.Timing.Total.Median == nil ||
		len(got.Timing.Steps) != 1 || got.Timing.Steps[0].Name != "open" {
		t.Errorf("count %d, runs %d, passed %d, timing %+v", got.Count, got.Runs, got.Passed, got.Timing)
	}
}

// TestSecondInterruptKills: the first SIGINT is caught (the probe tears
// down), the second kills. The probe used to catch SIGINT for its whole
// run, so a probe stuck in a kernel call could not be stopped with Ctrl-C.
// The test binary runs itself as a process that takes two SIGINTs.
func TestSecondInterruptKills(t *testing.T) {
	if os.Getenv("GRDMA_TEST_INTERRUPTS") == "1" {
		ctx, stop := interruptOnce()
		defer stop()
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		<-ctx.Done()
		fmt.Println("first caught")
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(20 * time.Second) // "stuck in a kernel call"
		fmt.Println("second caught too")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondInterruptKills$")
	cmd.Env = append(os.Environ(), "GRDMA_TEST_INTERRUPTS=1")
	out, err := cmd.Output()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !strings.Contains(string(out), "first caught") || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("output %q, %v; want the first SIGINT caught and the second to kill", out, err)
	}
}

// ping's words (exit 2) and its device failing at open (exit 1, the
// checklist on stdout), as serve's does.
func TestProbePingUsageAndMissingDevice(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"probe", "rxe0", "ping"}, "ping needs a peer: probe DEV peer HOST ping"},
		{[]string{"probe", "rxe0", "peer", "h", "ping", "size", "8"}, "a UD ping probe is from 40 to 4096 bytes"},
		{[]string{"probe", "rxe0", "peer", "h", "ping", "interval", "x"}, "interval must be a duration"},
	} {
		_, stderr, code := runProbe(t, tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.stderr)
		}
	}
	stdout, stderr, code := runProbe(t, "--sysfs-root", rxeTree, "probe", "rxe9", "peer", "h", "ping", "count", "1")
	if code != exitFailed || !strings.Contains(stdout, "[FAIL] open") || !strings.Contains(stderr, "RDMA device rxe9 not found") {
		t.Errorf("ping from a missing device: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
