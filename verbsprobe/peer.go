package verbsprobe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/udping"
)

// A probe between two hosts: Serve on one (`grdma probe DEV listen`),
// Connect on the other (`grdma probe DEV peer HOST`). Each side brings its
// own queue pair to RTS against the other's, over an out-of-band TCP
// exchange (a versioned JSON-lines protocol, see protocol.go), then runs
// the test the connecting side asks for: SEND, RDMA WRITE and RDMA READ
// with every byte verified (traffic), streaming bandwidth (bw), or
// ping-pong latency (lat). Serve also answers an ibv_rc_pingpong client,
// and Connect with TestPingpong talks to an ibv_rc_pingpong server.

// DefaultPeerPort is the TCP port of the out-of-band exchange: the one
// ibv_rc_pingpong and perftest use, so a firewall rule made for them
// serves.
const DefaultPeerPort = 18515

// DefaultPeerTimeout bounds the connection to the peer and every wait on
// it.
const DefaultPeerTimeout = 10 * time.Second

// TestKind is what a probe between two hosts does once both queue pairs
// are in RTS.
type TestKind string

// Tests.
const (
	TestConnect   TestKind = "connect"  // nothing more: the control path to RTS
	TestTraffic   TestKind = "traffic"  // SEND, RDMA WRITE, RDMA READ, every byte verified
	TestBandwidth TestKind = "bw"       // streaming with a window of outstanding requests
	TestLatency   TestKind = "lat"      // ping-pong, one message outstanding
	TestPingpong  TestKind = "pingpong" // ibv_rc_pingpong's exchange and SEND ping-pong
	// TestUDPingpong is ibv_ud_pingpong's exchange and its UD SEND
	// ping-pong.
	TestUDPingpong TestKind = "ud-pingpong"
	// TestUDPing asks a responder for the address of its UD ping queue
	// pair (package udping), registering the asker's: no test runs.
	TestUDPing TestKind = "ud-ping"
)

// Operation is the verb a bw or lat test uses.
type Operation string

// Operations.
const (
	OpWrite Operation = "write"
	OpSend  Operation = "send"
	OpRead  Operation = "read"
)

