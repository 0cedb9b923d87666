package cminterop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/spin"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/verbsprobe"
)

// perftest -R (ib_write_bw, ib_send_lat, ... with --rdma_cm): two RC
// connections on one port, a control connection whose SENDs carry the
// parameters (one message at a time each way, the client's first), and
// the data connection, made after the first handshake. See
// ../shared/reference/rdma-cm.md §7.4.

// PerftestVersion is the version this side announces: at least 5.70
// (perftest refuses older peers) and below 6.28, from which perftest
// negotiates its parameters in a message of its own (an embedded
// ibv_device_attr) that an older peer does without.
const PerftestVersion = "6.06"

// Layouts and limits of perftest's messages.
const (
	// PerftestVersionLen is the version message: NUL-padded text.
	PerftestVersionLen = 16
	// PerftestDestLen is struct pingpong_dest up to perftest 26.01; from
	// 26.04 it has 8 bytes more (PerftestDestLenLong), above the fields
	// used here.
	PerftestDestLen     = 56
	PerftestDestLenLong = 64
	// MinPerftestVersion is the oldest perftest that talks to this side
	// (perftest's own rule).
	MinPerftestVersion = 5.70
	// MaxPerftestSize is perftest's largest message (its MAX_SIZE).
	MaxPerftestSize = 8 << 20
	// MaxPerftestIters bounds the iterations (a lat run keeps a sample
	// of each).
	MaxPerftestIters = 1_000_000
	// MaxPerftestCycleBuffer and MaxPerftestCacheLine bound what a peer
	// may announce: a server registers max(size, cycle buffer), rounded
	// up to the cache line, for the client's RDMA WRITEs.
	MaxPerftestCycleBuffer = 1 << 20
	MaxPerftestCacheLine   = 4096
	// Perftest's defaults: 64 KiB × 5000 for bw write, 64 KiB × 1000 for
	// the other bw tests, 2 bytes × 1000 for lat.
	DefaultPerftestBWSize       = 65536
	DefaultPerftestLatSize      = 2
	DefaultPerftestWriteBWIters = 5000
	DefaultPerftestIters        = 1000
)

// This side's system data, as perftest announces its own: the page size
// and a cache line.
const (
	perftestCycleBuffer = 4096
	perftestCacheLine   = 64
)

// Control connection buffer: a receive slot large enough for any message
// (a longer one fails the receive), and the send slot after it.
const (
	ctrlRecvLen = 1024
	ctrlSendOff = ctrlRecvLen
	ctrlBufLen  = 2 * ctrlRecvLen
)

func (cfg Config) validatePerftest() error {
	switch cfg.Test {
	case verbsprobe.TestBandwidth, verbsprobe.TestLatency:
	default:
		return fmt.Errorf("perftest test %q: bw or lat", cfg.Test)
	}
	switch cfg.Op {
	case verbsprobe.OpWrite, verbsprobe.OpSend, verbsprobe.OpRead:
	default:
		return fmt.Errorf("perftest %s operation %q: write, send or read", cfg.Test, cfg.Op)
	}
	if cfg.Size < 0 || cfg.Size > MaxPerftestSize {
		return fmt.Errorf("perftest size %d: 1 to %d bytes (perftest's own limit)", cfg.Size, MaxPerftestSize)
	}
	if cfg.Count < 0 || cfg.Count > MaxPerftestIters {
		return fmt.Errorf("perftest iters %d: 1 to %d", cfg.Count, MaxPerftestIters)
	}
	return nil
}

// perftestDefaults are the iterations and size perftest takes for the
// test when not told (-n, -s).
func (cfg Config) perftestDefaults() (iters, size int) {
	iters, size = cfg.Count, cfg.Size
	if iters == 0 {
		iters = DefaultPerftestIters
		if cfg.Test == verbsprobe.TestBandwidth && cfg.Op == verbsprobe.OpWrite {
			iters = DefaultPerftestWriteBWIters
		}
	}
	if size == 0 {
		size = DefaultPerftestBWSize
		if cfg.Test == verbsprobe.TestLatency {
			size = DefaultPerftestLatSize
		}
	}
	return iters, size
}

// PerftestDest is perftest's handshake message (struct pingpong_dest),
// big-endian. Over rdma_cm only RKey and VAddr, of the data buffer, are
// used; the rest is informative.
type PerftestDest struct {
	LID, OutReads, QPN, PSN, RKey uint32
	VAddr                         uint64
	GID                           [16]byte
	SRQN, GIDIndex                uint32
}

// MarshalBinary is the message as perftest up to 26.01 sends it
// (PerftestDestLen bytes).
func (d PerftestDest) MarshalBinary() ([]byte, error) {
	b := make([]byte, PerftestDestLen)
	be := binary.BigEndian
	be.PutUint32(b[0:], d.LID)
	be.PutUint32(b[4:], d.OutReads)
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	be.PutUint32(b[52:], d.GIDIndex)
	return b, nil
}

// UnmarshalBinary decodes either layout: PerftestDestLen bytes, or
// PerftestDestLenLong (26.04 on, with a u64 at 32 that moves the GID and
// what follows by 8).
func (d *PerftestDest) UnmarshalBinary(b []byte) error {
	shift := 0
	switch len(b) {
	case PerftestDestLen:
	case PerftestDestLenLong:
		shift = 8
	default:
		return fmt.Errorf("perftest handshake of %d bytes; perftest's are %d (or %d from 26.04)", len(b), PerftestDestLen, PerftestDestLenLong)
	}
	be := binary.BigEndian
	d.LID, d.OutReads, d.QPN, d.PSN = be.Uint32(b[0:]), be.Uint32(b[4:]), be.Uint32(b[8:]), be.Uint32(b[12:])
	d.RKey, d.VAddr = be.Uint32(b[16:]), be.Uint64(b[24:])
	copy(d.GID[:], b[32+shift:48+shift])
	d.SRQN, d.GIDIndex = be.Uint32(b[48+shift:]), be.Uint32(b[52+shift:])
	return nil
}

