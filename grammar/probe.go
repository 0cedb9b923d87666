package grammar

import (
	"math"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/verbsprobe"
)

// ProbeRequest is a probe as `grdma probe` words say it (ParseProbe):
// this host alone Count times, or between two hosts, listening or
// connecting to a peer, running Test.
type ProbeRequest struct {
	// Options say the device, port and GID index (Sysfs is the caller's
	// to set); Traffic is set for "traffic" on this host alone.
	Options verbsprobe.Options
	Count   int // runs on this host alone (Repeat); 1 unless "count N"
	// Between two hosts: Listen (on ListenAddr, for Serve) or PeerAddr
	// (for Connect).
	Listen     bool
	ListenAddr string
	PeerAddr   string
	Test       verbsprobe.Test
	Timeout    time.Duration // 0: DefaultPeerTimeout
	// From are the peers a listener allows ("from"): addresses,
	// networks (ADDR/PREFIX) and host names, for verbsprobe.ResolveAllow.
	From []string
}

// TwoHost reports whether the request is a probe between two hosts.
func (r ProbeRequest) TwoHost() bool { return r.Listen || r.PeerAddr != "" }

// MaxProbeCount bounds "count N": each probe takes milliseconds.
const MaxProbeCount = 1_000_000

// ProbeKeywords are the words of a probe after DEV[/PORT], in the order
// that decides abbreviations (Probe's table).
var ProbeKeywords = Probe.KeywordNames()

// ParseProbe reads the words of `grdma probe` (DEV[/PORT] then keywords,
// abbreviated as rdma abbreviates them) into a ProbeRequest:
//
//	DEV[/PORT] [gid-index N] [traffic] [count N]
//	DEV[/PORT] [gid-index N] listen [[ADDR]:PORT] [pingpong] [size BYTES] [iters N] [timeout D] [from HOST[/PREFIX]...]
//	DEV[/PORT] [gid-index N] peer HOST[:PORT] [traffic | bw [OP] | lat [OP] | pingpong] [size BYTES] [iters N] [duration D] [timeout D]
//
// Words that are wrong or do not go together are a *cmdline.UsageError
// naming the problem, and nothing is returned.
func ParseProbe(words []string) (ProbeRequest, error) {
	args := cmdline.NewArgs(words, "")
	if args.Empty() {
		return ProbeRequest{}, cmdline.Usagef("", "probe needs a device: DEV[/PORT]")
	}
	target, err := args.DevPort(args.Next())
	if err != nil {
		return ProbeRequest{}, err
	}
	req := ProbeRequest{Count: 1, Options: verbsprobe.Options{Device: target.Device, Port: target.Port, GIDIndex: verbsprobe.AutoGID}}
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword("argument", "", ProbeKeywords...)
		if err != nil {
			return ProbeRequest{}, err
		}
		if seen[kw] {
			return ProbeRequest{}, cmdline.Usagef("", "%s given twice", kw)
		}
		seen[kw] = true
		if err := req.parseKeyword(args, kw); err != nil {
			return ProbeRequest{}, err
		}
	}
	if req.Test.Kind == verbsprobe.TestTraffic && !req.TwoHost() {
		req.Options.Traffic = true // this host alone
	}
	if err := req.check(seen); err != nil {
		return ProbeRequest{}, err
	}
	return req, nil
}

// parseKeyword reads keyword kw and its values.
func (req *ProbeRequest) parseKeyword(args *cmdline.Args, kw string) (err error) {
	switch kw {
	case "traffic", "bw", "lat", "pingpong":
		if req.Test.Kind != "" {
			return cmdline.Usagef("", "%s and %s: one test at a time", req.Test.Kind, kw)
		}
		req.Test.Kind = verbsprobe.TestKind(kw)
		if (kw == "bw" || kw == "lat") && !args.Empty() {
			if op, ok := parseProbeOperation(args.Words[0]); ok {
				req.Test.Op = op
				args.Next()
			}
		}
	case "gid-index":
		req.Options.GIDIndex, err = args.Number("gid-index", 0, math.MaxUint8)
	case "count":
		req.Count, err = args.Number("count", 1, MaxProbeCount)
	case "listen":
		req.Listen = true
		if !args.Empty() && !isProbeKeyword(args.Words[0]) {
			req.ListenAddr = args.Next()
		}
		if req.ListenAddr, err = verbsprobe.ListenAddress(req.ListenAddr); err != nil {
			return cmdline.Usagef("", "listen: %v", err)
		}
	case "peer":
		v, err := args.Value("peer address HOST[:PORT]")
		if err != nil {
			return err
		}
		if req.PeerAddr, err = verbsprobe.PeerAddress(v); err != nil {
			return cmdline.Usagef("", "peer: %v", err)
		}
	case "size":
		req.Test.Size, err = args.Number("size", 1, verbsprobe.MaxTestSize)
	case "iters":
		req.Test.Iters, err = args.Number("iters", 1, verbsprobe.MaxTestIters)
	case "duration":
		req.Test.Duration, err = args.Duration("duration", verbsprobe.MaxTestDuration)
	case "timeout":
		req.Timeout, err = args.Duration("timeout", time.Hour)
	case "from":
		for first := true; !args.Empty() && (first || !isProbeKeyword(args.Words[0])); first = false {
			w := args.Next()
			if _, err := verbsprobe.ParseFrom(w); err != nil {
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
func (req *ProbeRequest) check(seen map[string]bool) error {
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
	case req.Listen && req.Test.Kind != "" && req.Test.Kind != verbsprobe.TestPingpong:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give %s to probe ... peer HOST", req.Test.Kind)
	case seen["iters"] && seen["duration"]:
		return cmdline.Usagef("", "iters or duration, not both")
	case req.Listen && seen["duration"]:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give duration to probe ... peer HOST")
	}
	test := req.Test.WithDefaults()
	if req.Listen {
		test = verbsprobe.Test{Kind: verbsprobe.TestPingpong, Size: req.Test.Size, Iters: req.Test.Iters}.WithDefaults()
	}
	if err := test.Validate(); err != nil {
		return cmdline.Usagef("", "%v", err)
	}
	return nil
}

// isProbeKeyword reports whether word abbreviates a keyword (the listen
// address is optional).
func isProbeKeyword(word string) bool {
	for _, k := range ProbeKeywords {
		if strings.HasPrefix(k, word) {
			return true
		}
	}
	return false
}

func parseProbeOperation(word string) (verbsprobe.Operation, bool) {
	for _, op := range []verbsprobe.Operation{verbsprobe.OpWrite, verbsprobe.OpSend, verbsprobe.OpRead} {
		if string(op) == word {
			return op, true
		}
	}
	return "", false
}