// Test says what to measure between two hosts. Zero fields take the
// defaults of WithDefaults.
type Test struct {
	Kind TestKind  `json:"kind"`
	Op   Operation `json:"op,omitempty"` // bw and lat
	// Size is the bytes of each message.
	Size int `json:"size,omitempty"`
	// Iters is how many messages (bw), exchanges (lat, pingpong) to run.
	Iters int `json:"iters,omitempty"`
	// Duration, when set, runs bw or lat for this long instead of Iters.
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// Limits of a test's parameters.
const (
	MaxTestSize  = 1 << 28 // 256 MiB a message: the region is pinned twice that
	MaxTestIters = 100_000_000
	// MaxTestDuration bounds a bw or lat run.
	MaxTestDuration = time.Hour
)

// WithDefaults fills in the zero fields: perftest's defaults for bw
// (write, 64 KiB, 5000 messages) and lat (write, 2 bytes, 1000
// exchanges), ibv_rc_pingpong's for pingpong (4096 bytes, 1000),
// ibv_ud_pingpong's for ud-pingpong (1024 bytes, 1000), and 8192 bytes
// (more than a path MTU) for traffic; ud-ping takes none.
func (t Test) WithDefaults() Test {
	if t.Kind == "" {
		t.Kind = TestConnect
	}
	switch t.Kind {
	case TestBandwidth, TestLatency:
		if t.Op == "" {
			t.Op = OpWrite
		}
	}
	if t.Kind == TestUDPing {
		return t // a lookup: nothing to size
	}
	if t.Size == 0 {
		switch t.Kind {
		case TestBandwidth:
			t.Size = 65536
		case TestLatency:
			t.Size = 2
		case TestPingpong:
			t.Size = 4096
		case TestUDPingpong:
			t.Size = 1024
		default:
			t.Size = payloadSize
		}
	}
	if t.Iters == 0 {
		switch t.Kind {
		case TestBandwidth:
			t.Iters = 5000
		case TestLatency, TestPingpong, TestUDPingpong:
			t.Iters = 1000
		}
	}
	return t
}

// Validate reports a test whose parameters cannot be run.
func (t Test) Validate() error {
	switch t.Kind {
	case TestUDPing:
		if t.Op != "" || t.Size != 0 || t.Iters != 0 || t.Duration != 0 {
			return fmt.Errorf("%s is a lookup: it takes no operation, size, iters or duration", t.Kind)
		}
		return nil
	case TestUDPingpong:
		if t.Op != "" || t.Duration != 0 {
			return fmt.Errorf("%s takes no operation or duration", t.Kind)
		}
		if t.Size > udping.MaxDatagram {
			return fmt.Errorf("size %d: a datagram is at most %d bytes (one packet of the largest MTU)", t.Size, udping.MaxDatagram)
		}
	case TestConnect, TestTraffic, TestPingpong:
		if t.Op != "" {
			return fmt.Errorf("%s takes no operation (%s)", t.Kind, t.Op)
		}
		if t.Duration != 0 && t.Kind != TestPingpong {
			return fmt.Errorf("%s takes no duration", t.Kind)
		}
	case TestBandwidth, TestLatency:
		switch t.Op {
		case OpWrite, OpSend, OpRead:
		default:
			return fmt.Errorf("unknown operation %q: write, send or read", t.Op)
		}
	default:
		return fmt.Errorf("unknown test %q", t.Kind)
	}
	switch {
	case t.Size < 1 || t.Size > MaxTestSize:
		return fmt.Errorf("size %d: from 1 to %d bytes", t.Size, MaxTestSize)
	case t.Iters < 0 || t.Iters > MaxTestIters:
		return fmt.Errorf("iters %d: from 1 to %d", t.Iters, MaxTestIters)
	case t.Duration < 0 || t.Duration > MaxTestDuration:
		return fmt.Errorf("duration %v: at most %v", t.Duration, MaxTestDuration)
	case t.Duration != 0 && (t.Kind == TestPingpong || t.Kind == TestUDPingpong):
		return fmt.Errorf("%s runs iters exchanges, no duration", t.Kind)
	}
	return nil
}

// String is the test as the command line says it: "bw write", "traffic".
func (t Test) String() string {
	if t.Op != "" {
		return string(t.Kind) + " " + string(t.Op)
	}
	return string(t.Kind)
}

// stepName is the name of the step that runs the test: "bw_write",
// "lat_send", "pingpong".
func (t Test) stepName() string {
	if t.Op != "" {
		return string(t.Kind) + "_" + string(t.Op)
	}
	return string(t.Kind)
}

// Endpoint is one side of a probe between two hosts: what the other side
// needs to connect its queue pair (exchanged over TCP) and what an
// operator needs to see.
type Endpoint struct {
	Ifname    string       `json:"ifname"`
	Port      uint32       `json:"port"`
	Driver    string       `json:"driver,omitempty"`
	LinkLayer ib.LinkLayer `json:"link_layer"` // by name on the wire: "Ethernet", "InfiniBand"
	GIDIndex  int          `json:"gid_index"`  // -1: no GRH (InfiniBand by LID)
	GID       gid.GID      `json:"gid"`
	GIDType   string       `json:"gid_type,omitempty"` // "RoCE v2", "RoCE v1", "IB"
	LID       uint16       `json:"lid"`
	QPN       uint32       `json:"qpn"`
	PSN       uint32       `json:"psn"`
	ActiveMTU int          `json:"active_mtu"` // bytes
	// RdAtomic is how many RDMA READs it takes outstanding.
	RdAtomic uint8 `json:"rd_atomic"`
	// QKey is a UD queue pair's Q_Key (TestUDPing).
	QKey uint32 `json:"qkey,omitempty"`
	// UDEchoDelay: a UD ping responder that answers probes asking for
	// one reply (udping.Address.EchoDelay); absent from older ones.
	UDEchoDelay bool `json:"ud_echo_delay,omitempty"`
	// The memory region the peer writes into and reads from: Parts parts
	// of Part bytes at Addr.
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Part int    `json:"part"`
}

// Name is "rxe0/1".
func (e Endpoint) Name() string { return fmt.Sprintf("%s/%d", e.Ifname, e.Port) }

// MarshalJSON writes the link layer by name.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type plain Endpoint
	return json.Marshal(struct {
		plain
		LinkLayer string `json:"link_layer"`
	}{plain(e), e.LinkLayer.String()})
}