// ParsePerftestVersion reads perftest's version message: exactly
// PerftestVersionLen bytes of "MAJOR.MINOR" text, NUL-padded; its number
// is what perftest compares (atof). A version below MinPerftestVersion
// is refused, as perftest refuses one.
func ParsePerftestVersion(b []byte) (string, float64, error) {
	if len(b) != PerftestVersionLen {
		return "", 0, fmt.Errorf("perftest version message of %d bytes; perftest's is %d", len(b), PerftestVersionLen)
	}
	text, _, ok := bytes.Cut(b, []byte{0})
	if !ok {
		return "", 0, errors.New("perftest version: no NUL in the 16 bytes")
	}
	if len(text) == 0 {
		return "", 0, errors.New("perftest version: empty")
	}
	for _, c := range text {
		if (c < '0' || c > '9') && c != '.' {
			return "", 0, fmt.Errorf("perftest version %q: digits and a dot expected", text)
		}
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return "", 0, fmt.Errorf("perftest version %q: %w", text, err)
	}
	if v < MinPerftestVersion {
		return string(text), v, fmt.Errorf("perftest version %s: perftest older than %.2f does not talk to newer ones", text, MinPerftestVersion)
	}
	return string(text), v, nil
}

// perftestVersionMsg is this side's version message.
func perftestVersionMsg() []byte {
	b := make([]byte, PerftestVersionLen)
	copy(b, PerftestVersion)
	return b
}

// PerftestReport is the bw report a perftest client sends its server
// (struct bw_report_data, each field a message of 8 bytes, big-endian):
// BWPeak and BWAvg in MB/s (2^20 bytes) unless the client ran with
// --report_gbits (Gb/s), MsgRate in millions a second.
type PerftestReport struct {
	Size, Iters            uint64
	BWPeak, BWAvg, MsgRate float64
}

// perftestReportFields is the report's message count.
const perftestReportFields = 5

func (r PerftestReport) fields() [perftestReportFields][]byte {
	var f [perftestReportFields][]byte
	for i, v := range []uint64{r.Size, r.Iters, math.Float64bits(r.BWPeak), math.Float64bits(r.BWAvg), math.Float64bits(r.MsgRate)} {
		f[i] = binary.BigEndian.AppendUint64(nil, v)
	}
	return f
}

func (r *PerftestReport) set(i int, b []byte) {
	v := binary.BigEndian.Uint64(b)
	switch i {
	case 0:
		r.Size = v
	case 1:
		r.Iters = v
	case 2:
		r.BWPeak = math.Float64frombits(v)
	case 3:
		r.BWAvg = math.Float64frombits(v)
	case 4:
		r.MsgRate = math.Float64frombits(v)
	}
}

// Check refuses a report that cannot be a measurement: a size or count
// out of perftest's bounds, figures that are not finite and positive or
// beyond any link (10 Tb/s).
func (r PerftestReport) Check() error {
	switch {
	case r.Size == 0 || r.Size > MaxPerftestSize:
		return fmt.Errorf("perftest's report: size %d, out of 1 to %d", r.Size, MaxPerftestSize)
	case r.Iters == 0 || r.Iters > MaxPerftestIters:
		return fmt.Errorf("perftest's report: %d iterations, out of 1 to %d", r.Iters, MaxPerftestIters)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"peak bandwidth", r.BWPeak}, {"average bandwidth", r.BWAvg}, {"message rate", r.MsgRate}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1.25e6 {
			return fmt.Errorf("perftest's report: %s %g is no measurement", f.name, f.v)
		}
	}
	return nil
}

// ctrl is the control connection: one receive posted at a time, one
// message each way at a time, the client's first in every exchange.
type ctrl struct {
	e      *endpoint
	client bool
	// mine is this side's handshake (zero until the data connection is
	// made), rem the peer's last: perftest takes the address and key of
	// its RDMA WRITEs and READs from the last handshake before the test,
	// which is not the same one in every test (ib_write_lat's is the one
	// after RTR), so every handshake carries them, as perftest's do.
	mine, rem PerftestDest
}

var ctrlNames = map[uint64]string{
	wrRecv: fmt.Sprintf("the receive of a perftest control message (%d bytes at most)", ctrlRecvLen),
	wrSend: "the SEND of a perftest control message",
}

func ctrlPrepare(e *endpoint) error {
	e.names = ctrlNames
	return e.postRecv(wrRecv, 0, ctrlRecvLen)
}

// recv waits for the peer's message, which must be one of the sizes
// allowed, and posts the next receive.
func (c ctrl) recv(ctx context.Context, what string, sizes ...int) ([]byte, error) {
	wc, err := c.e.completion(ctx, wrRecv, "perftest's "+what)
	if err != nil {
		return nil, err
	}
	n := int(wc.ByteLen)
	ok := false
	for _, s := range sizes {
		ok = ok || n == s
	}
	if wc.Opcode != uverbs.WCRecv || !ok {
		return nil, fmt.Errorf("perftest's %s: %d bytes (%v); perftest sends %v", what, n, wc.Opcode, sizes)
	}
	b := bytes.Clone(c.e.buf[:n])
	return b, c.e.postRecv(wrRecv, 0, ctrlRecvLen)
}

