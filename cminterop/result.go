package cminterop

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
)

// Mode is the peer program whose protocol a run speaks.
type Mode string

// The peers.
const (
	Rping    Mode = "rping"    // rdmacm-utils' rping (-s server, -c client)
	Ucmatose Mode = "ucmatose" // rdmacm-utils' ucmatose (server without -s, client with -s)
	Perftest Mode = "perftest" // perftest's ib_write_bw, ib_send_lat, ... with -R (rdma_cm)
	Fabtests Mode = "fabtests" // libfabric's fi_pingpong -e msg -p verbs
)

// Modes are the peers, in the order help lists them.
var Modes = []Mode{Rping, Ucmatose, Perftest, Fabtests}

// Port is the mode's default port (the RDMA CM's TCP port space), as the
// peer program's own default.
func (m Mode) Port() uint16 {
	switch m {
	case Ucmatose:
		return 7471
	case Perftest:
		return 18515
	case Fabtests:
		return 47592 // fi_pingpong's control port (its CM port is the same number)
	}
	return 7174
}

// Limits of what a run registers and how long it goes on; a peer that
// names more is refused.
const (
	// MaxSize is the largest message: rping's own limit (its -S).
	MaxSize = 65535
	// MinRpingSize is rping's smallest buffer (its "rdma-ping-N: " prefix
	// and the NUL).
	MinRpingSize = 26
	// MaxCount bounds ucmatose's count: each message has a receive posted
	// before the connection, and a buffer.
	MaxCount = 1024
	// MaxBytes bounds ucmatose's count × size.
	MaxBytes = 16 << 20
	// DefaultTimeout bounds a run, the CM's waits and the server's wait
	// for its peer included.
	DefaultTimeout = 60 * time.Second
)

// Defaults of count and size: the peer programs' own, but for rping's
// count (forever) which is 5 here.
const (
	DefaultRpingCount    = 5
	DefaultRpingSize     = 64
	DefaultUcmatoseCount = 10
	DefaultUcmatoseSize  = 100
)

// Config is one run. The zero Count and Size are the mode's defaults.
type Config struct {
	// Addr is the peer (client), or the address to listen on (server;
	// the unspecified address listens on every device). A zero port is
	// the mode's.
	Addr netip.AddrPort
	// Count is the pings or messages (perftest's iterations, its -n); a
	// server serves at most Count pings, and with 0 as many as the
	// client sends.
	Count int
	Size  int
	// Test and Op are perftest's test: bw or lat, and write, send or read
	// (ib_write_bw is bw write). Other modes leave them zero.
	Test verbsprobe.TestKind
	Op   verbsprobe.Operation
	// ToS is the client's ToS (rdma_set_option TOS); nil: the port's
	// default (grdma cm set). A server mirrors its client's.
	ToS *uint8
	// Device, when set, is the device the CM must choose: a run on
	// another fails, naming both.
	Device string
	// OnListen, when set, is called once a server listens (on Addr,
	// with the mode's port).
	OnListen func(netip.AddrPort)
	// Timeout bounds the whole run; 0 is DefaultTimeout.
	Timeout time.Duration
	// Sysfs names the device the CM chose and reads its GID table; the
	// zero FS is the host's.
	Sysfs sysfs.FS
	// Open opens the RDMA CM; nil: locator.OpenRDMACM.
	Open func() (*rdmacm.Channel, error)

	kernel func() (*kernel, error) // tests: a fake CM and fake devices
	// tests: fabtests' control connection
	ctrlDial   func(context.Context, netip.AddrPort) (net.Conn, error)
	ctrlListen func(netip.AddrPort) (net.Listener, error)
}

// Validate reports a Config the mode cannot run (the error names the
// limit); Run calls it.
func (cfg Config) Validate(m Mode, server bool) error {
	switch m {
	case Rping:
		if cfg.Size != 0 && (cfg.Size < MinRpingSize || cfg.Size > MaxSize) {
			return fmt.Errorf("rping size %d: rping takes %d to %d bytes", cfg.Size, MinRpingSize, MaxSize)
		}
		if cfg.Count < 0 {
			return fmt.Errorf("rping count %d: must not be negative", cfg.Count)
		}
	case Ucmatose:
		if cfg.Size < 0 || cfg.Size > MaxSize {
			return fmt.Errorf("ucmatose size %d: 1 to %d bytes", cfg.Size, MaxSize)
		}
		if cfg.Count < 0 || cfg.Count > MaxCount {
			return fmt.Errorf("ucmatose count %d: 1 to %d messages", cfg.Count, MaxCount)
		}
		c, s := cfg.withDefaults(m, server)
		if c*s > MaxBytes {
			return fmt.Errorf("ucmatose count %d × size %d: at most %d bytes each way", c, s, MaxBytes)
		}
	case Perftest:
		if err := cfg.validatePerftest(); err != nil {
			return err
		}
	case Fabtests:
		if cfg.Size < 0 || cfg.Size > MaxSize {
			return fmt.Errorf("fabtests size %d: 1 to %d bytes", cfg.Size, MaxSize)
		}
		if cfg.Count < 0 || cfg.Count > MaxFabtestsIters {
			return fmt.Errorf("fabtests iters %d: 1 to %d", cfg.Count, MaxFabtestsIters)
		}
	default:
		return fmt.Errorf("no peer protocol %q (have rping, ucmatose, perftest, fabtests)", m)
	}
	if cfg.Timeout < 0 {
		return fmt.Errorf("timeout %v: must not be negative", cfg.Timeout)
	}
	return nil
}