// UnmarshalJSON reads the link layer by name; a name that is neither
// Ethernet nor InfiniBand is a *PeerTextError.
func (e *Endpoint) UnmarshalJSON(b []byte) error {
	type plain Endpoint
	w := struct {
		*plain
		LinkLayer string `json:"link_layer"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if err := checkOneOf("link layer", w.LinkLayer, ib.LinkLayerEthernet.String(), ib.LinkLayerInfiniBand.String()); err != nil {
		return err
	}
	e.LinkLayer = ib.ParseLinkLayer(w.LinkLayer)
	return nil
}

// IncompatibleError means two ports cannot reach each other whatever the
// network does: it names both sides' values.
type IncompatibleError struct {
	What          string // "link layers", "GID types", "address families"
	Local, Remote string // "rxe0/1 Ethernet"
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("%s differ: this side's %s, the peer's %s", e.What, e.Local, e.Remote)
}

// compatible reports whether local's queue pair can connect to remote's.
func compatible(local, remote Endpoint) error {
	side := func(e Endpoint, v string) string { return e.Name() + " " + v }
	if local.LinkLayer.IsEthernet() != remote.LinkLayer.IsEthernet() {
		return &IncompatibleError{What: "link layers", Local: side(local, local.LinkLayer.String()), Remote: side(remote, remote.LinkLayer.String())}
	}
	if local.LinkLayer.IsInfiniBand() {
		if remote.GIDIndex < 0 && (remote.LID == 0 || remote.LID >= 0xc000) {
			return fmt.Errorf("the peer's %s has no usable LID (%#x): is a subnet manager running?", remote.Name(), remote.LID)
		}
		return nil
	}
	gidOf := func(e Endpoint) string { return fmt.Sprintf("GID %d %s (%s)", e.GIDIndex, e.GID, e.GIDType) }
	if local.GIDType != remote.GIDType {
		return &IncompatibleError{What: "GID types", Local: side(local, gidOf(local)), Remote: side(remote, gidOf(remote))}
	}
	if local.GID.IsIPv4Mapped() != remote.GID.IsIPv4Mapped() {
		return &IncompatibleError{What: "address families", Local: side(local, gidOf(local)), Remote: side(remote, gidOf(remote))}
	}
	return nil
}

// pathMTU is the smaller of the two ports' active MTUs; the local one when
// the peer's is not an MTU.
func pathMTU(local ib.MTU, remoteBytes int) ib.MTU {
	if remote, ok := ib.MTUFromBytes(remoteBytes); ok && remote < local {
		return remote
	}
	return local
}

// Measurement is what a bw, lat or pingpong test measured on one side.
type Measurement struct {
	Test  TestKind
	Op    Operation
	Size  int
	Iters int // messages (bw) or exchanges (lat, pingpong) completed
	// Bytes is the payload moved: Size × Iters (× 2 for pingpong, whose
	// messages go both ways).
	Bytes   uint64
	Elapsed time.Duration
	// Latency is set for lat and pingpong: one way (half a round trip)
	// for write and send, as perftest reports; a whole RDMA READ for read.
	Latency *LatencyStats
}

// BWGbps is the payload bandwidth in Gb/s (10^9 bits a second).
func (m Measurement) BWGbps() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Bytes) * 8 / m.Elapsed.Seconds() / 1e9
}

// MsgRateMpps is the message rate in millions a second.
func (m Measurement) MsgRateMpps() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Iters) / m.Elapsed.Seconds() / 1e6
}

// PeerError is a failure of the out-of-band exchange or of the peer: it
// names the address and what was going on.
type PeerError struct {
	Host  string
	Doing string // "connecting", "waiting for the peer's endpoint", ...
	Err   error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Doing, e.Host, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// RemoteFailure is the peer's own report that its side failed.
type RemoteFailure struct {
	Step    string
	Message string
}

func (e *RemoteFailure) Error() string {
	if e.Step == "" {
		return "the peer failed: " + e.Message
	}
	return fmt.Sprintf("the peer failed at %s: %s", e.Step, e.Message)
}

// errPeerClosed means the peer closed the connection.
var errPeerClosed = errors.New("the peer closed the connection")

// joinLines joins what each side says, for a compact message.
func joinLines(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}
