package grammar

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/udping"
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
	// Serve: a responder (Respond) on ListenAddr, with Responder's
	// limits (its Limits from size, duration and peer-memory; MaxPeers,
	// MaxPinnedTotal and Grace from peers, memory and grace).
	Serve     bool
	Responder verbsprobe.ResponderConfig
	// Auth is the file of the shared secret ("auth"), for
	// verbsprobe.LoadKey: a listener's or responder's, or the one its
	// client proves.
	Auth string
	// Ping: UD pings of PeerAddr's responder ("ping"): Count probes (0:
	// until interrupted), one every Interval, of PingSize bytes (0:
	// cycling through udping's sizes and the path MTU).
	Ping     bool
	Interval time.Duration
	PingSize int
	// CM: a probe over the RDMA CM ("cm"), nil otherwise.
	CM *CMProbe

	listenRaw, rawPeer string // as given
}

// CMProbe is a probe over the RDMA CM: grdma's own (Mode ""), or an
// interoperability mode with a peer tool (CMInteropModes), whose words
// after the mode word are the mode's to parse.
type CMProbe struct {
	Mode     string
	ModeArgs []string
	// Addr is the listener's address (listen, serve): ADDR:PORT, the
	// unspecified address and DefaultPeerPort unless given.
	Addr netip.AddrPort
	// Peer is the peer's address (peer IP[:PORT]) for grdma's mode.
	Peer netip.AddrPort
	// Raw is the address as given after cm (listen) or peer ("" when
	// none), for the interop modes, whose default ports differ.
	Raw string
	// ToS is the connection's ToS ("tos N"); nil: the port's default
	// (grdma cm set).
	ToS *uint8
}

// CMInteropModes are the mode words after cm that another tool's
// protocol speaks (cmd/grdma hands their words to the mode).
var CMInteropModes = []string{"rping", "ucmatose", "perftest", "fabtests"}

// DefaultPingInterval is ping's: a probe a second.
const DefaultPingInterval = time.Second

// TwoHost reports whether the request is a probe between two hosts.
func (r ProbeRequest) TwoHost() bool { return r.Listen || r.Serve || r.PeerAddr != "" }

// MaxProbeCount bounds "count N": each probe takes milliseconds.
const MaxProbeCount = 1_000_000

// ProbeKeywords are the words of a probe after DEV[/PORT], in the order
// that decides abbreviations (Probe's table).
var ProbeKeywords = Probe.KeywordNames()

