// Package verbsprobe proves that an RDMA device can run a queue pair: it
// opens the device's uverbs interface (pure Go, no libibverbs), creates a
// protection domain, a completion queue and a reliable connected queue
// pair, connects the queue pair to itself (RESET→INIT→RTR→RTS), checks
// with QUERY_QP that it is ready to send and, with traffic, sends real
// data through it (SEND, RDMA WRITE, RDMA READ) and verifies every byte.
// Everything is torn down in order, on every path.
//
// Each step is timed and reported; a failure names the step, the errno
// and its likely cause. rxe (Soft-RoCE) is probed fully. mlx5 is probed
// up to a queue pair in RTS (its data path would need libmlx5's WQE and
// doorbell formats). Other drivers are probed up to the protection domain
// and reported as not supported.
//
// The kernel frees everything a process created in its uverbs context when
// the device is closed, so even a probe that is killed leaves nothing
// behind.
//
// Between two hosts, Serve on one and Connect on the other bring their
// queue pairs to RTS against each other over a small TCP exchange and run
// a test: traffic, bandwidth or latency, or ibv_rc_pingpong's loop with
// an ibv_rc_pingpong peer. The tests use a driver's data path only
// through two interfaces (posting work requests, polling completions:
// drivers.go), so a second driver's data path (mlx5's WQEs and doorbells)
// needs neither the exchange nor the command line changed.
//
// A probe has four layers, each in its files:
//
//   - a Device (device.go, address.go): the device port opened, its
//     address (GID or LID) chosen, a protection domain; long-lived and
//     shared between goroutines;
//   - a Conn (conn.go): one queue pair with its completion queue and
//     memory region, brought through its state transitions; one per peer;
//   - an Exchange (exchange.go): what connects a Conn's queue pair to its
//     peer's, and may choose the device or the transitions' attributes:
//     the queue pair itself (Run), grdma's TCP exchange (tcp.go,
//     protocol.go), ibv_rc_pingpong's (pingpong.go);
//   - a test (tests.go, traffic.go, peertests.go): traffic, bw, lat,
//     pingpong, run on a Conn.
package verbsprobe

