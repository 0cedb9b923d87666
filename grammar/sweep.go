package grammar

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
)

// Sweep is the grammar of grdma sweep: run (ParseSweepRun) and report
// (ParseSweepReport).
var Sweep = &Syntax{Verbs: []Verb{
	{"run", SweepRun},
	{"coordinate", SweepCoordinate},
	{"report", SweepReport},
	helpVerb,
}}

// SweepRun is the grammar of sweep run, after the verb.
var SweepRun = &Syntax{Pos: []Positional{{Value: devPort}}, Keywords: []Keyword{
	{"hosts", []Value{free}},
	{"rank", []Value{free}},
	{"port", []Value{free}},
	{"quick", nil},
	{"bw", []Value{sweepOps}},
	{"lat", []Value{sweepOps}},
	{"size", []Value{free}},
	{"iters", []Value{free}},
	{"duration", []Value{free}},
	{"timeout", []Value{free}},
	{"start", []Value{free}},
	{"out", []Value{free}},
	{"gid-index", []Value{free}},
	{"confirm", []Value{free}},
}}

// sweepCriteria are the keywords of the report's limits.
var sweepCriteria = []Keyword{
	{"bw-fraction", []Value{free}},
	{"lat-factor", []Value{free}},
	{"spread", []Value{free}},
	{"bw-floor", []Value{free}},
	{"port-fraction", []Value{free}},
	{"lat-ceiling", []Value{free}},
}

// SweepReport is the grammar of sweep report's keywords, before its
// files.
var SweepReport = &Syntax{Keywords: sweepCriteria}

// SweepCoordinate is the grammar of sweep coordinate.
var SweepCoordinate = &Syntax{Keywords: append([]Keyword{
	{"hosts", []Value{free}},
	{"quick", nil},
	{"bw", []Value{sweepOps}},
	{"lat", []Value{sweepOps}},
	{"size", []Value{free}},
	{"iters", []Value{free}},
	{"duration", []Value{free}},
	{"timeout", []Value{free}},
	{"parallel", []Value{free}},
	{"confirm", []Value{onOff}},
	{"out", []Value{free}},
	{"scheme", []Value{words("http", "https")}},
	{"http-config", []Value{free}},
	{"exporter-port", []Value{free}},
	{"responder-port", []Value{free}},
	{"bw-module", []Value{free}},
	{"lat-module", []Value{free}},
}, sweepCriteria...)}

// sweepOps are the operations a sweep's bw and lat tests take.
var sweepOps = words(string(verbsprobe.OpWrite), string(verbsprobe.OpSend), string(verbsprobe.OpRead))

// SweepRunRequest is `grdma sweep run` as its words say it.
type SweepRunRequest struct {
	// Options say the device, port and GID index (Sysfs is the caller's).
	Options verbsprobe.Options
	// HostsFile is the host list's file, "-" standard input, "" none
	// given (SLURM_JOB_NODELIST then).
	HostsFile string
	Rank      int // -1: from the launcher or the host list (sweep.Rank)
	Port      int // the sweep's TCP port (sweep.DefaultPort)
	Schedule  string
	Tests     []verbsprobe.Test // with their defaults filled in
	Timeout   time.Duration
	Start     time.Duration
	Out       string // the records' file; "" standard output
	// Confirm is the JSON report (grdma -j sweep report) whose retest to
	// run (sweep.ReadConfirm): the hosts and tests are the report's, and
	// HostsFile, Schedule and Tests are unset.
	Confirm string
}