func (c ctrl) send(ctx context.Context, what string, b []byte) error {
	copy(c.e.buf[ctrlSendOff:], b)
	if err := c.e.post(uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{c.e.sge(ctrlSendOff, len(b))}}); err != nil {
		return fmt.Errorf("SEND of %s: %w", what, err)
	}
	_, err := c.e.completion(ctx, wrSend, "the SEND of "+what)
	return err
}

// xchg is one exchange (ctx_xchg_data): the client sends, then receives;
// the server receives, then sends (mine may look at what came).
func (c ctrl) xchg(ctx context.Context, what string, mine func(theirs []byte) []byte, sizes ...int) ([]byte, error) {
	if c.client {
		if err := c.send(ctx, what, mine(nil)); err != nil {
			return nil, err
		}
		return c.recv(ctx, what, sizes...)
	}
	theirs, err := c.recv(ctx, what, sizes...)
	if err != nil {
		return nil, err
	}
	return theirs, c.send(ctx, what, mine(theirs))
}

func fixed(b []byte) func([]byte) []byte { return func([]byte) []byte { return b } }

// handshake exchanges pingpong_dest messages (ctx_hand_shake).
func (c ctrl) handshake(ctx context.Context, what string, mine PerftestDest) (PerftestDest, error) {
	b, _ := mine.MarshalBinary()
	got, err := c.xchg(ctx, what, fixed(b), PerftestDestLen, PerftestDestLenLong)
	var d PerftestDest
	if err == nil {
		err = d.UnmarshalBinary(got)
	}
	return d, err
}

// hs is a handshake with this side's current dest; the peer's is kept.
func (c *ctrl) hs(ctx context.Context, what string) error {
	d, err := c.handshake(ctx, what, c.mine)
	if err == nil {
		c.rem = d
	}
	return err
}

// perftestSetup is what the first exchanges agreed: the peer's version,
// the cycle buffer and cache line (each side takes the larger), the MTU
// (the smaller).
type perftestSetup struct {
	version     string
	cycleBuffer int
	cacheLine   int
	mtu         ib.MTU
}

// setup exchanges the version, the system data and the MTU, checking
// what the peer announces against this side's limits.
func (c ctrl) setup(ctx context.Context, mtu ib.MTU) (perftestSetup, error) {
	var st perftestSetup
	b, err := c.xchg(ctx, "version", fixed(perftestVersionMsg()), PerftestVersionLen)
	if err != nil {
		return st, err
	}
	if st.version, _, err = ParsePerftestVersion(b); err != nil {
		return st, err
	}
	be := binary.BigEndian
	if b, err = c.xchg(ctx, "cycle buffer", fixed(be.AppendUint32(nil, perftestCycleBuffer)), 4); err != nil {
		return st, err
	}
	if v := int32(be.Uint32(b)); v < 1 || v > MaxPerftestCycleBuffer {
		return st, fmt.Errorf("perftest's cycle buffer %d: this side takes 1 to %d bytes", v, MaxPerftestCycleBuffer)
	} else {
		st.cycleBuffer = max(int(v), perftestCycleBuffer)
	}
	if b, err = c.xchg(ctx, "cache line size", fixed(be.AppendUint32(nil, perftestCacheLine)), 4); err != nil {
		return st, err
	}
	if v := int32(be.Uint32(b)); v < 1 || v > MaxPerftestCacheLine {
		return st, fmt.Errorf("perftest's cache line size %d: this side takes 1 to %d bytes", v, MaxPerftestCacheLine)
	} else {
		st.cacheLine = max(int(v), perftestCacheLine)
	}
	// The MTU: the ibv_mtu enum as a digit and a NUL.
	if mtu < ib.MTU256 || mtu > ib.MTU4096 {
		mtu = ib.MTU1024
	}
	if b, err = c.xchg(ctx, "MTU", fixed([]byte{'0' + byte(mtu), 0}), 2); err != nil {
		return st, err
	}
	if b[1] != 0 || b[0] < '0'+byte(ib.MTU256) || b[0] > '0'+byte(ib.MTU4096) {
		return st, fmt.Errorf("perftest's MTU %q: a digit from 1 to 5 and a NUL expected", b)
	}
	st.mtu = min(mtu, ib.MTU(b[0]-'0'))
	return st, nil
}

// dest is this side's handshake for the data connection's endpoint.
func dest(ep *endpoint, ci *verbsprobe.CMInfo) PerftestDest {
	d := PerftestDest{QPN: ep.qp.QP().QPN, RKey: ep.mr.RKey, VAddr: ep.mr.Addr, GID: ci.GID}
	if ci.GIDIndex >= 0 {
		d.GIDIndex = uint32(ci.GIDIndex)
	}
	return d
}

// perftestBuffer is what a server registers for the client's RDMA
// WRITEs: max(size, cycle buffer) rounded up to the cache line, as
// perftest's own server (which registers twice that, a send half it does
// not use here).
func perftestBuffer(size int, st perftestSetup) int {
	n := max(size, st.cycleBuffer)
	return (n + st.cacheLine - 1) / st.cacheLine * st.cacheLine
}

// Work request IDs of the data connection.
const (
	wrData     = 10
	wrDataRecv = 11
)

// Depths of the data connection: bw's window of outstanding RDMA
// WRITEs or READs, lat's receives posted ahead (the READs outstanding
// at once are outReads).
const (
	perftestWindow    = 128
	perftestLatRecvs  = 64
	perftestLatSendWR = 4
	perftestSendRecvs = 512 // ib_send_bw's receive queue (its -r default)
)

