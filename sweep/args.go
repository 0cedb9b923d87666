package sweep

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/verbsprobe"
)

// Verbs of `grdma sweep`, in the order that decides abbreviations.
var Verbs = []string{"run", "report", "help"}

// RunKeywords are the words of `grdma sweep run` after DEV[/PORT], in
// the order that decides abbreviations.
var RunKeywords = []string{"hosts", "rank", "port", "quick", "bw", "lat", "size", "iters", "duration", "timeout", "start", "out", "gid-index"}

// ReportKeywords are the words of `grdma sweep report` before its files.
var ReportKeywords = []string{"bw-fraction", "lat-factor", "spread", "bw-floor", "port-fraction", "lat-ceiling"}

// Operations a sweep's bw and lat tests take.
var Operations = []string{string(verbsprobe.OpWrite), string(verbsprobe.OpSend), string(verbsprobe.OpRead)}

// RunRequest is `grdma sweep run` as its words say it.
type RunRequest struct {
	// Options say the device, port and GID index (Sysfs is the caller's).
	Options verbsprobe.Options
	// HostsFile is the host list's file, "-" standard input, "" none
	// given (SLURM_JOB_NODELIST then).
	HostsFile string
	Rank      int // -1: from the launcher or the host list (Rank)
	Port      int // the sweep's TCP port (DefaultPort)
	Schedule  string
	Tests     []verbsprobe.Test // with their defaults filled in
	Timeout   time.Duration
	Start     time.Duration
	Out       string // the records' file; "" standard output
}

// ParseRunArgs reads the words after `grdma sweep run`:
//
//	DEV[/PORT] [hosts FILE|-] [rank N] [port N] [quick] [bw [write|send|read]] [lat [write|send|read]]
//	           [size BYTES] [iters N] [duration D] [timeout D] [start D] [out FILE] [gid-index N]
//
// Without bw or lat both run (DefaultBW, DefaultLat); size is bw's
// message size (lat's when lat runs alone), iters lat's exchanges (bw's
// messages when bw runs alone), duration runs every test for that long
// instead. Wrong words are a *cmdline.UsageError.
func ParseRunArgs(words []string) (RunRequest, error) {
	const help = "grdma sweep help"
	args := cmdline.NewArgs(words, help)
	if args.Empty() {
		return RunRequest{}, cmdline.Usagef(help, "sweep run needs a device: DEV[/PORT]")
	}
	target, err := args.DevPort(args.Next())
	if err != nil {
		return RunRequest{}, err
	}
	req := RunRequest{Options: verbsprobe.Options{Device: target.Dev, Port: target.Port, GIDIndex: verbsprobe.AutoGID},
		Rank: -1, Port: DefaultPort, Schedule: KindAllPairs, Timeout: DefaultTimeout}
	var bw, lat *verbsprobe.Test
	var size, iters int
	var duration time.Duration
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword("argument", "", RunKeywords...)
		if err != nil {
			return RunRequest{}, err
		}
		if seen[kw] {
			return RunRequest{}, cmdline.Usagef(help, "%s given twice", kw)
		}
		seen[kw] = true
		switch kw {
		case "hosts":
			req.HostsFile, err = args.Value("host list FILE (- for standard input)")
		case "rank":
			req.Rank, err = args.Number("rank", 0, MaxHosts-1)
		case "port":
			req.Port, err = args.Number("port", 1, 65535)
		case "quick":
			req.Schedule = KindQuick
		case "bw", "lat":
			t := DefaultBW
			if kw == "lat" {
				t = DefaultLat
			}
			if !args.Empty() {
				if op, ok := cmdline.Abbrev(args.Words[0], Operations); ok && op == args.Words[0] {
					t.Op = verbsprobe.Operation(op)
					args.Next()
				}
			}
			if kw == "bw" {
				bw = &t
			} else {
				lat = &t
			}
		case "size":
			size, err = args.Number("size", 1, verbsprobe.MaxTestSize)
		case "iters":
			iters, err = args.Number("iters", 1, verbsprobe.MaxTestIters)
		case "duration":
			duration, err = args.Duration("duration", verbsprobe.MaxTestDuration)
		case "timeout":
			req.Timeout, err = args.Duration("timeout", time.Hour)
		case "start":
			req.Start, err = args.Duration("start", 24*time.Hour)
		case "out":
			req.Out, err = args.Value("out FILE")
		case "gid-index":
			req.Options.GIDIndex, err = args.Number("gid-index", 0, math.MaxUint8)
		}
		if err != nil {
			return RunRequest{}, err
		}
	}
	if bw == nil && lat == nil {
		b, l := DefaultBW, DefaultLat
		bw, lat = &b, &l
	}
	if iters != 0 && duration != 0 {
		return RunRequest{}, cmdline.Usagef(help, "iters or duration, not both")
	}
	// size is bw's, iters lat's, unless that test is not run.
	sized, counted := bw, lat
	if sized == nil {
		sized = lat
	}
	if counted == nil {
		counted = bw
	}
	if size != 0 {
		sized.Size = size
	}
	if iters != 0 {
		counted.Iters, counted.Duration = iters, 0
	}
	for _, t := range []*verbsprobe.Test{bw, lat} {
		if t == nil {
			continue
		}
		if duration != 0 {
			t.Duration, t.Iters = duration, 0
		}
		req.Tests = append(req.Tests, t.WithDefaults())
	}
	for i, t := range req.Tests {
		if t.Duration != 0 {
			t.Iters = 0 // a duration replaces the count
			req.Tests[i] = t
		}
		if err := t.Validate(); err != nil {
			return RunRequest{}, cmdline.Usagef(help, "%v", err)
		}
	}
	return req, nil
}

// ReportRequest is `grdma sweep report` as its words say it.
type ReportRequest struct {
	Criteria Criteria
	Files    []string // "-" is standard input
}

// ParseReportArgs reads the words after `grdma sweep report`: keywords
// first, then the files of the nodes' records (a file named like a
// keyword is written ./NAME):
//
//	[bw-fraction F] [lat-factor F] [spread F] [bw-floor GBPS] [port-fraction F] [lat-ceiling USEC] FILE...
//
// Fractions may be written 0.93 or 93%, factors 2.1 or 2.1x.
func ParseReportArgs(words []string) (ReportRequest, error) {
	const help = "grdma sweep help"
	req := ReportRequest{Criteria: DefaultCriteria}
	args := cmdline.NewArgs(words, help)
	seen := map[string]bool{}
	for !args.Empty() {
		kw, ok := cmdline.Abbrev(args.Words[0], ReportKeywords)
		if !ok || args.Words[0] == "-" {
			break
		}
		args.Next()
		if seen[kw] {
			return ReportRequest{}, cmdline.Usagef(help, "%s given twice", kw)
		}
		seen[kw] = true
		v, err := args.Value(kw + " value")
		if err != nil {
			return ReportRequest{}, err
		}
		c := &req.Criteria
		var dst *float64
		lo, hi, unit := 0.0, math.Inf(1), ""
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
		}
		f, ok := parseNumber(v, unit)
		if !ok || f < lo || f > hi || (kw == "bw-fraction" && f == 0) {
			return ReportRequest{}, cmdline.Usagef(help, "%s must be a number from %g to %g%s, not %q", kw, lo, hi, unitHint(unit), v)
		}
		*dst = f
	}
	req.Files = args.Words
	if len(req.Files) == 0 {
		return ReportRequest{}, cmdline.Usagef(help, "sweep report needs the nodes' record files (- for standard input)")
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