// withDefaults is the run's count and size.
func (cfg Config) withDefaults(m Mode, server bool) (count, size int) {
	count, size = cfg.Count, cfg.Size
	switch m {
	case Rping:
		if count == 0 && !server {
			count = DefaultRpingCount
		}
		if size == 0 {
			size = DefaultRpingSize
		}
	case Ucmatose:
		if count == 0 {
			count = DefaultUcmatoseCount
		}
		if size == 0 {
			size = DefaultUcmatoseSize
		}
	case Perftest:
		count, size = cfg.perftestDefaults()
	case Fabtests:
		if count == 0 {
			count = DefaultFabtestsIters
		}
		if size == 0 {
			size = DefaultFabtestsSize
		}
	}
	return count, size
}

// Role is the side of the connection a run took.
type Role string

// The roles.
const (
	Client Role = "client" // connects to the peer program's server
	Server Role = "server" // serves the peer program's client
)

// Result is a run's outcome.
type Result struct {
	Mode Mode
	Role Role
	// Device and Port are where the CM put the connection.
	Device string
	Port   uint32
	// CM is what the RDMA CM chose, and its steps' times.
	CM verbsprobe.CMInfo
	// Steps are the run's, in order: open or listen, resolve address and
	// route (client) or request (server), connect, establish, the
	// exchange (the mode's name), disconnect; the failed one last.
	Steps []verbsprobe.Step
	// Count is the pings or messages exchanged in full; Size their size.
	Count int
	Size  int
	// Test and Op are perftest's test (bw write, lat send, ...).
	Test verbsprobe.TestKind
	Op   verbsprobe.Operation
	// Measurement is what a perftest run measured on this side, as
	// grdma's own bw and lat tests report it (Gb/s; µs percentiles).
	Measurement *verbsprobe.Measurement
	// PeerVersion is the version perftest announced (unescaped: the peer
	// wrote it; at most 15 bytes of digits and dots).
	PeerVersion string
	// PeerReport is the bw report perftest's client sent a server (its
	// own figures, checked for sense); nil otherwise.
	PeerReport *PerftestReport
	// Bytes is the payload moved, both ways.
	Bytes uint64
	// Elapsed is the exchange's time (from the first message to the last
	// completion).
	Elapsed time.Duration
	// Sample is the peer's first message as text (rping's ping data, up
	// to its NUL), at most SampleLen bytes, unescaped: the peer wrote it.
	Sample string
	// Err is why the run failed (nil: it did not); it wraps the failed
	// step's *verbsprobe.StepError and, for the CM's steps,
	// *rdmacm.Error.
	Err error
}

// SampleLen bounds Result.Sample.
const SampleLen = 80

// OK reports whether the run succeeded.
func (r *Result) OK() bool { return r.Err == nil }

// Run runs mode m as role against, or for, the peer program.
func Run(ctx context.Context, m Mode, role Role, cfg Config) *Result {
	res := &Result{Mode: m, Role: role, Test: cfg.Test, Op: cfg.Op}
	res.CM.GIDIndex = -1
	if err := cfg.Validate(m, role == Server); err != nil {
		res.Err = err
		return res
	}
	if !cfg.Addr.IsValid() {
		if role == Client {
			res.Err = fmt.Errorf("%s client: no peer address", m)
			return res
		}
		cfg.Addr = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	if cfg.Addr.Port() == 0 {
		cfg.Addr = netip.AddrPortFrom(cfg.Addr.Addr(), m.Port())
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	s := &session{res: res}
	defer s.close()
	count, size := cfg.withDefaults(m, role == Server)
	switch {
	case m == Rping && role == Client:
		res.Err = rpingClient(ctx, s, cfg, count, size)
	case m == Rping:
		res.Err = rpingServer(ctx, s, cfg, count)
	case m == Ucmatose && role == Client:
		res.Err = ucmatoseClient(ctx, s, cfg, count, size)
	case m == Perftest && role == Client:
		res.Err = perftestClient(ctx, s, cfg, count, size)
	case m == Perftest:
		res.Err = perftestServer(ctx, s, cfg, count, size)
	case m == Fabtests && role == Client:
		res.Err = fabtestsClient(ctx, s, cfg, count, size)
	case m == Fabtests:
		res.Err = fabtestsServer(ctx, s, cfg, count, size)
	default:
		res.Err = ucmatoseServer(ctx, s, cfg, count, size)
	}
	return res
}