// perftestShape is the data endpoint's queue depths and buffer.
func perftestShape(cfg Config, iters, size int, st perftestSetup, server bool) (sendWR, recvWR uint32, buf int) {
	switch {
	case cfg.Test == verbsprobe.TestLatency && cfg.Op == verbsprobe.OpSend:
		return perftestLatSendWR, uint32(min(iters, perftestLatRecvs)), 2 * size
	case cfg.Test == verbsprobe.TestLatency && cfg.Op == verbsprobe.OpWrite:
		return perftestLatSendWR, 1, latWriteRecvOff(size, st) + size
	case cfg.Test == verbsprobe.TestBandwidth && cfg.Op == verbsprobe.OpSend && server:
		return 1, uint32(min(iters, perftestSendRecvs)), size
	case server: // the client's RDMA WRITEs or READs land here
		return 1, 1, perftestBuffer(size, st)
	case cfg.Test == verbsprobe.TestLatency: // lat read: one READ at a time
		return perftestLatSendWR, 1, size
	}
	return perftestWindow, 1, size
}

// perftestClient runs perftest's client against ib_write_bw -R or
// ib_send_lat -R (the server), as perftest's own client does.
func perftestClient(ctx context.Context, s *session, cfg Config, iters, size int) (err error) {
	res := s.res
	res.Size = size
	ctl := cfg
	ctl.ToS = nil // perftest's control connection keeps the port's ToS
	param := rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if err := s.dial(ctx, ctl, 2, 1, ctrlBufLen, param, ctrlPrepare); err != nil {
		return err
	}
	s.watch(ctx)
	c := ctrl{e: s.ep, client: true}
	var st perftestSetup
	if err := s.step("perftest setup", func() (string, error) {
		var err error
		st, err = c.setup(ctx, s.res.CM.PathMTU)
		res.PeerVersion = st.version
		if err != nil {
			return "", err
		}
		err = c.hs(ctx, "first handshake")
		return st.describe(), err
	}); err != nil {
		return err
	}
	// The data connection: perftest's server listens only once it has
	// answered the first handshake, so a REQ may meet REJECTED (nothing
	// listens) at first; perftest retries 10 times, 100 ms apart.
	sendWR, recvWR, buf := perftestShape(cfg, iters, size, st, false)
	dataParam := param
	if cfg.Op == verbsprobe.OpRead {
		dataParam.ResponderResources, dataParam.InitiatorDepth = outReads, outReads
	}
	var d *session
	defer func() {
		if d != nil {
			d.close()
			if d.res.Err != nil && err == nil {
				err = d.res.Err
			}
		}
	}()
	rejected := 0
	for {
		d = &session{res: &Result{}}
		d.res.CM.GIDIndex = -1
		err := d.dial(ctx, cfg, sendWR, recvWR, buf, dataParam, func(e *endpoint) error { return nil })
		var ce *rdmacm.Error
		if err == nil || !errors.As(err, &ce) || ce.Event != rdmacm.EventRejected || rejected == 9 {
			s.adopt(d, rejected)
			if err != nil {
				return err
			}
			break
		}
		rejected++
		d.close()
		d = nil
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	d.watch(ctx)
	if err := s.step("perftest handshakes", func() (string, error) {
		if err := c.dataHandshakes(ctx, d, cfg, size, st); err != nil {
			return "", err
		}
		return fmt.Sprintf("peer qpn %d, rkey %#x, vaddr %#x", c.rem.QPN, c.rem.RKey, c.rem.VAddr), nil
	}); err != nil {
		return err
	}
	name := fmt.Sprintf("%s %s", cfg.Test, cfg.Op)
	if cfg.Test == verbsprobe.TestBandwidth && cfg.Op == verbsprobe.OpSend {
		// ib_send_bw: the server posts its receives, a handshake, the
		// SENDs, the closing handshake; no reports.
		if err := s.step(name, func() (string, error) {
			if err := c.hs(ctx, "handshake before the SENDs"); err != nil {
				return "", err
			}
			m, err := streamBW(ctx, d.ep, cfg.Op, c.rem, iters, size)
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			err = c.hs(ctx, "closing handshake")
			return measured(m), err
		}); err != nil {
			return err
		}
	} else if cfg.Test == verbsprobe.TestBandwidth {
		if err := s.step(name, func() (string, error) {
			m, err := streamBW(ctx, d.ep, cfg.Op, c.rem, iters, size)
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			return measured(m), nil
		}); err != nil {
			return err
		}
		if err := s.step("perftest report", func() (string, error) {
			if err := c.hs(ctx, "handshake at the end"); err != nil {
				return "", err
			}
			m := res.Measurement
			mbs := float64(m.Bytes) / m.Elapsed.Seconds() / (1 << 20)
			rep := PerftestReport{Size: uint64(size), Iters: uint64(m.Iters), BWPeak: mbs, BWAvg: mbs, MsgRate: m.MsgRateMpps()}
			for _, f := range rep.fields() {
				// The server's own report is not used (perftest's does not
				// measure); only its length is checked.
				if _, err := c.xchg(ctx, "bw report", fixed(f), 8); err != nil {
					return "", err
				}
			}
			err := c.hs(ctx, "closing handshake")
			return fmt.Sprintf("%.2f MB/s sent to the server", mbs), err
		}); err != nil {
			return err
		}
	} else {
		if err := s.step(name, func() (string, error) {
			l := latSend{e: d.ep, size: size, iters: iters}
			if cfg.Op == verbsprobe.OpSend {
				if err := l.postRecvs(); err != nil {
					return "", err
				}
			}
			if err := c.hs(ctx, "handshake before the ping-pong"); err != nil {
				return "", err
			}
			var m *verbsprobe.Measurement
			var err error
			switch cfg.Op {
			case verbsprobe.OpRead:
				m, err = latRead(ctx, d.ep, c.rem, iters, size)
			case verbsprobe.OpWrite:
				m, err = latWrite(ctx, d.ep, c.rem, iters, size, latWriteRecvOff(size, st), true)
			default:
				m, err = l.run(ctx, true)
			}
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			if cfg.Op != verbsprobe.OpWrite { // ib_write_lat has no closing handshake
				err = c.hs(ctx, "closing handshake")
			}
			return measured(m), err
		}); err != nil {
			return err
		}
	}
	// perftest's client ends the data connection and waits for it; its
	// server destroys its IDs (a DREQ for the control connection).
	return s.hangUpBoth(ctx, d)
}

// perftestServer serves one perftest -R client (ib_write_bw -R IP,
// ib_send_lat -R IP): the sizes and iterations must be the client's.
func perftestServer(ctx context.Context, s *session, cfg Config, iters, size int) (err error) {
	res := s.res
	res.Size = size
	if err := s.accept(ctx, cfg, 2, 1, ctrlBufLen, ctrlPrepare); err != nil {
		return err
	}
	s.watch(ctx)
	c := ctrl{e: s.ep}
	var st perftestSetup
	d := &session{res: &Result{}}
	d.res.CM.GIDIndex = -1
	defer func() {
		d.close()
		if d.res.Err != nil && err == nil {
			err = d.res.Err
		}
	}()
	if err := s.step("perftest setup", func() (string, error) {
		var err error
		st, err = c.setup(ctx, s.res.CM.PathMTU)
		res.PeerVersion = st.version
		if err != nil {
			return "", err
		}
		if _, err := c.recv(ctx, "first handshake", PerftestDestLen, PerftestDestLenLong); err != nil {
			return "", err
		}
		// Listen for the data connection before the answer that tells
		// the client to connect.
		dcfg := cfg
		dcfg.OnListen = nil
		if err := d.listen(dcfg); err != nil {
			return "", err
		}
		b, _ := PerftestDest{}.MarshalBinary()
		return st.describe(), c.send(ctx, "first handshake", b)
	}); err != nil {
		s.adopt(d, 0)
		return err
	}
	sendWR, recvWR, buf := perftestShape(cfg, iters, size, st, true)
	err = d.accept(ctx, cfg, sendWR, recvWR, buf, func(*endpoint) error { return nil })
	s.adopt(d, 0)
	if err != nil {
		return err
	}
	d.watch(ctx)
	if err := s.step("perftest handshakes", func() (string, error) {
		if err := c.dataHandshakes(ctx, d, cfg, size, st); err != nil {
			return "", err
		}
		return fmt.Sprintf("peer qpn %d; this side's buffer %d bytes, rkey %#x", c.rem.QPN, buf, c.mine.RKey), nil
	}); err != nil {
		return err
	}
	name := fmt.Sprintf("%s %s", cfg.Test, cfg.Op)
	if cfg.Test == verbsprobe.TestBandwidth && cfg.Op == verbsprobe.OpSend {
		if err := s.step(name, func() (string, error) {
			r := bwRecv{e: d.ep, size: size, iters: iters}
			if err := r.postRecvs(); err != nil {
				return "", err
			}
			if err := c.hs(ctx, "handshake before the SENDs"); err != nil {
				return "", err
			}
			m, err := r.run(ctx)
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			err = c.hs(ctx, "closing handshake")
			return "received " + measured(m), err
		}); err != nil {
			return err
		}
	} else if cfg.Test == verbsprobe.TestBandwidth {
		if err := s.step(name, func() (string, error) {
			t0 := time.Now()
			if err := c.hs(ctx, "handshake at the end (the client's done)"); err != nil {
				return "", err
			}
			elapsed := time.Since(t0)
			var rep PerftestReport
			var mine PerftestReport
			for i := range perftestReportFields {
				_, err := c.xchg(ctx, "bw report", func(theirs []byte) []byte {
					rep.set(i, theirs)
					if i == 1 {
						mine = PerftestReport{Size: uint64(size), Iters: rep.Iters}
					}
					return mine.fields()[i]
				}, 8)
				if err != nil {
					return "", err
				}
			}
			if err := rep.Check(); err != nil {
				return "", err
			}
			if rep.Size != uint64(size) {
				return "", fmt.Errorf("the client's messages are %d bytes, this side's size %d: give the same size on both sides (size %d)", rep.Size, size, rep.Size)
			}
			res.PeerReport = &rep
			m := &verbsprobe.Measurement{Test: cfg.Test, Op: cfg.Op, Size: size, Iters: int(rep.Iters),
				Bytes: rep.Iters * uint64(size), Elapsed: elapsed}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			if err := c.hs(ctx, "closing handshake"); err != nil {
				return "", err
			}
			return fmt.Sprintf("the client reports %d × %d bytes, %.2f MB/s, %.4f Mmsg/s", rep.Iters, rep.Size, rep.BWAvg, rep.MsgRate), nil
		}); err != nil {
			return err
		}
	} else if cfg.Op == verbsprobe.OpWrite {
		if err := s.step(name, func() (string, error) {
			if err := c.hs(ctx, "handshake before the ping-pong"); err != nil {
				return "", err
			}
			m, err := latWrite(ctx, d.ep, c.rem, iters, size, latWriteRecvOff(size, st), false)
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			return measured(m), nil
		}); err != nil {
			return err
		}
	} else if cfg.Op == verbsprobe.OpRead {
		// The client reads this side's memory: nothing to do but wait
		// for its closing handshake.
		if err := s.step(name, func() (string, error) {
			if err := c.hs(ctx, "handshake before the RDMA READs"); err != nil {
				return "", err
			}
			t0 := time.Now()
			if err := c.hs(ctx, "closing handshake (the client's RDMA READs done)"); err != nil {
				return "", err
			}
			res.Elapsed = time.Since(t0)
			return "the client read this side's memory; no CPU work here", nil
		}); err != nil {
			return err
		}
	} else {
		if err := s.step(name, func() (string, error) {
			l := latSend{e: d.ep, size: size, iters: iters}
			if err := l.postRecvs(); err != nil {
				return "", err
			}
			if err := c.hs(ctx, "handshake before the ping-pong"); err != nil {
				return "", err
			}
			m, err := l.run(ctx, false)
			if err != nil {
				return "", err
			}
			res.Measurement, res.Count, res.Bytes, res.Elapsed = m, m.Iters, m.Bytes, m.Elapsed
			err = c.hs(ctx, "closing handshake")
			return measured(m), err
		}); err != nil {
			return err
		}
	}
	// perftest's client disconnects the data connection, then destroys
	// its control ID: this side answers both.
	return s.hangUpBoth(ctx, d)
}

func (st perftestSetup) describe() string {
	return fmt.Sprintf("perftest %s, cycle buffer %d, cache line %d, MTU %d", st.version, st.cycleBuffer, st.cacheLine, st.mtu.Bytes())
}

// adopt takes the data connection's steps into the run's (named "data
// …"; rejected is how many of its REQs met REJECTED first) and what the
// CM chose for it: the traffic's path, ToS included.
func (s *session) adopt(d *session, rejected int) {
	steps := renamed(d.res.Steps, "data ")
	if rejected > 0 {
		for i := range steps {
			if steps[i].Name == "data "+verbsprobe.CMStepConnect {
				steps[i].Detail += fmt.Sprintf(" (after %d REQs rejected: the server was not listening yet)", rejected)
			}
		}
	}
	s.res.Steps = append(s.res.Steps, steps...)
	if d.res.CM.Device != "" {
		s.res.CM = d.res.CM
		s.res.Device, s.res.Port = d.res.Device, d.res.Port
	}
	d.res.Steps = nil
}

func renamed(steps []verbsprobe.Step, prefix string) []verbsprobe.Step {
	out := make([]verbsprobe.Step, len(steps))
	for i, st := range steps {
		st.Name = prefix + st.Name
		if st.Err != nil {
			e := *st.Err
			e.Step = st.Name
			st.Err = &e
		}
		out[i] = st
	}
	return out
}

func measured(m *verbsprobe.Measurement) string {
	if l := m.Latency; l != nil {
		return fmt.Sprintf("%d exchanges of %d bytes: median %.2f µs, p99 %.2f µs", m.Iters, m.Size,
			float64(l.Median)/1e3, float64(l.P99)/1e3)
	}
	return fmt.Sprintf("%.3f Gb/s, %.4f Mmsg/s: %d × %d bytes in %v", m.BWGbps(), m.MsgRateMpps(), m.Iters, m.Size,
		m.Elapsed.Round(time.Microsecond))
}

// poll returns the completions that arrived, failing on an unsuccessful
// one; with none it yields, and looks at ctx now and then.
func poll(ctx context.Context, e *endpoint, wcs []uverbs.WC, empty *int) ([]uverbs.WC, error) {
	n := e.cq.Poll(wcs)
	for _, wc := range wcs[:n] {
		if wc.Status != uverbs.WCSuccess {
			return nil, fmt.Errorf("work request %d completed with %v", wc.WRID, wc.Status)
		}
	}
	if n == 0 {
		*empty++
		spin.Empty(*empty) // rxe: its work runs on this machine's CPUs
		if *empty%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if e.gone != nil {
				select {
				case <-e.gone:
					return nil, ErrPeerGone
				default:
				}
			}
			spin.Yield()
		}
	}
	return wcs[:n], nil
}

