package grammar_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
)

func TestParseSweepRun(t *testing.T) {
	bw := verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 65536, Duration: 500 * time.Millisecond}
	lat := verbsprobe.Test{Kind: verbsprobe.TestLatency, Op: verbsprobe.OpWrite, Size: 2, Iters: 1000}
	for _, tc := range []struct {
		words string
		check func(grammar.SweepRunRequest) string
		want  string
	}{
		{"mlx5_0/1 hosts /etc/fleet rank 3 port 19000 quick timeout 1m start 5m out r.jsonl gid-index 3", func(r grammar.SweepRunRequest) string {
			return fmt.Sprint(r.Options.Device, " ", r.Options.Port, " ", r.Options.GIDIndex, " ", r.HostsFile, " ", r.Rank, " ", r.Port, " ", r.Schedule, " ", r.Timeout, " ", r.Start, " ", r.Out)
		}, "mlx5_0 1 3 /etc/fleet 3 19000 quick 1m0s 5m0s r.jsonl"},
		{"rxe0 h - bw read lat send", func(r grammar.SweepRunRequest) string { return fmt.Sprint(r.HostsFile, r.Tests) }, "-[bw read lat send]"},
		{"rxe0 bw size 4096 duration 2s", func(r grammar.SweepRunRequest) string {
			return fmt.Sprint(len(r.Tests), r.Tests[0].Size, r.Tests[0].Duration, r.Tests[0].Iters)
		}, "1 4096 2s 0"},
		{"rxe0 lat size 64", func(r grammar.SweepRunRequest) string { return fmt.Sprint(len(r.Tests), r.Tests[0].Size) }, "1 64"},
		{"rxe0 bw iters 100", func(r grammar.SweepRunRequest) string { return fmt.Sprint(r.Tests[0].Iters, r.Tests[0].Duration) }, "100 0s"},
		{"rxe0 confirm sweep.json rank 2 out retest.jsonl", func(r grammar.SweepRunRequest) string {
			return fmt.Sprint(r.Confirm, " ", r.Rank, " ", r.Out, " ", len(r.Tests), " ", r.Schedule == "")
		}, "sweep.json 2 retest.jsonl 0 true"},
	} {
		r, err := grammar.ParseSweepRun(strings.Fields(tc.words))
		if err != nil {
			t.Errorf("%s: %v", tc.words, err)
			continue
		}
		if got := tc.check(r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.words, got, tc.want)
		}
	}
	r, _ := grammar.ParseSweepRun([]string{"rxe0"})
	if len(r.Tests) != 2 || r.Tests[0] != bw || r.Tests[1] != lat || r.Rank != -1 || r.Port != sweep.DefaultPort || r.Schedule != sweep.KindAllPairs {
		t.Errorf("defaults: %+v", r)
	}
	r, _ = grammar.ParseSweepRun(strings.Fields("rxe0 bw read lat send"))
	if r.Tests[0].Op != verbsprobe.OpRead || r.Tests[1].Op != verbsprobe.OpSend {
		t.Errorf("operations: %v", r.Tests)
	}
	r, _ = grammar.ParseSweepRun(strings.Fields("rxe0 duration 1s"))
	if r.Tests[0].Duration != time.Second || r.Tests[1].Duration != time.Second || r.Tests[1].Iters != 0 {
		t.Errorf("duration for both: %v", r.Tests)
	}
	r, _ = grammar.ParseSweepRun(strings.Fields("rxe0 lat iters 50"))
	if len(r.Tests) != 1 || r.Tests[0].Iters != 50 {
		t.Errorf("lat alone: %v", r.Tests)
	}
	for _, tc := range []struct{ words, want string }{
		{"", "needs a device"},
		{"rxe0/0", "invalid port"},
		{"rxe0 bogus", `unknown argument "bogus"`},
		{"rxe0 rank", "missing rank value"},
		{"rxe0 rank -1", "rank must be a number from 0"},
		{"rxe0 port 70000", "port must be a number from 1 to 65535"},
		{"rxe0 quick quick", "quick given twice"},
		{"rxe0 iters 5 duration 1s", "iters or duration, not both"},
		{"rxe0 duration 2h", "duration must be a duration"},
		{"rxe0 size 0", "size must be a number"},
		{"rxe0 hosts", "missing host list"},
		{"rxe0 confirm", "missing confirm REPORT"},
		{"rxe0 confirm r.json hosts /etc/fleet", "confirm REPORT runs the report's sweep again, its hosts and tests: drop hosts"},
		{"rxe0 bw confirm r.json", "drop bw"},
		{"rxe0 confirm r.json quick", "drop quick"},
		{"rxe0 confirm r.json duration 1s", "drop duration"},
	} {
		_, err := grammar.ParseSweepRun(strings.Fields(tc.words))
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.words, err, tc.want)
		}
	}
}