import (
	"context"
	"math/rand/v2"
	"net"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Options says what to probe.
type Options struct {
	// Sysfs is the root the device is found under (sysfs.NewFS("/")).
	Sysfs sysfs.FS
	// Open, when set, opens the device's uverbs context instead (a fake
	// kernel: uverbstest); the GID table then comes from QUERY_GID_TABLE
	// and no address is awaited.
	Open   func() (*uverbs.Context, error)
	Device string // the RDMA device, e.g. "rxe0"
	// Port is the port number, from 1; 0 means 1.
	Port uint32
	// GIDIndex is the source GID of the queue pair's address. AutoGID
	// chooses with the gid selector: RoCE v2 IPv4 first, then other RoCE
	// v2, then RoCE v1; on InfiniBand, no GRH (the port's LID). Note that
	// the zero value is index 0, not AutoGID.
	GIDIndex int
	// Traffic sends data through the queue pair and verifies it.
	Traffic bool
	// CompletionTimeout bounds the wait for each operation's
	// completions; 0 means DefaultCompletionTimeout.
	CompletionTimeout time.Duration
	// AddressWait bounds the wait for the chosen GID's IPv6 address to
	// finish duplicate address detection; 0 means DefaultAddressWait.
	AddressWait time.Duration
	// Poll waits for completions by busy polling, as grdma did before
	// completion events, everywhere: a baseline for benchmarks. Without
	// it only the latency tests poll (lat, pingpong), where polling is
	// faster; everything else waits for events on a completion channel.
	Poll bool
}

// AutoGID asks for the GID the selector chooses.
const AutoGID = -1

// DefaultCompletionTimeout is how long an operation's completions may
// take. On rxe they take tens of microseconds; a lost packet is retried
// for about half a second before the queue pair gives up.
const DefaultCompletionTimeout = 2 * time.Second

// Step names, in the order they run. Every step that runs is reported;
// the teardown steps run for the objects that exist, whatever failed.
const (
	StepOpen        = "open"         // find the uverbs device in sysfs, open it, GET_CONTEXT
	StepQueryDevice = "query_device" // QUERY_DEVICE
	StepQueryPort   = "query_port"   // QUERY_PORT; the port must be ACTIVE
	StepAddress     = "address"      // the GID (RoCE) or LID (InfiniBand) to connect to; waits for IPv6 DAD
	StepAllocPD     = "alloc_pd"     // ALLOC_PD
	StepCreateCQ    = "create_cq"    // CREATE_CQ with the driver's queue
	StepCreateQP    = "create_qp"    // CREATE_QP, RC, with the driver's queues
	StepInit        = "modify_qp_init"
	StepRTR         = "modify_qp_rtr" // connected to itself
	StepRTS         = "modify_qp_rts"
	StepQueryQP     = "query_qp"  // QUERY_QP confirms RTS and the connection
	StepCreateAH    = "create_ah" // UD: CREATE_AH, the address handle to the peer
	StepRegMR       = "reg_mr"    // traffic: REG_MR of mmapped buffers
	StepSend        = "send"      // a RECV and a SEND, payload verified
	StepRDMAWrite   = "rdma_write"
	StepRDMARead    = "rdma_read" // reads back what the write wrote
	StepDeregMR     = "dereg_mr"
	StepDestroyQP   = "destroy_qp"
	StepDestroyAH   = "destroy_ah"
	StepDestroyCQ   = "destroy_cq"
	StepDeallocPD   = "dealloc_pd"
	StepClose       = "close"
)

// Step is the outcome of one step.
type Step struct {
	Name     string
	OK       bool
	Duration time.Duration
	Detail   string     // what it found or made, e.g. "qpn 17"
	Err      *StepError // nil when OK
}

// Result is the outcome of a probe.
type Result struct {
	Device      string
	Port        uint32
	Driver      string // as sysfs names it: "rxe", "mlx5_core", ...
	VerbsDevice string // "uverbs0"
	LinkLayer   ib.LinkLayer
	// GIDIndex is the source GID of the queue pair's address, -1 when
	// the address has none (InfiniBand by LID) or none was chosen yet.
	GIDIndex int
	GID      gid.GID
	LID      uint16
	QPN      uint32
	Traffic  bool
	// GIDType is the type of the GID at GIDIndex.
	GIDType gid.Type
	Steps   []Step
	// Unsupported says why the probe stopped short without a failure: the
	// driver's data is unknown to grdma.
	Unsupported string

	// Peer is the other side and what ran with it, between two hosts
	// (Connect, Serve); nil on this host alone.
	Peer *PeerResult
}

// PeerResult is a probe between two hosts as one side saw it.
type PeerResult struct {
	Role string // RoleClient or RoleServer
	// Host is the address of the exchange: the server's for a client
	// (from the start), the client's for a server (once one came).
	Host string
	// Test is what ran; a server knows it once its peer asked.
	Test *Test
	// Remote is the peer's endpoint, once it was exchanged.
	Remote *Endpoint
	// Pingpong is set when the peer speaks ibv_rc_pingpong's exchange,
	// which carries only its LID, QPN, PSN and GID.
	Pingpong bool
	// PathMTU is what both queue pairs use.
	PathMTU ib.MTU
	// Pinned is the bytes of memory this side registered for the test.
	Pinned       int
	Measurements []Measurement
	// CM is what the RDMA CM chose and its steps' times, for a probe
	// over it (ConnectConfig.Via, ResponderConfig.CM, ServeCM).
	CM *CMInfo
}

// OK reports whether the probe did everything it was asked and every
// step passed.
func (r *Result) OK() bool { return r.Failed() == nil && r.Unsupported == "" }

// Failed returns the first step that failed, or nil.
func (r *Result) Failed() *Step {
	for i := range r.Steps {
		if !r.Steps[i].OK {
			return &r.Steps[i]
		}
	}
	return nil
}

// Duration is the time of all steps.
func (r *Result) Duration() time.Duration {
	var d time.Duration
	for _, s := range r.Steps {
		d += s.Duration
	}
	return d
}

// Err returns the first failure, or an *UnsupportedError, or nil.
func (r *Result) Err() error {
	if s := r.Failed(); s != nil {
		return s.Err
	}
	if r.Unsupported != "" {
		return &UnsupportedError{Device: r.Device, Reason: r.Unsupported}
	}
	return nil
}

// UnsupportedError means the probe could not check everything because
// grdma does not know the driver's data.
type UnsupportedError struct {
	Device string
	Reason string
}

func (e *UnsupportedError) Error() string { return e.Device + ": " + e.Reason }

// Run probes the device opts names, on its own: a queue pair connected
// to itself, with traffic when opts.Traffic. The result lists every step
// that ran; ctx stops the probe between steps (the teardown still runs).
func Run(ctx context.Context, opts Options) *Result {
	return probe(ctx, opts, selfExchange{traffic: opts.Traffic}, newResult(opts))
}

// Connect probes the path to the peer that Serve answers at addr
// (host:port): both queue pairs are brought to RTS against each other,
// then test runs. timeout (0: DefaultPeerTimeout) bounds the connection,
// which is retried while refused, and every wait on the peer. The result
// lists this side's steps; a failure of the peer is a *RemoteFailure.
// Everything is torn down on every path, and ctx stops the probe.
//
// With TestPingpong the peer is an ibv_rc_pingpong server
// (`ibv_rc_pingpong -g N`), with TestUDPingpong an ibv_ud_pingpong server
// (`ibv_ud_pingpong -g N`), spoken to in their own exchange.
func Connect(ctx context.Context, opts Options, addr string, test Test, timeout time.Duration) *Result {
	return ConnectWith(ctx, opts, addr, ConnectConfig{Test: test, Timeout: timeout})
}

// ConnectConfig is what a client asks of its peer.
type ConnectConfig struct {
	Test    Test
	Timeout time.Duration // 0: DefaultPeerTimeout
	// Key is the responder's shared secret (LoadKey), for one that asks
	// for it (auth).
	Key []byte
	// Dial, when set, connects to the peer instead of TCP (tests: a pipe).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Via is how the peer is reached: grdma's TCP exchange (the zero
	// value) or the RDMA CM (cm.go: addr is then IP:PORT in the CM's TCP
	// port space, and Options.Device may be empty: the route chooses).
	// Over the CM, Key is not used (a listener with auth refuses CM
	// peers) and Dial only makes the control channel of tests that move
	// data.
	Via Transport
	// CMOpen opens the RDMA CM's channel (TransportCM); nil:
	// locator.OpenRDMACM on Options.Sysfs, without netlink (errors then
	// name devices by index).
	CMOpen func() (*rdmacm.Channel, error)
	// CMToS, when set, is the ToS of the connection (rdma_set_option
	// RDMA_OPTION_ID_TOS) instead of the port's default (grdma cm set).
	CMToS *uint8

	cmOpen func() (*cmChannel, error) // tests: a fake CM
}

// ConnectWith is Connect with a ConnectConfig.
func ConnectWith(ctx context.Context, opts Options, addr string, cfg ConnectConfig) *Result {
	test := cfg.Test.WithDefaults()
	res := newResult(opts)
	res.Peer = &PeerResult{Role: RoleClient, Host: addr, Test: &test}
	if err := test.Validate(); err != nil {
		newRecorder(ctx, res, nil).record(StepConnect, 0, "", err)
		return res
	}
	if cfg.Via == TransportCM {
		return connectCM(ctx, opts, addr, cfg, test, res)
	}
	side := peerSide{s: newSession(RoleClient, addr, test, cfg.Timeout), peer: res.Peer}
	side.s.dialer = cfg.Dial
	var x Exchange = &grdmaClient{peerSide: side, key: cfg.Key}
	if isPingpong(test.Kind) {
		x = &pingpongClient{side}
	}
	return probe(ctx, opts, x, res)
}

// Serve waits on ln for one peer (Connect, or an ibv_rc_pingpong client),
// brings its queue pair to RTS against the peer's and serves the test the
// peer asks for, within cfg's limits. It accepts connections until one
// sends a valid first message, a hello within the limits or an
// ibv_rc_pingpong address; each other one is told why if it is a grdma
// client, logged (cfg.Logf) and closed. Then ln is closed: the first
// valid peer wins. The peer may stay for its test's budget
// (Limits.Budget), then it is cut off (*OverstayError). An
// ibv_rc_pingpong client is answered with cfg.Pingpong's Size and Iters.
func Serve(ctx context.Context, opts Options, ln net.Listener, cfg ServeConfig) *Result {
	res := newResult(opts)
	res.Peer = &PeerResult{Role: RoleServer}
	return probe(ctx, opts, &listenExchange{ln: ln, cfg: cfg, peer: res.Peer}, res)
}

// randomPayload fills b with bytes that differ from run to run, so that
// stale memory cannot pass for a transfer.
func randomPayload(b []byte) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := i; j < i+8 && j < len(b); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}