// streamBW streams iters RDMA WRITEs (or READs) of size bytes into (or
// from) the server's buffer with a window of perftestWindow outstanding.
func streamBW(ctx context.Context, e *endpoint, op verbsprobe.Operation, rem PerftestDest, iters, size int) (*verbsprobe.Measurement, error) {
	opcode, name := uverbs.WRRDMAWrite, "RDMA WRITE"
	switch op {
	case verbsprobe.OpRead:
		opcode, name = uverbs.WRRDMARead, "RDMA READ"
	case verbsprobe.OpSend:
		opcode, name = uverbs.WRSend, "SEND"
	}
	wr := uverbs.SendWR{ID: wrData, Opcode: opcode, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.sge(0, size)}, RemoteAddr: rem.VAddr, RKey: rem.RKey}
	wcs := make([]uverbs.WC, 64)
	posted, completed, empty := 0, 0, 0
	start := time.Now()
	for completed < iters {
		for posted-completed < perftestWindow && posted < iters {
			if err := e.qp.PostSend(wr); err != nil {
				return nil, fmt.Errorf("%s %d: %w", name, posted+1, err)
			}
			posted++
		}
		got, err := poll(ctx, e, wcs, &empty)
		if err != nil {
			return nil, fmt.Errorf("%ss (%d of %d done): %w", name, completed, iters, err)
		}
		completed += len(got)
	}
	return &verbsprobe.Measurement{Test: verbsprobe.TestBandwidth, Op: op, Size: size, Iters: completed,
		Bytes: uint64(completed) * uint64(size), Elapsed: time.Since(start)}, nil
}