// ParseSweepRun reads the words after `grdma sweep run`:
//
//	DEV[/PORT] [hosts FILE|-] [rank N] [port N] [quick] [bw [write|send|read]] [lat [write|send|read]]
//	           [size BYTES] [iters N] [duration D] [timeout D] [start D] [out FILE] [gid-index N]
//	DEV[/PORT] confirm REPORT [rank N] [port N] [timeout D] [start D] [out FILE] [gid-index N]
//
// Without bw or lat both run (sweep.DefaultBW, DefaultLat); size is bw's
// message size (lat's when lat runs alone), iters lat's exchanges (bw's
// messages when bw runs alone), duration runs every test for that long
// instead. confirm REPORT runs the retest a JSON report asks for, with
// the report's hosts and tests. Wrong words are a *cmdline.UsageError.
func ParseSweepRun(words []string) (SweepRunRequest, error) {
	args := cmdline.NewArgs(words, "")
	if args.Empty() {
		return SweepRunRequest{}, cmdline.Usagef("", "sweep run needs a device: DEV[/PORT]")
	}
	target, err := args.DevPort(args.Next())
	if err != nil {
		return SweepRunRequest{}, err
	}
	req := SweepRunRequest{Options: verbsprobe.Options{Device: target.Device, Port: target.Port, GIDIndex: verbsprobe.AutoGID},
		Rank: -1, Port: sweep.DefaultPort, Schedule: sweep.KindAllPairs, Timeout: sweep.DefaultTimeout}
	var tw testWords
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword("argument", "", SweepRun.KeywordNames()...)
		if err != nil {
			return SweepRunRequest{}, err
		}
		if seen[kw] {
			return SweepRunRequest{}, cmdline.Usagef("", "%s given twice", kw)
		}
		seen[kw] = true
		if ok, err := tw.take(kw, args); ok || err != nil {
			if err != nil {
				return SweepRunRequest{}, err
			}
			continue
		}
		switch kw {
		case "hosts":
			req.HostsFile, err = args.Value("host list FILE (- for standard input)")
		case "rank":
			req.Rank, err = args.Number("rank", 0, sweep.MaxHosts-1)
		case "port":
			req.Port, err = args.Number("port", 1, 65535)
		case "quick":
			req.Schedule = sweep.KindQuick
		case "timeout":
			req.Timeout, err = args.Duration("timeout", time.Hour)
		case "start":
			req.Start, err = args.Duration("start", 24*time.Hour)
		case "out":
			req.Out, err = args.Value("out FILE")
		case "gid-index":
			req.Options.GIDIndex, err = args.Number("gid-index", 0, math.MaxUint8)
		case "confirm":
			req.Confirm, err = args.Value("confirm REPORT (grdma -j sweep report's output)")
		}
		if err != nil {
			return SweepRunRequest{}, err
		}
	}
	if req.Confirm != "" {
		// The retest runs the report's sweep: words that would say
		// another are mistakes, not overrides.
		for _, kw := range []string{"hosts", "quick", "bw", "lat", "size", "iters", "duration"} {
			if seen[kw] {
				return SweepRunRequest{}, cmdline.Usagef("", "confirm REPORT runs the report's sweep again, its hosts and tests: drop %s", kw)
			}
		}
		req.Schedule = ""
		return req, nil
	}
	if req.Tests, err = tw.tests(); err != nil {
		return SweepRunRequest{}, err
	}
	return req, nil
}

// testWords gathers the words that say a sweep's tests: bw [OP], lat
// [OP], size, iters, duration.
type testWords struct {
	bw, lat  *verbsprobe.Test
	size     int
	iters    int
	duration time.Duration
}

// take reads kw's value when kw is one of the test words.
func (w *testWords) take(kw string, args *cmdline.Args) (bool, error) {
	var err error
	switch kw {
	case "bw", "lat":
		t := sweep.DefaultBW
		if kw == "lat" {
			t = sweep.DefaultLat
		}
		if !args.Empty() && slices.Contains(sweepOps.Words, args.Words[0]) {
			t.Op = verbsprobe.Operation(args.Next())
		}
		if kw == "bw" {
			w.bw = &t
		} else {
			w.lat = &t
		}
	case "size":
		w.size, err = args.Number("size", 1, verbsprobe.MaxTestSize)
	case "iters":
		w.iters, err = args.Number("iters", 1, verbsprobe.MaxTestIters)
	case "duration":
		w.duration, err = args.Duration("duration", verbsprobe.MaxTestDuration)
	default:
		return false, nil
	}
	return true, err
}

