package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/sweeptest"
	"github.com/grdma/grdma/verbsprobe"
)

// The sweep runs for real in the e2e guests (e2e/guest/pair_sweep_test.go)
// and with a fake pair tester in package sweep; here: its command line,
// its host lists and the report over record files.

// writeNodeFiles writes each node's records to its own file in dir, with
// a launcher's line in front of the first, and returns the paths.
func writeNodeFiles(t *testing.T, dir string, byNode [][]sweep.Record) []string {
	t.Helper()
	var paths []string
	for i, recs := range byNode {
		var b bytes.Buffer
		if i == 0 {
			b.WriteString("srun: job 42 queued and waiting for resources\n")
		}
		w := sweep.NewWriter(&b)
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, recs[0].Node+".jsonl")
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestSweepReport(t *testing.T) {
	dir := t.TempDir()
	healthy := writeNodeFiles(t, filepath.Join(dir), sweeptest.Records(sweeptest.Params(4), sweeptest.SlowNode(-1, 98, 2)))
	out, stderr, code := runProbe(t, append([]string{"sweep", "report"}, healthy...)...)
	if code != exitOK || !strings.Contains(out, "PASS: no verdict") || !strings.Contains(out, "(1 input lines were not records and were skipped)") {
		t.Errorf("healthy: exit %d\n%s%s", code, out, stderr)
	}
	bad := t.TempDir()
	files := writeNodeFiles(t, bad, sweeptest.Records(sweeptest.Params(6), sweeptest.SlowNode(4, 98, 2)))
	svg := filepath.Join(bad, "sweep.svg")
	out, stderr, code = runProbe(t, append([]string{"sweep", "report", "--svg", svg}, files...)...)
	if code != exitFailed || !strings.Contains(out, "node         node05: 5 of its 5 pairs are bad") || stderr != "" {
		t.Errorf("a bad node: exit %d, want 1\n%s%s", code, out, stderr)
	}
	b, err := os.ReadFile(svg)
	if err != nil || xml.Unmarshal(b, new(struct{})) != nil || !bytes.Contains(b, []byte(`class="verdict">node05</text>`)) {
		t.Errorf("--svg: %v\n%.300s", err, b)
	}
	// -j, the records from standard input too.
	var stdin bytes.Buffer
	for _, f := range files[1:] {
		b, _ := os.ReadFile(f)
		stdin.Write(b)
	}
	var o, e bytes.Buffer
	a := newApp(&stdin, &o, &e)
	code = a.main([]string{"-j", "sweep", "report", "spread", "0", files[0], "-"})
	var rep sweep.Report
	if code != exitFailed || json.Unmarshal(o.Bytes(), &rep) != nil || rep.OK || rep.Criteria.Spread != 0 || len(rep.Verdicts) != 1 {
		t.Errorf("-j from a file and standard input: exit %d %+v\n%s", code, rep.Verdicts, e.String())
	}
}

func TestSweepReportRefuses(t *testing.T) {
	dir := t.TempDir()
	four := writeNodeFiles(t, dir, sweeptest.Records(sweeptest.Params(4), sweeptest.SlowNode(-1, 98, 2)))
	other := t.TempDir()
	p := sweeptest.Params(4)
	p.Schedule = sweep.KindQuick
	quick := writeNodeFiles(t, other, sweeptest.Records(p, sweeptest.SlowNode(-1, 98, 2)))
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("{\"grdma_sweep\":1,\"start\":\n"), 0o644)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"sweep", "report"}, exitUsage, "needs the nodes' record files"},
		{[]string{"sweep", "report", "spread", "x", "f"}, exitUsage, "spread must be a number"},
		{[]string{"sweep", "report", filepath.Join(dir, "missing.jsonl")}, exitFailed, "missing.jsonl: no such file or directory"},
		{append([]string{"sweep", "report"}, four[0], quick[1]), exitFailed, "records of different sweeps"},
		{append([]string{"sweep", "report"}, four[0], four[0]), exitFailed, "two runs are mixed"},
		{[]string{"sweep", "report", garbage}, exitFailed, "garbage.jsonl:1: not a sweep record"},
		{[]string{"sweep", "run", "rxe0", "--svg", "x"}, exitUsage, "--svg is an option of sweep report"},
		{[]string{"sweep"}, exitUsage, "missing command: expected run, coordinate, report, help"},
		{[]string{"sweep", "walk"}, exitUsage, `unknown command "walk"`},
	} {
		_, stderr, code := runProbe(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.stderr)
		}
	}
	if out, _, code := runProbe(t, "sweep", "help"); code != exitOK || !strings.Contains(out, "sweep run DEV[/PORT] [hosts FILE|-]") {
		t.Errorf("sweep help: exit %d\n%s", code, out)
	}
}