// latSend is perftest's SEND ping-pong: the client sends first, each
// side answers what it received; iters messages each way, each exactly
// size bytes. The receives go to the buffer's first half, the sends from
// its second.
type latSend struct {
	e               *endpoint
	size, iters     int
	posted          int // receives posted
	unreaped, empty int
	wcs             []uverbs.WC
}

func (l *latSend) postRecv() error {
	l.posted++
	return l.e.postRecv(wrDataRecv, 0, l.size)
}

// postRecvs posts the first receives (perftest's receivers do before
// the last handshake).
func (l *latSend) postRecvs() error {
	for range min(l.iters, perftestLatRecvs) {
		if err := l.postRecv(); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for the peer's next message (reaping send completions
// meanwhile), checks its size and keeps the receives posted.
func (l *latSend) wait(ctx context.Context, what string) error {
	for {
		ws, err := poll(ctx, l.e, l.wcs, &l.empty)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		got := false
		for _, wc := range ws {
			if wc.Opcode != uverbs.WCRecv {
				l.unreaped--
				continue
			}
			if got {
				return fmt.Errorf("%s: two messages at once; perftest sends one at a time", what)
			}
			if int(wc.ByteLen) != l.size {
				return fmt.Errorf("%s: %d bytes; this side's size is %d: give the same size on both sides", what, wc.ByteLen, l.size)
			}
			got = true
			if l.posted < l.iters {
				if err := l.postRecv(); err != nil {
					return err
				}
			}
		}
		if got {
			return nil
		}
	}
}

// run plays the ping-pong. Each exchange is timed by one clock read (as
// perftest stamps its posts): the client's from one send to the next
// answer, the server's from one message to the next; halved, one way as
// perftest reports.
func (l *latSend) run(ctx context.Context, client bool) (*verbsprobe.Measurement, error) {
	e := l.e
	wr := uverbs.SendWR{ID: wrData, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{e.sge(l.size, l.size)}}
	l.wcs = make([]uverbs.WC, 16)
	samples := make([]time.Duration, 0, l.iters)
	send := func(i int) error {
		if err := e.qp.PostSend(wr); err != nil {
			return fmt.Errorf("SEND %d of %d: %w", i+1, l.iters, err)
		}
		l.unreaped++
		return nil
	}
	start := time.Now()
	prev := start
	for i := range l.iters {
		what := fmt.Sprintf("message %d of %d", i+1, l.iters)
		if client {
			if err := send(i); err != nil {
				return nil, err
			}
		}
		if err := l.wait(ctx, what); err != nil {
			return nil, err
		}
		t := time.Now()
		if client || i > 0 {
			samples = append(samples, t.Sub(prev)/2)
		}
		prev = t
		if !client {
			if err := send(i); err != nil {
				return nil, err
			}
		}
	}
	for l.unreaped > 0 {
		ws, err := poll(ctx, e, l.wcs, &l.empty)
		if err != nil {
			return nil, fmt.Errorf("the last SENDs: %w", err)
		}
		for _, wc := range ws {
			if wc.Opcode == uverbs.WCRecv {
				return nil, fmt.Errorf("a message more than the %d iterations", l.iters)
			}
			l.unreaped--
		}
	}
	m := &verbsprobe.Measurement{Test: verbsprobe.TestLatency, Op: verbsprobe.OpSend, Size: l.size,
		Iters: l.iters, Bytes: uint64(l.iters) * uint64(l.size), Elapsed: time.Since(start), Latency: verbsprobe.LatencyOf(samples)}
	return m, nil
}

// latRead times iters RDMA READs of size bytes from the server's buffer,
// one at a time; each sample is a whole READ (as perftest reports it).
func latRead(ctx context.Context, e *endpoint, rem PerftestDest, iters, size int) (*verbsprobe.Measurement, error) {
	wr := uverbs.SendWR{ID: wrData, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.sge(0, size)}, RemoteAddr: rem.VAddr, RKey: rem.RKey}
	wcs := make([]uverbs.WC, 4)
	samples := make([]time.Duration, 0, iters)
	empty := 0
	start := time.Now()
	prev := start
	for i := range iters {
		if err := e.qp.PostSend(wr); err != nil {
			return nil, fmt.Errorf("RDMA READ %d of %d: %w", i+1, iters, err)
		}
		for done := false; !done; {
			got, err := poll(ctx, e, wcs, &empty)
			if err != nil {
				return nil, fmt.Errorf("RDMA READ %d of %d: %w", i+1, iters, err)
			}
			done = len(got) > 0
		}
		t := time.Now()
		samples = append(samples, t.Sub(prev))
		prev = t
	}
	return &verbsprobe.Measurement{Test: verbsprobe.TestLatency, Op: verbsprobe.OpRead, Size: size, Iters: iters,
		Bytes: uint64(iters) * uint64(size), Elapsed: time.Since(start), Latency: verbsprobe.LatencyOf(samples)}, nil
}

// latWriteRecvOff is where ib_write_lat's peer writes in this side's
// buffer: after a send region of max(size, cycle buffer), as perftest
// lays out its own (the vaddr of its handshakes).
func latWriteRecvOff(size int, st perftestSetup) int { return max(size, st.cycleBuffer) }

// loadByte reads byte i of b, which the device writes behind Go's back,
// with an atomic load of the aligned word that holds it (aligned on the
// address: arm64 faults on an unaligned atomic load; the word stays in
// b's page, which the memory region maps whole).
func loadByte(b []byte, i int) byte {
	p := unsafe.Pointer(&b[i])
	off := uintptr(p) & 3
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], atomic.LoadUint32((*uint32)(unsafe.Add(p, -int(off)))))
	return w[off]
}