// tests are the tests the words say. Without bw or lat both run
// (sweep.DefaultBW, DefaultLat); size is bw's message size (lat's when
// lat runs alone), iters lat's exchanges (bw's messages when bw runs
// alone), duration runs every test for that long instead.
func (w *testWords) tests() ([]verbsprobe.Test, error) {
	bw, lat := w.bw, w.lat
	if bw == nil && lat == nil {
		b, l := sweep.DefaultBW, sweep.DefaultLat
		bw, lat = &b, &l
	}
	if w.iters != 0 && w.duration != 0 {
		return nil, cmdline.Usagef("", "iters or duration, not both")
	}
	sized, counted := bw, lat
	if sized == nil {
		sized = lat
	}
	if counted == nil {
		counted = bw
	}
	if w.size != 0 {
		sized.Size = w.size
	}
	if w.iters != 0 {
		counted.Iters, counted.Duration = w.iters, 0
	}
	var out []verbsprobe.Test
	for _, t := range []*verbsprobe.Test{bw, lat} {
		if t == nil {
			continue
		}
		if w.duration != 0 {
			t.Duration, t.Iters = w.duration, 0
		}
		out = append(out, t.WithDefaults())
	}
	for i, t := range out {
		if t.Duration != 0 {
			t.Iters = 0 // a duration replaces the count
			out[i] = t
		}
		if err := t.Validate(); err != nil {
			return nil, cmdline.Usagef("", "%v", err)
		}
	}
	return out, nil
}

// SweepReportRequest is `grdma sweep report` as its words say it.
type SweepReportRequest struct {
	Criteria sweep.Criteria
	Files    []string // "-" is standard input
}

// ParseSweepReport reads the words after `grdma sweep report`: keywords
// first, then the files of the nodes' records (a file named like a
// keyword is written ./NAME):
//
//	[bw-fraction F] [lat-factor F] [spread F] [bw-floor GBPS] [port-fraction F] [lat-ceiling USEC] FILE...
//
// Fractions may be written 0.93 or 93%, factors 2.1 or 2.1x.
func ParseSweepReport(words []string) (SweepReportRequest, error) {
	req := SweepReportRequest{Criteria: sweep.DefaultCriteria}
	args := cmdline.NewArgs(words, "")
	seen := map[string]bool{}
	for !args.Empty() {
		kw, ok := cmdline.Abbrev(args.Words[0], SweepReport.KeywordNames())
		if !ok || args.Words[0] == "-" {
			break
		}
		args.Next()
		if seen[kw] {
			return SweepReportRequest{}, cmdline.Usagef("", "%s given twice", kw)
		}
		seen[kw] = true
		if err := criterion(kw, args, &req.Criteria); err != nil {
			return SweepReportRequest{}, err
		}
	}
	req.Files = args.Words
	if len(req.Files) == 0 {
		return SweepReportRequest{}, cmdline.Usagef("", "sweep report needs the nodes' record files (- for standard input)")
	}
	return req, nil
}

// criterion reads the value of kw, one of the report's limits, into c.
func criterion(kw string, args *cmdline.Args, c *sweep.Criteria) error {
	v, err := args.Value(kw + " value")
	if err != nil {
		return err
	}
	var dst *float64
	var lo, hi float64
	unit := ""
	switch kw {
	case "bw-fraction":
		dst, lo, hi, unit = &c.BWFraction, 0, 1, "%"
	case "lat-factor":
		dst, lo, hi, unit = &c.LatFactor, 1, 1000, "x"
	case "spread":
		dst, lo, hi = &c.Spread, 0, 10
	case "bw-floor":
		dst, hi = &c.BWFloorGbps, 1e6
	case "port-fraction":
		dst, lo, hi, unit = &c.BWPortFraction, 0, 1, "%"
	case "lat-ceiling":
		dst, hi = &c.LatCeilingUsec, 1e9
	default:
		return cmdline.Usagef("", "%s is not one of the report's limits", kw)
	}
	f, ok := parseNumber(v, unit)
	if !ok || f < lo || f > hi || (kw == "bw-fraction" && f == 0) {
		return cmdline.Usagef("", "%s must be a number from %g to %g%s, not %q", kw, lo, hi, unitHint(unit), v)
	}
	*dst = f
	return nil
}

// isCriterion reports whether kw is one of the report's limits.
func isCriterion(kw string) bool {
	return slices.ContainsFunc(sweepCriteria, func(k Keyword) bool { return k.Name == kw })
}

