package verbsprobe

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
)

// Request is a probe as `grdma probe` words say it (ParseArgs): this host
// alone Count times, or between two hosts, listening or connecting to a
// peer, running Test.
type Request struct {
	// Options say the device, port and GID index (Sysfs is the caller's
	// to set); Traffic is set for "traffic" on this host alone.
	Options Options
	Count   int // runs on this host alone (Repeat); 1 unless "count N"
	// Between two hosts: Listen (on ListenAddr, for Serve) or PeerAddr
	// (for Connect).
	Listen     bool
	ListenAddr string
	PeerAddr   string
	Test       Test
	Timeout    time.Duration // 0: DefaultPeerTimeout
	// From are the peers a listener allows ("from"): addresses,
	// networks (ADDR/PREFIX) and host names, for ResolveAllow.
	From []string
}

// TwoHost reports whether the request is a probe between two hosts.
func (r Request) TwoHost() bool { return r.Listen || r.PeerAddr != "" }

// MaxCount bounds "count N": each probe takes milliseconds.
const MaxCount = 1_000_000

// Keywords are the words of a probe after DEV[/PORT], in the order that
// decides abbreviations.
var Keywords = []string{"gid-index", "traffic", "count", "listen", "peer", "bw", "lat", "pingpong", "size", "iters", "duration", "timeout", "from"}

// ParseArgs reads the words of `grdma probe` (DEV[/PORT] then keywords,
// abbreviated as rdma abbreviates them) into a Request:
//
//	DEV[/PORT] [gid-index N] [traffic] [count N]
//	DEV[/PORT] [gid-index N] listen [[ADDR]:PORT] [pingpong] [size BYTES] [iters N] [timeout D] [from HOST[/PREFIX]...]
//	DEV[/PORT] [gid-index N] peer HOST[:PORT] [traffic | bw [OP] | lat [OP] | pingpong] [size BYTES] [iters N] [duration D] [timeout D]
//
// Words that are wrong or do not go together are a *cmdline.UsageError
// naming the problem, and nothing is returned.
func ParseArgs(words []string) (Request, error) {
	args := cmdline.NewArgs(words, "")
	if args.Empty() {
		return Request{}, cmdline.Usagef("", "probe needs a device: DEV[/PORT]")
	}
	target, err := args.DevPort(args.Next())
	if err != nil {
		return Request{}, err
	}
	req := Request{Count: 1, Options: Options{Device: target.Dev, Port: target.Port, GIDIndex: AutoGID}}
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword("argument", "", Keywords...)
		if err != nil {
			return Request{}, err
		}
		if seen[kw] {
			return Request{}, cmdline.Usagef("", "%s given twice", kw)
		}
		seen[kw] = true
		if err := req.parseKeyword(args, kw); err != nil {
			return Request{}, err
		}
	}
	if req.Test.Kind == TestTraffic && !req.TwoHost() {
		req.Options.Traffic = true // this host alone
	}
	if err := req.check(seen); err != nil {
		return Request{}, err
	}
	return req, nil
}