// latWrite is ib_write_lat's ping-pong: each side RDMA WRITEs size bytes
// into the other's buffer, the last byte counting the iterations (mod
// 256), and waits until the peer's write of the same count has landed in
// its own; the server writes first. Each sample is the time between two
// of this side's writes, halved (one way, as perftest reports).
func latWrite(ctx context.Context, e *endpoint, rem PerftestDest, iters, size, recvOff int, client bool) (*verbsprobe.Measurement, error) {
	wr := uverbs.SendWR{ID: wrData, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.sge(0, size)}, RemoteAddr: rem.VAddr, RKey: rem.RKey}
	last := recvOff + size - 1
	wcs := make([]uverbs.WC, 4)
	samples := make([]time.Duration, 0, iters)
	empty := 0
	start := time.Now()
	var prev time.Time
	for i := 1; i <= iters; i++ {
		// The client waits for the server's write i, the server (which
		// wrote first) for the client's write i-1.
		want := byte(i)
		if !client {
			want = byte(i - 1)
		}
		if client || i > 1 {
			for spins := 1; loadByte(e.buf, last) != want; spins++ {
				spin.Empty(spins)
				if spins%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return nil, fmt.Errorf("waiting for the peer's RDMA WRITE %d of %d: %w", i, iters, err)
					}
					if e.gone != nil {
						select {
						case <-e.gone:
							return nil, fmt.Errorf("waiting for the peer's RDMA WRITE %d of %d: %w", i, iters, ErrPeerGone)
						default:
						}
					}
					spin.Yield()
				}
			}
		}
		t := time.Now()
		if i > 1 {
			samples = append(samples, t.Sub(prev)/2)
		}
		prev = t
		e.buf[size-1] = byte(i)
		if err := e.qp.PostSend(wr); err != nil {
			return nil, fmt.Errorf("RDMA WRITE %d of %d: %w", i, iters, err)
		}
		for done := false; !done; {
			got, err := poll(ctx, e, wcs, &empty)
			if err != nil {
				return nil, fmt.Errorf("RDMA WRITE %d of %d: %w", i, iters, err)
			}
			done = len(got) > 0
		}
	}
	if !client {
		// The client's last write.
		for spins := 1; loadByte(e.buf, last) != byte(iters); spins++ {
			spin.Empty(spins)
			if spins%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("waiting for the peer's last RDMA WRITE: %w", err)
				}
				spin.Yield()
			}
		}
	}
	return &verbsprobe.Measurement{Test: verbsprobe.TestLatency, Op: verbsprobe.OpWrite, Size: size, Iters: iters,
		Bytes: uint64(iters) * uint64(size), Elapsed: time.Since(start), Latency: verbsprobe.LatencyOf(samples)}, nil
}

