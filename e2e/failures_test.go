//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// failures collects each failed test's name and the start of why, for the
// summary TestMain prints last: CI keeps only a run's head and tail, and
// the `--- FAIL` tree at the end names no reason (the reasons stream
// past, minutes earlier, among thousands of lines).
var failures struct {
	sync.Mutex
	list []failure
}

type failure struct{ name, why string }

// noteFailure records that t failed, and why, for the summary.
func noteFailure(t *testing.T, why string) {
	failures.Lock()
	defer failures.Unlock()
	failures.list = append(failures.list, failure{t.Name(), why})
}

// noteFailedRun records, when t ends failed, a run (one kernel's guest,
// pair or fleet) none of whose subtests said why.
func noteFailedRun(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		failures.Lock()
		defer failures.Unlock()
		for _, f := range failures.list {
			if f.name == t.Name() || strings.HasPrefix(f.name, t.Name()+"/") {
				return
			}
		}
		failures.list = append(failures.list, failure{t.Name(), "(its reason is in the log above, under === NAME " + t.Name() + ")"})
	})
}

// Limits of the summary: enough to say why, short enough to stay in a
// log's tail.
const (
	summaryLinesEach = 16
	summaryLineBytes = 240
	summaryMax       = 12
)

// writeFailures prints the summary; nothing when nothing failed.
func writeFailures(w io.Writer) {
	failures.Lock()
	defer failures.Unlock()
	if len(failures.list) == 0 {
		return
	}
	fmt.Fprintf(w, "\ne2e: %d failed (each with the start of its reason; the whole is in the log above):\n", len(failures.list))
	for i, f := range failures.list {
		if i == summaryMax {
			fmt.Fprintf(w, "… and %d more\n", len(failures.list)-summaryMax)
			break
		}
		fmt.Fprintf(w, "--- %s\n", f.name)
		lines := strings.Split(strings.TrimSpace(f.why), "\n")
		for j, l := range lines {
			if j == summaryLinesEach {
				fmt.Fprintf(w, "    … %d more lines\n", len(lines)-summaryLinesEach)
				break
			}
			if len(l) > summaryLineBytes {
				l = l[:summaryLineBytes] + "…"
			}
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// TestFailureSummary: the summary names each failed test with the start
// of its reason, cut to stay in a log's tail, and a run none of whose
// subtests said why once.
func TestFailureSummary(t *testing.T) {
	saved := failures.list
	failures.list = nil
	defer func() { failures.list = saved }()

	var b strings.Builder
	writeFailures(&b)
	if b.Len() != 0 {
		t.Fatalf("nothing failed, yet the summary says:\n%s", b.String())
	}
	long := strings.Repeat("x", 1000)
	many := strings.TrimSuffix(strings.Repeat("line\n", 40), "\n")
	failures.list = []failure{
		{"TestGuest/6.1/Stat/ExportReplacesDurably", "stat_test.go:88: mode 0644, want 0600\n" + long},
		{"TestFleet/6.1/ProbeCM", many},
	}
	writeFailures(&b)
	got := b.String()
	for _, want := range []string{
		"e2e: 2 failed",
		"--- TestGuest/6.1/Stat/ExportReplacesDurably\n    stat_test.go:88: mode 0644, want 0600\n",
		"--- TestFleet/6.1/ProbeCM\n",
		"… 24 more lines",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, long) {
		t.Errorf("a 1000-byte line is not cut:\n%s", got)
	}
}