// parseKeyword reads keyword kw and its values.
func (req *Request) parseKeyword(args *cmdline.Args, kw string) (err error) {
	switch kw {
	case "traffic", "bw", "lat", "pingpong":
		if req.Test.Kind != "" {
			return cmdline.Usagef("", "%s and %s: one test at a time", req.Test.Kind, kw)
		}
		req.Test.Kind = TestKind(kw)
		if (kw == "bw" || kw == "lat") && !args.Empty() {
			if op, ok := parseOperation(args.Words[0]); ok {
				req.Test.Op = op
				args.Next()
			}
		}
	case "gid-index":
		req.Options.GIDIndex, err = args.Number("gid-index", 0, math.MaxUint8)
	case "count":
		req.Count, err = args.Number("count", 1, MaxCount)
	case "listen":
		req.Listen = true
		if !args.Empty() && !isKeyword(args.Words[0]) {
			req.ListenAddr = args.Next()
		}
		if req.ListenAddr, err = ListenAddress(req.ListenAddr); err != nil {
			return cmdline.Usagef("", "listen: %v", err)
		}
	case "peer":
		v, err := args.Value("peer address HOST[:PORT]")
		if err != nil {
			return err
		}
		if req.PeerAddr, err = PeerAddress(v); err != nil {
			return cmdline.Usagef("", "peer: %v", err)
		}
	case "size":
		req.Test.Size, err = args.Number("size", 1, MaxTestSize)
	case "iters":
		req.Test.Iters, err = args.Number("iters", 1, MaxTestIters)
	case "duration":
		req.Test.Duration, err = args.Duration("duration", MaxTestDuration)
	case "timeout":
		req.Timeout, err = args.Duration("timeout", time.Hour)
	case "from":
		for first := true; !args.Empty() && (first || !isKeyword(args.Words[0])); first = false {
			w := args.Next()
			if _, err := ParseFrom(w); err != nil {
				return cmdline.Usagef("", "from: %v", err)
			}
			req.From = append(req.From, w)
		}
		if len(req.From) == 0 {
			return cmdline.Usagef("", "from needs HOST[/PREFIX]: the addresses or networks peers may connect from")
		}
	}
	return err
}

// check refuses keywords that do not go together.
func (req *Request) check(seen map[string]bool) error {
	switch {
	case req.Listen && req.PeerAddr != "":
		return cmdline.Usagef("", "listen or peer, not both")
	case seen["from"] && !req.Listen:
		return cmdline.Usagef("", "from restricts who may connect to a listener: give it to probe DEV listen")
	case !req.TwoHost():
		for _, kw := range []string{"bw", "lat", "pingpong", "size", "iters", "duration", "timeout"} {
			if seen[kw] {
				return cmdline.Usagef("", "%s needs a peer: probe DEV listen on one host, probe DEV peer HOST %s on the other", kw, kw)
			}
		}
		return nil
	case seen["count"]:
		return cmdline.Usagef("", "count repeats a probe of this host alone; between hosts use iters or duration")
	case req.Listen && req.Test.Kind != "" && req.Test.Kind != TestPingpong:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give %s to probe ... peer HOST", req.Test.Kind)
	case seen["iters"] && seen["duration"]:
		return cmdline.Usagef("", "iters or duration, not both")
	case req.Listen && seen["duration"]:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give duration to probe ... peer HOST")
	}
	test := req.Test.WithDefaults()
	if req.Listen {
		test = Test{Kind: TestPingpong, Size: req.Test.Size, Iters: req.Test.Iters}.WithDefaults()
	}
	if err := test.Validate(); err != nil {
		return cmdline.Usagef("", "%v", err)
	}
	return nil
}

// isKeyword reports whether word abbreviates a keyword (the listen
// address is optional).
func isKeyword(word string) bool {
	for _, k := range Keywords {
		if strings.HasPrefix(k, word) {
			return true
		}
	}
	return false
}

func parseOperation(word string) (Operation, bool) {
	for _, op := range []Operation{OpWrite, OpSend, OpRead} {
		if string(op) == word {
			return op, true
		}
	}
	return "", false
}

// Outcome is the error of a probe whose last result is r, after runs of
// count runs: the failed step with its likely cause, the driver not
// supported, or an interruption before count runs (all passed); nil when
// every run passed. It is what `grdma probe` exits 1 with.
func Outcome(r *Result, runs, count int) error {
	target := fmt.Sprintf("%s/%d", r.Device, r.Port)
	run := ""
	if count > 1 {
		run = fmt.Sprintf(" (run %d of %d)", runs, count)
	}
	if s := r.Failed(); s != nil {
		msg := fmt.Sprintf("probe %s failed at %s%s: %v", target, s.Name, run, s.Err.Err)
		if s.Err.Cause != "" {
			msg += "\n  likely cause: " + s.Err.Cause
		}
		return fmt.Errorf("%s", msg)
	}
	if r.Unsupported != "" {
		return fmt.Errorf("probe %s%s: %s", target, run, r.Unsupported)
	}
	if runs < count {
		return fmt.Errorf("probe %s interrupted after %d of %d runs, all passed", target, runs, count)
	}
	return nil
}