// bwRecv is ib_send_bw's server: iters receives of size bytes, kept
// posted (perftestSendRecvs ahead; the client's RNR retries wait for
// more), all into one slot.
type bwRecv struct {
	e           *endpoint
	size, iters int
	posted      int
}

func (r *bwRecv) postRecvs() error {
	for range min(r.iters, perftestSendRecvs) {
		if err := r.e.postRecv(wrDataRecv, 0, r.size); err != nil {
			return err
		}
		r.posted++
	}
	return nil
}

// run counts the SENDs that arrive, each exactly size bytes; the time
// is from the first to the last.
func (r *bwRecv) run(ctx context.Context) (*verbsprobe.Measurement, error) {
	wcs := make([]uverbs.WC, 64)
	empty, received := 0, 0
	var first time.Time
	for received < r.iters {
		got, err := poll(ctx, r.e, wcs, &empty)
		if err != nil {
			return nil, fmt.Errorf("SENDs (%d of %d received): %w", received, r.iters, err)
		}
		for _, wc := range got {
			if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != r.size {
				return nil, fmt.Errorf("SEND %d of %d: %d bytes (%v); this side's size is %d: give the same size on both sides", received+1, r.iters, wc.ByteLen, wc.Opcode, r.size)
			}
			if received == 0 {
				first = time.Now()
			}
			received++
			if r.posted < r.iters {
				if err := r.e.postRecv(wrDataRecv, 0, r.size); err != nil {
					return nil, err
				}
				r.posted++
			}
		}
	}
	return &verbsprobe.Measurement{Test: verbsprobe.TestBandwidth, Op: verbsprobe.OpSend, Size: r.size, Iters: received,
		Bytes: uint64(received) * uint64(r.size), Elapsed: time.Since(first)}, nil
}

// dataHandshakes are the four handshakes both sides make once the data
// connection is up, each carrying this side's buffer (for lat write, the
// part the peer writes into).
func (c *ctrl) dataHandshakes(ctx context.Context, d *session, cfg Config, size int, st perftestSetup) error {
	c.mine = dest(d.ep, &d.res.CM)
	if cfg.Test == verbsprobe.TestLatency && cfg.Op == verbsprobe.OpWrite {
		c.mine.VAddr += uint64(latWriteRecvOff(size, st))
	}
	for _, what := range []string{"handshake after the data connection", "data buffer handshake", "second data buffer handshake", "handshake after RTR"} {
		if err := c.hs(ctx, what); err != nil {
			return err
		}
	}
	return nil
}

// hangUpBoth ends the data connection d, then the control connection,
// keeping the data connection's last step.
func (s *session) hangUpBoth(ctx context.Context, d *session) error {
	derr := d.hangUp(ctx)
	s.res.Steps = append(s.res.Steps, renamed(d.res.Steps[len(d.res.Steps)-1:], "data ")...)
	if derr != nil {
		return derr
	}
	return s.hangUp(ctx)
}
