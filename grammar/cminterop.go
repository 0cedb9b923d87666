package grammar

import (
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/verbsprobe"
)

// CMInterop is an interoperability mode of a probe over the RDMA CM
// (probe ... cm rping|ucmatose|perftest|fabtests WORDS): what ParseCMInterop makes
// of the mode's words and of the address.
type CMInterop struct {
	Mode string
	// Addr is the peer (peer IP[:PORT]) or the address to listen on
	// (listen cm [ADDR][:PORT]; the unspecified address unless given);
	// the port is the mode's unless given.
	Addr netip.AddrPort
	// Count and Size: "count N" (pings, messages; fabtests' iters N),
	// "size N"; 0 when not given (the mode's default).
	Count, Size int
	// Test and Op are perftest's test: "bw|lat write|send|read" right
	// after the mode word (ib_write_bw is bw write).
	Test verbsprobe.TestKind
	Op   verbsprobe.Operation
	// ToS is "tos N" (a client's), nil when not given.
	ToS *uint8
	// Timeout is "timeout D" (the whole run), 0 when not given.
	Timeout time.Duration
}

// CMInteropHelp is the grammar of the interoperability modes.
const CMInteropHelp = `Usage: grdma probe [DEV] peer IP[:PORT] cm rping|ucmatose [count N] [size N] [tos N] [timeout D]
       grdma probe [DEV] listen cm [ADDR][:PORT] rping|ucmatose [count N] [size N] [timeout D]
       grdma probe [DEV] peer IP[:PORT] cm perftest bw|lat write|send|read [size N] [iters N] [tos N] [timeout D]
       grdma probe [DEV] listen cm perftest bw|lat write|send|read [ADDR][:PORT] [size N] [iters N] [timeout D]
       grdma probe [DEV] peer IP[:PORT] cm fabtests [size N] [iters N] [timeout D]
       grdma probe [DEV] listen cm fabtests [ADDR][:PORT] [size N] [iters N] [timeout D]
rping's port is 7174 (rping -s, rping -c -a IP -C N -v -V), ucmatose's 7471,
perftest's 18515 (ib_write_bw -R, ib_send_lat -R [IP] ...; size and iters as theirs),
fabtests' 47592 (fi_pingpong -e msg -p verbs -S N -I N [IP]; size and iters as its -S and -I).`

// CMInteropPorts are the modes' default ports (the peer tools' own).
var CMInteropPorts = map[string]uint16{"rping": 7174, "ucmatose": 7471, "perftest": 18515, "fabtests": 47592}

// ParseCMInterop parses the words after an interoperability mode word
// (CMProbe.ModeArgs) and the address as typed (CMProbe.Raw); listen is
// the listening side. Errors are usage errors (exit 2).
func ParseCMInterop(mode string, words []string, raw string, listen bool) (CMInterop, error) {
	r := CMInterop{Mode: mode}
	port, ok := CMInteropPorts[mode]
	if !ok {
		return r, cmdline.Usagef(CMInteropHelp, "no interoperability mode %q: rping, ucmatose, perftest, fabtests", mode)
	}
	if mode == "perftest" {
		var err error
		if r.Test, r.Op, words, err = parsePerftestTest(words); err != nil {
			return r, err
		}
	}
	// The form puts a listener's address after the mode word:
	// listen cm rping [ADDR][:PORT].
	if listen && raw == "" && len(words) > 0 && !slices.Contains(interopKeywords(mode), words[0]) {
		raw, words = words[0], words[1:]
	}
	var err error
	if r.Addr, err = parseInteropAddr(raw, port, listen); err != nil {
		return r, err
	}
	args := cmdline.NewArgs(words, CMInteropHelp)
	keywords := interopKeywords(mode)
	seen := map[string]bool{}
	for !args.Empty() {
		kw, err := args.Keyword(mode+" argument", "", keywords...)
		if err != nil {
			return r, err
		}
		if seen[kw] {
			return r, cmdline.Usagef(CMInteropHelp, "%s given twice", kw)
		}
		seen[kw] = true
		switch kw {
		case "count", "iters":
			r.Count, err = args.Number(kw, 1, 1<<30)
		case "size":
			maxSize := 65535
			if mode == "perftest" {
				maxSize = 8 << 20 // perftest's own limit
			}
			r.Size, err = args.Number("size", 1, maxSize)
		case "tos":
			if listen {
				return r, cmdline.Usagef(CMInteropHelp, "tos is the client's: a server mirrors its client's ToS")
			}
			var n int
			n, err = args.Number("tos", 0, math.MaxUint8)
			tos := uint8(n)
			r.ToS = &tos
		case "timeout":
			r.Timeout, err = args.Duration("timeout", time.Hour)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// parseInteropAddr parses IP[:PORT] (a peer: the IP is required) or
// [ADDR][:PORT] (a listener), with port def unless given. Names are not
// resolved: the RDMA CM routes by IP address.
func parseInteropAddr(raw string, def uint16, listen bool) (netip.AddrPort, error) {
	what := "peer"
	if listen {
		what = "listen"
	}
	if raw == "" {
		if !listen {
			return netip.AddrPort{}, cmdline.Usagef(CMInteropHelp, "peer needs an IP address")
		}
		return netip.AddrPortFrom(netip.IPv4Unspecified(), def), nil
	}
	if ap, err := netip.ParseAddrPort(raw); err == nil {
		return ap, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(raw, "[]")); err == nil {
		return netip.AddrPortFrom(a, def), nil
	}
	if listen && strings.HasPrefix(raw, ":") {
		if p, err := strconv.ParseUint(raw[1:], 10, 16); err == nil {
			return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
		}
	}
	return netip.AddrPort{}, cmdline.Usagef(CMInteropHelp, "%s address %q: give an IP address, IP:PORT or [IPv6]:PORT (the RDMA CM connects by IP address)", what, raw)
}

// parsePerftestTest reads perftest's "bw|lat write|send|read" and
// returns the words after them.
func parsePerftestTest(words []string) (verbsprobe.TestKind, verbsprobe.Operation, []string, error) {
	args := cmdline.NewArgs(words, CMInteropHelp)
	if args.Empty() {
		return "", "", nil, cmdline.Usagef(CMInteropHelp, "perftest needs its test: bw|lat write|send|read (ib_write_bw -R is bw write)")
	}
	test, err := args.Keyword("perftest test", "", string(verbsprobe.TestBandwidth), string(verbsprobe.TestLatency))
	if err != nil {
		return "", "", nil, err
	}
	if args.Empty() {
		return "", "", nil, cmdline.Usagef(CMInteropHelp, "perftest %s needs its operation: write, send or read", test)
	}
	op, err := args.Keyword("perftest operation", "", string(verbsprobe.OpWrite), string(verbsprobe.OpSend), string(verbsprobe.OpRead))
	if err != nil {
		return "", "", nil, err
	}
	return verbsprobe.TestKind(test), verbsprobe.Operation(op), args.Words, nil
}

// interopKeywords are a mode's words.
func interopKeywords(mode string) []string {
	switch mode {
	case "fabtests":
		return []string{"iters", "size", "timeout"}
	case "perftest":
		return []string{"size", "iters", "tos", "timeout"}
	}
	return []string{"count", "size", "tos", "timeout"}
}