// sweep run refuses bad host lists and ranks before it starts anything:
// nothing listens, no records file is made.
func TestSweepRunBadInput(t *testing.T) {
	dir := t.TempDir()
	n := 0
	hosts := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("hosts%d", n))
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	t.Setenv("SLURM_JOB_NODELIST", "")
	t.Setenv("SLURM_PROCID", "")
	out := filepath.Join(dir, "out.jsonl")
	// report writes a JSON report of a sweep of hosts, with a retest of
	// its first pair when retest is set.
	report := func(retest bool, names ...string) string {
		p := sweep.Params{Hosts: names, Schedule: sweep.KindAllPairs, Tests: []verbsprobe.Test{sweep.DefaultBW}}
		rep := sweep.Report{Sweep: p.ID(), Params: p}
		if retest {
			rep.Confirm = &sweep.Schedule{Kind: sweep.KindConfirm, N: len(names), Rounds: []sweep.Round{{{A: 0, B: 1}}}}
		}
		b, _ := json.Marshal(rep)
		return hosts(string(b))
	}
	for _, tc := range []struct {
		args   []string
		env    map[string]string
		stderr string
	}{
		{[]string{"rxe0"}, nil, "sweep run needs hosts FILE (- for standard input), or SLURM_JOB_NODELIST"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1\n10.0.0.2\n10.0.0.1\n")}, nil, "host 10.0.0.1 is listed twice (positions 0 and 2)"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1 node[1-\n")}, nil, "line 1: host list \"10.0.0.1 node[1-\": '[' without ']'"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1\n")}, nil, "a sweep needs at least two"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1 no-such-host.invalid")}, nil, "host no-such-host.invalid (rank 1) is unknown"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1 10.0.0.2"), "rank", "2"}, nil, "rank is 2, outside the host list (2 hosts: ranks 0 to 1)"},
		{[]string{"rxe0", "hosts", hosts("10.0.0.1 10.0.0.2")}, map[string]string{"SLURM_PROCID": "5"}, "SLURM_PROCID is 5, outside the host list"},
		// Loopback addresses never match this host.
		{[]string{"rxe0", "hosts", hosts("127.0.0.1 127.0.0.2")}, nil, "this host ("},
		{[]string{"rxe0"}, map[string]string{"SLURM_JOB_NODELIST": "n[1-"}, "SLURM_JOB_NODELIST: host list \"n[1-\": '[' without ']'"},
		{[]string{"rxe0", "hosts", filepath.Join(dir, "nope")}, nil, "hosts: " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{[]string{"rxe0", "confirm", filepath.Join(dir, "nope")}, nil, "confirm: " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{[]string{"rxe0", "confirm", hosts("10.0.0.1 10.0.0.2")}, nil, "not a JSON sweep report (grdma -j sweep report)"},
		{[]string{"rxe0", "confirm", report(false, "10.0.0.1", "10.0.0.2")}, nil, "report asks for no retest"},
		// The report's hosts are the run's: loopback never matches.
		{[]string{"rxe0", "confirm", report(true, "127.0.0.1", "127.0.0.2")}, nil, "this host ("},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		args := append([]string{"sweep", "run"}, append(tc.args, "out", out)...)
		_, stderr, code := runProbe(t, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: left %s behind", tc.args, out)
			os.Remove(out)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}