// ParseProbe reads the words of `grdma probe` (DEV[/PORT] then keywords,
// abbreviated as rdma abbreviates them) into a ProbeRequest:
//
//	DEV[/PORT] [gid-index N] [traffic] [count N]
//	DEV[/PORT] [gid-index N] listen [[ADDR]:PORT] [pingpong | ud-pingpong] [size BYTES] [iters N] [timeout D] [from HOST[/PREFIX]...] [auth FILE]
//	DEV[/PORT] [gid-index N] serve [[ADDR]:PORT] [size BYTES] [duration D] [peers N] [memory BYTES] [peer-memory BYTES]
//	        [pingpong] [iters N] [timeout D] [grace D] [from HOST[/PREFIX]...] [auth FILE]
//	DEV[/PORT] [gid-index N] peer HOST[:PORT] [traffic | bw [OP] | lat [OP] | pingpong | ud-pingpong] [size BYTES] [iters N] [duration D] [timeout D] [auth FILE]
//	DEV[/PORT] [gid-index N] peer HOST[:PORT] ping [count N] [interval D] [size BYTES|cycle] [timeout D] [auth FILE]
//
// Words that are wrong or do not go together are a *cmdline.UsageError
// naming the problem, and nothing is returned.
func ParseProbe(words []string) (ProbeRequest, error) {
	args := cmdline.NewArgs(words, "")
	if args.Empty() {
		return ProbeRequest{}, cmdline.Usagef("", "probe needs a device: DEV[/PORT]")
	}
	req := ProbeRequest{Count: 1, Options: verbsprobe.Options{GIDIndex: verbsprobe.AutoGID}}
	if w := args.Words[0]; w != "peer" && w != "listen" && w != "serve" {
		target, err := args.DevPort(args.Next())
		if err != nil {
			return ProbeRequest{}, err
		}
		req.Options.Device, req.Options.Port = target.Device, target.Port
	}
	seen := map[string]bool{}
	for !args.Empty() && (req.CM == nil || req.CM.Mode == "") {
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
	if req.CM != nil {
		if err := req.checkCM(seen); err != nil {
			return ProbeRequest{}, err
		}
		return req, nil
	}
	if req.Options.Device == "" {
		return ProbeRequest{}, cmdline.Usagef("", "probe needs a device: DEV[/PORT] (only a probe over cm finds it itself)")
	}
	if seen["tos"] {
		return ProbeRequest{}, cmdline.Usagef("", "tos is the ToS of a connection over the RDMA CM: give it after cm")
	}
	if req.Test.Kind == verbsprobe.TestTraffic && !req.TwoHost() {
		req.Options.Traffic = true // this host alone
	}
	if req.Ping || seen["interval"] || req.PingSize < 0 {
		if err := req.checkPing(seen); err != nil {
			return ProbeRequest{}, err
		}
		return req, nil
	}
	if err := req.check(seen); err != nil {
		return ProbeRequest{}, err
	}
	return req, nil
}

// checkPing checks the words of a UD ping and sets its defaults: count 0
// (until interrupted) unless given, interval DefaultPingInterval, sizes
// cycling unless size is given.
func (req *ProbeRequest) checkPing(seen map[string]bool) error {
	switch {
	case !req.Ping && seen["interval"]:
		return cmdline.Usagef("", "interval is a ping's: probe DEV peer HOST ping interval D")
	case !req.Ping:
		return cmdline.Usagef("", "size cycle is a ping's: probe DEV peer HOST ping size cycle")
	case req.Listen || req.Serve:
		return cmdline.Usagef("", "ping pings a responder: probe DEV peer HOST ping (the responder is probe DEV serve)")
	case req.PeerAddr == "":
		return cmdline.Usagef("", "ping needs a peer: probe DEV peer HOST ping")
	case req.Test.Kind != "":
		return cmdline.Usagef("", "ping and %s: one test at a time", req.Test.Kind)
	case seen["from"]:
		return cmdline.Usagef("", "from restricts who may connect to a listener: give it to probe DEV listen or serve")
	}
	for _, kw := range []string{"iters", "duration", "peers", "memory", "peer-memory", "grace"} {
		if seen[kw] {
			return cmdline.Usagef("", "ping takes count N and interval D, not %s", kw)
		}
	}
	if !seen["count"] {
		req.Count = 0
	}
	if req.Interval == 0 {
		req.Interval = DefaultPingInterval
	}
	if req.PingSize < 0 {
		req.PingSize = 0
	} else if seen["size"] {
		if req.Test.Size < udping.HeaderSize || req.Test.Size > udping.MaxDatagram {
			return cmdline.Usagef("", "size %d: a UD ping probe is from %d to %d bytes (at most the path MTU), or cycle", req.Test.Size,
				udping.HeaderSize, udping.MaxDatagram)
		}
		req.PingSize, req.Test.Size = req.Test.Size, 0
	}
	return nil
}

// parseKeyword reads keyword kw and its values.
func (req *ProbeRequest) parseKeyword(args *cmdline.Args, kw string) (err error) {
	switch kw {
	case "traffic", "bw", "lat", "pingpong", "ud-pingpong":
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
	case "listen", "serve":
		req.Listen, req.Serve = kw == "listen", kw == "serve"
		if !args.Empty() && !isProbeKeyword(args.Words[0]) {
			req.ListenAddr = args.Next()
			req.listenRaw = req.ListenAddr
		}
		if req.ListenAddr, err = verbsprobe.ListenAddress(req.ListenAddr); err != nil {
			return cmdline.Usagef("", "%s: %v", kw, err)
		}
	case "peers":
		req.Responder.MaxPeers, err = args.Number("peers", 1, MaxResponderPeers)
	case "memory":
		req.Responder.MaxPinnedTotal, err = args.Number("memory", 4096, MaxResponderMemory)
	case "peer-memory":
		req.Responder.Limits.MaxPinned, err = args.Number("peer-memory", 4096, MaxResponderMemory)
	case "grace":
		req.Responder.Grace, err = args.Duration("grace", time.Hour)
	case "auth":
		req.Auth, err = args.Value("auth FILE (a shared secret)")
	case "peer":
		v, err := args.Value("peer address HOST[:PORT]")
		if err != nil {
			return err
		}
		req.rawPeer = v
		if req.PeerAddr, err = verbsprobe.PeerAddress(v); err != nil {
			return cmdline.Usagef("", "peer: %v", err)
		}
	case "size":
		if !args.Empty() && args.Words[0] == "cycle" {
			args.Next()
			req.PingSize = -1 // cycle: checked to be a ping's, then 0
			return nil
		}
		req.Test.Size, err = args.Number("size", 1, verbsprobe.MaxTestSize)
	case "ping":
		req.Ping = true
	case "cm":
		req.CM = &CMProbe{}
		if !args.Empty() && slices.Contains(CMInteropModes, args.Words[0]) {
			req.CM.Mode = args.Next()
			req.CM.ModeArgs = append([]string(nil), args.Words...)
			args.Words = nil
			return nil
		}
		if !args.Empty() && !isProbeKeyword(args.Words[0]) {
			req.CM.Raw = args.Next()
		}
	case "tos":
		var n int
		n, err = args.Number("tos", 0, math.MaxUint8)
		tos := uint8(n)
		if req.CM == nil {
			req.CM = &CMProbe{}
		}
		req.CM.ToS = &tos
	case "rping", "ucmatose", "perftest", "fabtests":
		return cmdline.Usagef("", "%s is a mode of a probe over the RDMA CM: ... cm %s", kw, kw)
	case "interval":
		req.Interval, err = args.Duration("interval", time.Hour)
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

// Bounds of a responder's limits.
const (
	MaxResponderPeers  = 4096
	MaxResponderMemory = 1 << 40
)

// check refuses keywords that do not go together.
func (req *ProbeRequest) check(seen map[string]bool) error {
	switch {
	case seen["listen"] && seen["serve"]:
		return cmdline.Usagef("", "listen or serve, not both")
	case req.Listen && req.PeerAddr != "":
		return cmdline.Usagef("", "listen or peer, not both")
	case req.Serve && req.PeerAddr != "":
		return cmdline.Usagef("", "serve or peer, not both")
	case seen["from"] && !req.Listen && !req.Serve:
		return cmdline.Usagef("", "from restricts who may connect to a listener: give it to probe DEV listen or serve")
	case seen["auth"] && !req.TwoHost():
		return cmdline.Usagef("", "auth is a shared secret between two hosts: give it to probe DEV serve (or listen) and to probe DEV peer HOST")
	}
	for _, kw := range []string{"peers", "memory", "peer-memory", "grace"} {
		if seen[kw] && !req.Serve {
			return cmdline.Usagef("", "%s is a limit of a responder: give it to probe DEV serve", kw)
		}
	}
	if req.Serve {
		return req.checkServe(seen)
	}
	switch {
	case !req.TwoHost():
		for _, kw := range []string{"bw", "lat", "pingpong", "ud-pingpong", "size", "iters", "duration", "timeout"} {
			if seen[kw] {
				return cmdline.Usagef("", "%s needs a peer: probe DEV listen on one host, probe DEV peer HOST %s on the other", kw, kw)
			}
		}
		return nil
	case seen["count"]:
		return cmdline.Usagef("", "count repeats a probe of this host alone; between hosts use iters or duration")
	case req.Listen && req.Test.Kind != "" && req.Test.Kind != verbsprobe.TestPingpong && req.Test.Kind != verbsprobe.TestUDPingpong:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give %s to probe ... peer HOST", req.Test.Kind)
	case seen["iters"] && seen["duration"]:
		return cmdline.Usagef("", "iters or duration, not both")
	case req.Listen && seen["duration"]:
		return cmdline.Usagef("", "listen serves the test its peer asks for: give duration to probe ... peer HOST")
	}
	test := req.Test.WithDefaults()
	if req.Listen {
		kind := verbsprobe.TestPingpong
		if req.Test.Kind == verbsprobe.TestUDPingpong {
			kind = verbsprobe.TestUDPingpong
		}
		test = verbsprobe.Test{Kind: kind, Size: req.Test.Size, Iters: req.Test.Iters}.WithDefaults()
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

// checkServe checks a responder's words and sets its limits: size bounds
// the messages a peer may ask for (and is the size of an ibv_rc_pingpong
// client's), duration the tests.
func (req *ProbeRequest) checkServe(seen map[string]bool) error {
	switch {
	case seen["count"]:
		return cmdline.Usagef("", "count repeats a probe of this host alone; a responder serves until stopped")
	case req.Test.Kind == verbsprobe.TestUDPingpong:
		return cmdline.Usagef("", "serve answers ibv_rc_pingpong clients, whose address an ibv_ud_pingpong client's looks like: give ud-pingpong to probe DEV listen")
	case req.Test.Kind != "" && req.Test.Kind != verbsprobe.TestPingpong:
		return cmdline.Usagef("", "serve serves the test each peer asks for: give %s to probe ... peer HOST", req.Test.Kind)
	}
	l := &req.Responder.Limits
	l.MaxSize, l.MaxDuration = req.Test.Size, req.Test.Duration
	pp := verbsprobe.Test{Kind: verbsprobe.TestPingpong, Size: req.Test.Size, Iters: req.Test.Iters}.WithDefaults()
	if err := pp.Validate(); err != nil {
		return cmdline.Usagef("", "%v", err)
	}
	req.Test = verbsprobe.Test{Kind: req.Test.Kind, Size: req.Test.Size, Iters: req.Test.Iters}
	total := req.Responder.WithDefaults().MaxPinnedTotal
	if p := req.Responder.Limits.MaxPinned; p > total {
		return cmdline.Usagef("", "peer-memory %d is more than memory %d: one peer could never be served", p, total)
	}
	return nil
}

// checkCM checks the words of a probe over the RDMA CM and reads its
// addresses: peer IP[:PORT] (an IP address: the CM resolves no names),
// listen|serve cm [ADDR][:PORT]. The device may be left out but for
// serve, whose device is opened before any peer comes.
func (req *ProbeRequest) checkCM(seen map[string]bool) error {
	cm := req.CM
	switch {
	case !req.TwoHost():
		return cmdline.Usagef("", "cm connects two hosts: probe [DEV] peer IP cm on one, probe [DEV] listen cm on the other")
	case seen["tos"] && !seen["cm"]:
		return cmdline.Usagef("", "tos is the ToS of a connection over the RDMA CM: give it after cm")
	}
	if cm.Mode != "" {
		if req.Serve {
			return cmdline.Usagef("", "serve answers grdma probes over cm; %s is served by listen cm %s", cm.Mode, cm.Mode)
		}
		if req.Listen {
			cm.Raw = req.rawListen(seen)
		} else {
			cm.Raw = req.rawPeer
		}
		return nil
	}
	switch {
	case req.Ping || seen["pingpong"] || seen["ud-pingpong"]:
		return cmdline.Usagef("", "over cm a probe runs connect, traffic, bw or lat")
	case seen["auth"]:
		return cmdline.Usagef("", "auth cannot be proven over cm (56 bytes of request private data): leave out auth or cm")
	case seen["count"] || seen["interval"]:
		return cmdline.Usagef("", "count repeats a probe of this host alone; between hosts use iters or duration")
	case req.Serve && req.Options.Device == "" && (req.rawListen(seen) == "" || strings.HasPrefix(req.rawListen(seen), ":")):
		return cmdline.Usagef("", "serve cm needs DEV or the address to serve (ADDR[:PORT]): the responder opens its device before any peer comes")
	case req.Listen && seen["tos"]:
		return cmdline.Usagef("", "tos is the client's: the CM's server answers with the client's ToS")
	}
	if req.Listen || req.Serve {
		addr := req.rawListen(seen)
		hp, err := verbsprobe.ListenAddress(addr)
		if strings.HasPrefix(hp, ":") {
			hp = "0.0.0.0" + hp
		}
		if err == nil {
			cm.Addr, err = netip.ParseAddrPort(hp)
		}
		if err != nil {
			return cmdline.Usagef("", "cm: listen address %q: an IP address and port ([ADDR][:PORT]): %v", addr, err)
		}
		cm.Addr = netip.AddrPortFrom(cm.Addr.Addr().Unmap(), cm.Addr.Port())
		if req.Serve {
			return req.checkServe(seen)
		}
		if req.Test.Kind != "" {
			return cmdline.Usagef("", "listen serves the test its peer asks for: give %s to probe ... peer IP cm", req.Test.Kind)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(req.PeerAddr)
	if err != nil {
		return cmdline.Usagef("", "peer %s: the RDMA CM connects to an IP address (it resolves no names): give the peer's IP", req.rawPeer)
	}
	cm.Peer = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if seen["iters"] && seen["duration"] {
		return cmdline.Usagef("", "iters or duration, not both")
	}
	if err := req.Test.WithDefaults().Validate(); err != nil {
		return cmdline.Usagef("", "%v", err)
	}
	return nil
}

// rawListen is the listen address as given: after listen or after cm.
func (req *ProbeRequest) rawListen(seen map[string]bool) string {
	if req.CM.Raw != "" {
		return req.CM.Raw
	}
	if req.listenRaw != "" {
		return req.listenRaw
	}
	return ""
}