// SweepCoordinateRequest is `grdma sweep coordinate` as its words say it.
type SweepCoordinateRequest struct {
	// HostsFile is the host list's file, "-" standard input, "" none
	// given (SLURM_JOB_NODELIST then). A host's :PORT is its exporter's.
	HostsFile string
	Schedule  string
	Tests     []verbsprobe.Test // with their defaults filled in
	// Timeout is each test's time (sweep.DefaultProbeTimeout).
	Timeout  time.Duration
	Parallel int  // pairs at once, 0 every pair of a round
	Confirm  bool // retest flagged pairs (on)
	Out      string
	// Scheme is http or https; HTTPConfig the file of the client's
	// credentials (Prometheus' http_config: basic_auth, tls_config, ...).
	Scheme, HTTPConfig string
	ExporterPort       int // of hosts that name none (httpprobe.DefaultExporterPort)
	ResponderPort      int // the responders' (0: their default, 18515)
	BWModule           string
	LatModule          string
	Criteria           sweep.Criteria
}

// ParseSweepCoordinate reads the words after `grdma sweep coordinate`:
//
//	[hosts FILE|-] [quick] [bw [OP]] [lat [OP]] [size BYTES] [iters N] [duration D] [timeout D]
//	[parallel N] [confirm on|off] [out FILE] [scheme http|https] [http-config FILE]
//	[exporter-port N] [responder-port N] [bw-module NAME] [lat-module NAME] [LIMITS...]
//
// The tests' words are sweep run's; LIMITS are sweep report's (the
// coordinator judges the first pass to choose its retests). Wrong words
// are a *cmdline.UsageError.
func ParseSweepCoordinate(words []string) (SweepCoordinateRequest, error) {
	args := cmdline.NewArgs(words, "")
	req := SweepCoordinateRequest{Schedule: sweep.KindAllPairs, Timeout: sweep.DefaultProbeTimeout, Confirm: true,
		Scheme: "http", Criteria: sweep.DefaultCriteria}
	var tw testWords
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword("argument", "", SweepCoordinate.KeywordNames()...)
		if err != nil {
			return req, err
		}
		if seen[kw] {
			return req, cmdline.Usagef("", "%s given twice", kw)
		}
		seen[kw] = true
		if ok, err := tw.take(kw, args); ok || err != nil {
			if err != nil {
				return req, err
			}
			continue
		}
		if isCriterion(kw) {
			if err := criterion(kw, args, &req.Criteria); err != nil {
				return req, err
			}
			continue
		}
		switch kw {
		case "hosts":
			req.HostsFile, err = args.Value("host list FILE (- for standard input)")
		case "quick":
			req.Schedule = sweep.KindQuick
		case "timeout":
			req.Timeout, err = args.Duration("timeout", 5*time.Minute)
		case "parallel":
			req.Parallel, err = args.Number("parallel", 1, sweep.MaxHosts)
		case "confirm":
			req.Confirm, err = args.OnOff("confirm")
		case "out":
			req.Out, err = args.Value("out FILE")
		case "scheme":
			req.Scheme, err = args.Keyword("scheme", "", "http", "https")
		case "http-config":
			req.HTTPConfig, err = args.Value("http-config FILE")
		case "exporter-port":
			req.ExporterPort, err = args.Number("exporter-port", 1, 65535)
		case "responder-port":
			req.ResponderPort, err = args.Number("responder-port", 1, 65535)
		case "bw-module":
			req.BWModule, err = args.Value("bw-module NAME")
		case "lat-module":
			req.LatModule, err = args.Value("lat-module NAME")
		}
		if err != nil {
			return req, err
		}
	}
	var err error
	if req.Tests, err = tw.tests(); err != nil {
		return req, err
	}
	for _, t := range req.Tests {
		if t.Duration > 0 && t.Duration+time.Second > req.Timeout {
			return req, cmdline.Usagef("", "timeout %v leaves no room for a %v test: the exporter needs its duration and a second", req.Timeout, t.Duration)
		}
	}
	return req, nil
}

// parseNumber reads a number, "93%" (0.93) where unit is "%", "2.1x"
// where it is "x".
func parseNumber(s, unit string) (float64, bool) {
	scale := 1.0
	switch {
	case unit == "%" && strings.HasSuffix(s, "%"):
		s, scale = strings.TrimSuffix(s, "%"), 0.01
	case unit == "x" && strings.HasSuffix(s, "x"):
		s = strings.TrimSuffix(s, "x")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f * scale, true
}

func unitHint(unit string) string {
	switch unit {
	case "%":
		return " (or a percentage, 93%)"
	case "x":
		return " (or 2.1x)"
	}
	return ""
}