func TestParseSweepReport(t *testing.T) {
	r, err := grammar.ParseSweepReport(strings.Fields("bw-f 90% lat-factor 3x spread 0 bw-floor 80 port-fraction 0.8 lat-ceiling 10 a.jsonl - b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := sweep.Criteria{BWFraction: 0.9, LatFactor: 3, Spread: 0, BWFloorGbps: 80, BWPortFraction: 0.8, LatCeilingUsec: 10}
	if r.Criteria != want || strings.Join(r.Files, " ") != "a.jsonl - b.jsonl" {
		t.Errorf("%+v", r)
	}
	r, _ = grammar.ParseSweepReport([]string{"-"})
	if r.Criteria != sweep.DefaultCriteria || len(r.Files) != 1 {
		t.Errorf("defaults: %+v", r)
	}
	for _, tc := range []struct{ words, want string }{
		{"", "needs the nodes' record files"},
		{"spread 2", "needs the nodes' record files"},
		{"bw-fraction 0 f", "bw-fraction must be a number from 0 to 1"},
		{"bw-fraction 120% f", "bw-fraction must be"},
		{"lat-factor 0.5 f", "lat-factor must be a number from 1"},
		{"spread x f", "spread must be a number"},
		{"spread NaN f", "spread must be a number"},
		{"spread 1 spread 2 f", "spread given twice"},
		{"bw-floor", "missing bw-floor value"},
	} {
		_, err := grammar.ParseSweepReport(strings.Fields(tc.words))
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.words, err, tc.want)
		}
	}
}

func TestParseSweepCoordinate(t *testing.T) {
	r, err := grammar.ParseSweepCoordinate(strings.Fields("hosts /etc/fleet quick bw read size 4096 duration 1s timeout 30s parallel 16 confirm off out r.jsonl " +
		"scheme https http-config c.yml exporter-port 9100 responder-port 18600 bw-module my_bw lat-module my_lat spread 0 bw-floor 80"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(r.HostsFile, " ", r.Schedule, " ", r.Tests, " ", r.Tests[0].Size, " ", r.Tests[0].Duration, " ", r.Timeout, " ", r.Parallel, " ",
		r.Confirm, " ", r.Out, " ", r.Scheme, " ", r.HTTPConfig, " ", r.ExporterPort, " ", r.ResponderPort, " ", r.BWModule, " ", r.LatModule, " ",
		r.Criteria.Spread, " ", r.Criteria.BWFloorGbps, " ", r.Criteria.BWFraction)
	if want := "/etc/fleet quick [bw read] 4096 1s 30s 16 false r.jsonl https c.yml 9100 18600 my_bw my_lat 0 80 0.93"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r, err = grammar.ParseSweepCoordinate(nil)
	if err != nil || len(r.Tests) != 2 || r.Tests[0].Size != 65536 || r.Tests[0].Duration != sweep.DefaultBW.Duration || r.Tests[1].Iters != 1000 || r.Schedule != sweep.KindAllPairs || !r.Confirm ||
		r.Timeout != sweep.DefaultProbeTimeout || r.Scheme != "http" || r.Criteria != sweep.DefaultCriteria || r.HostsFile != "" {
		t.Errorf("defaults: %+v %v", r, err)
	}
	for _, tc := range []struct{ words, want string }{
		{"bogus", `unknown argument "bogus"`},
		{"rxe0", `unknown argument "rxe0"`},
		{"scheme ftp", "ftp"},
		{"confirm maybe", "confirm"},
		{"parallel 0", "parallel must be a number from 1"},
		{"duration 10s", "timeout 10s leaves no room for a 10s test"},
		{"spread x", "spread must be a number"},
		{"quick quick", "quick given twice"},
		{"iters 5 duration 1s", "iters or duration, not both"},
		{"exporter-port 0", "exporter-port must be a number from 1 to 65535"},
	} {
		_, err := grammar.ParseSweepCoordinate(strings.Fields(tc.words))
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.words, err, tc.want)
		}
	}
}
