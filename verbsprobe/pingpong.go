package verbsprobe

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// ibv_rc_pingpong's exchange (rdma-core libibverbs/examples): the client
// writes its address, the server connects its queue pair and answers with
// its own, the client writes "done". An address is
// "LLLL:QQQQQQ:PPPPPP:GGGG…" (LID, QPN and PSN in hex, the GID as 32 hex
// digits of its bytes in order) and a NUL, 52 bytes.
const (
	pingpongAddressLen = len("0000:000000:000000:00000000000000000000000000000000") + 1
	pingpongDone       = "done\x00"
)

// PingpongAddress is one side's address in ibv_rc_pingpong's exchange.
type PingpongAddress struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID gid.GID // zero when the side was given no -g
}

// MarshalBinary returns the 52 bytes ibv_rc_pingpong writes.
func (a PingpongAddress) MarshalBinary() ([]byte, error) {
	if a.QPN > 0xffffff || a.PSN > 0xffffff {
		return nil, fmt.Errorf("QPN %#x or PSN %#x over 24 bits", a.QPN, a.PSN)
	}
	b := fmt.Appendf(nil, "%04x:%06x:%06x:%s", a.LID, a.QPN, a.PSN, hex.EncodeToString(a.GID[:]))
	return append(b, 0), nil
}

// UnmarshalBinary parses ibv_rc_pingpong's 52 bytes, strictly: a peer
// that sends anything else is not ibv_rc_pingpong.
func (a *PingpongAddress) UnmarshalBinary(b []byte) error {
	bad := func(why string) error {
		return fmt.Errorf("not an ibv_rc_pingpong address (%s): %q", why, b)
	}
	if len(b) != pingpongAddressLen || b[len(b)-1] != 0 {
		return bad(fmt.Sprintf("want %d bytes ending in NUL", pingpongAddressLen))
	}
	fields := bytes.Split(b[:len(b)-1], []byte(":"))
	if len(fields) != 4 || len(fields[0]) != 4 || len(fields[1]) != 6 || len(fields[2]) != 6 || len(fields[3]) != 32 {
		return bad("want LLLL:QQQQQQ:PPPPPP:32 hex digits")
	}
	var n [3]uint64
	for i := range n {
		v, err := strconv.ParseUint(string(fields[i]), 16, 32)
		if err != nil {
			return bad(err.Error())
		}
		n[i] = v
	}
	var g gid.GID
	if _, err := hex.Decode(g[:], fields[3]); err != nil {
		return bad(err.Error())
	}
	*a = PingpongAddress{LID: uint16(n[0]), QPN: uint32(n[1]), PSN: uint32(n[2]), GID: g}
	return nil
}

// pingpongAddress is the Conn's address in ibv_rc_pingpong's exchange.
func pingpongAddress(c *Conn) PingpongAddress {
	a := PingpongAddress{LID: c.dev.port.LID, QPN: c.QPN(), PSN: c.psn}
	if c.dev.addr.GIDIndex >= 0 {
		a.GID = c.dev.addr.GID
	}
	return a
}

// takePingpong records an ibv_rc_pingpong peer's address.
func (x *peerSide) takePingpong(d *Device, b []byte) (string, error) {
	var a PingpongAddress
	if err := a.UnmarshalBinary(b); err != nil {
		return "", x.s.peerError("reading the address of", err)
	}
	tool := pingpongTool(x.s.test.Kind)
	if d.port.LinkLayer == ib.LinkLayerEthernet && a.GID.InterfaceID() == 0 {
		return "", x.s.peerError("connecting to", fmt.Errorf(
			"the %s peer sent no GID: on RoCE run it with -g INDEX (`grdma gid show DEV type v2 ipv4 -q` gives one)", tool))
	}
	remote := Endpoint{Ifname: tool, LinkLayer: d.port.LinkLayer, GIDIndex: -1, GID: a.GID,
		LID: a.LID, QPN: a.QPN, PSN: a.PSN, RdAtomic: 1}
	if a.GID.InterfaceID() != 0 {
		remote.GIDIndex = 0 // unknown; the GID is what counts
	}
	return x.takeRemote(d, remote)
}

// sendAddress writes the Conn's address; its receives are posted (the
// test armed it).
func (x *peerSide) sendAddress(c *Conn) error {
	mine, err := pingpongAddress(c).MarshalBinary()
	if err != nil {
		return err
	}
	return x.s.write(mine)
}

// pingpongClient is the client of an ibv_rc_pingpong server.
type pingpongClient struct{ peerSide }

func (x *pingpongClient) Steps() ExchangeSteps { return ExchangeSteps{Trade: StepConnect} }

func (x *pingpongClient) Begin(ctx context.Context, _ *Device) (context.Context, string, error) {
	return ctx, "", nil
}

// Trade is the client's half of ibv_rc_pingpong's exchange: its address,
// the server's, "done".
func (x *pingpongClient) Trade(ctx context.Context, c *Conn) (Path, string, error) {
	s := x.s
	if err := udSizeFits(c.dev, s.test); err != nil {
		return Path{}, "", err
	}
	if err := s.dial(ctx); err != nil {
		return Path{}, "", err
	}
	if err := x.sendAddress(c); err != nil {
		return Path{}, "", err
	}
	theirs := make([]byte, pingpongAddressLen)
	if err := s.readFull(theirs, "reading the address of"); err != nil {
		return Path{}, "", err
	}
	detail, err := x.takePingpong(c.dev, theirs)
	if err != nil {
		return Path{}, "", err
	}
	return peerPath(c.dev, s.test, s.remote, c.shape.RdAtomic), detail, s.write([]byte(pingpongDone))
}

func (x *pingpongClient) Ready(context.Context, *Conn) (string, error)    { return "", nil }
func (x *pingpongClient) Finish(context.Context, *Result) (string, error) { return "", nil }

// pingpongServer is the server of an ibv_rc_pingpong client whose address
// arrived: answered with the listener's size and iters.
type pingpongServer struct {
	peerSide
	arr    *arrival
	cfg    ServeConfig
	cancel context.CancelFunc
}

func (x *pingpongServer) Steps() ExchangeSteps {
	return ExchangeSteps{Begin: StepAccept, Ready: StepWelcome}
}

// Begin takes the client's address, read by acceptFirst.
func (x *pingpongServer) Begin(ctx context.Context, d *Device) (context.Context, string, error) {
	s := x.s
	s.test = x.cfg.pingpongTest()
	ctx, x.cancel = withBudget(ctx, x.cfg.Limits, s.test, s.timeout)
	s.host = x.arr.conn.RemoteAddr().String()
	x.peer.Host, x.peer.Test = s.host, &s.test
	s.attachReader(ctx, x.arr.conn, x.arr.rd)
	if err := udSizeFits(d, s.test); err != nil {
		return ctx, "", err
	}
	detail, err := x.takePingpong(d, x.arr.pingpong)
	if err != nil {
		return ctx, "", err
	}
	return ctx, detail + ", an " + pingpongTool(s.test.Kind) + " client" + refusedNote(x.arr.refused), nil
}

func (x *pingpongServer) Trade(_ context.Context, c *Conn) (Path, string, error) {
	return peerPath(c.dev, x.s.test, x.s.remote, c.shape.RdAtomic), "", nil
}

// Ready is the server's second half: receives posted and the queue pair
// connected, it answers with its address and takes "done".
func (x *pingpongServer) Ready(_ context.Context, c *Conn) (string, error) {
	s := x.s
	if err := x.sendAddress(c); err != nil {
		return "", err
	}
	done := make([]byte, len(pingpongDone))
	if err := s.readFull(done, "waiting for the done of"); err != nil {
		return "", err
	}
	if string(done) != pingpongDone {
		return "", s.peerError("waiting for the done of", fmt.Errorf("got %q, want %q", done, pingpongDone))
	}
	return fmt.Sprintf("qpn %#06x, psn %#06x", c.QPN(), c.psn), nil
}

func (x *pingpongServer) Finish(context.Context, *Result) (string, error) { return "", nil }

func (x *pingpongServer) Close() error {
	if x.cancel != nil {
		x.cancel()
	}
	return x.peerSide.Close()
}

// write writes b within the timeout.
func (s *session) write(b []byte) error {
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.conn.Write(b); err != nil {
		return s.peerError("writing to", err)
	}
	return nil
}

// readFull reads len(b) bytes within the timeout.
func (s *session) readFull(b []byte, doing string) error {
	s.conn.SetReadDeadline(time.Now().Add(s.timeout))
	if _, err := io.ReadFull(s.rd, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errPeerClosed
		}
		return s.peerError(doing, err)
	}
	return nil
}

// pingpong runs ibv_rc_pingpong's loop: each side sends when its last
// SEND and a RECV have completed; the client sends first. An exchange is
// a SEND each way.
func (t *traffic) pingpong() (string, error) {
	s := t.e.link
	test := t.e.test
	c := t.e.conn
	m := c.mr
	send := uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{m.sge(partSource)}}
	if c.ud() {
		clear(m.region(partSource)) // what ibv_ud_pingpong -c checks: zeros at each page
		c.udSend(&send)
	} else {
		m.region(partSource)[0] = 0x7b // what ibv_rc_pingpong sends
	}
	recv := uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{m.sge(partTarget)}}
	pl := t.newPoller(true)
	doing := fmt.Sprintf("exchanging with the %s peer (its -n and -s must equal iters %d and size %d)",
		pingpongTool(test.Kind), test.Iters, test.Size)
	var rec latencyRecorder
	pending := wrRecv
	scnt, rcnt := 0, 0
	start := time.Now()
	lastSend := start
	if s.role == RoleClient {
		if err := t.qp.PostSend(send); err != nil {
			return "", err
		}
		pending |= wrSend
	}
	for rcnt < test.Iters || scnt < test.Iters {
		wcs, err := pl.poll(doing)
		if err != nil {
			return "", fmt.Errorf("after %d sent and %d received: %w", scnt, rcnt, err)
		}
		for _, wc := range wcs {
			switch wc.WRID {
			case wrSend:
				scnt++
			case wrRecv:
				rcnt++
				if err := t.qp.PostRecv(recv); err != nil {
					return "", err
				}
			default:
				return "", &UnexpectedCompletionError{WRID: wc.WRID, Problem: "not a SEND or RECV of ibv_rc_pingpong's loop"}
			}
			pending &^= wc.WRID
			if scnt < test.Iters && pending == 0 {
				now := time.Now()
				if s.role == RoleClient {
					rec.add((now.Sub(lastSend)) / 2)
				}
				lastSend = now
				if err := t.qp.PostSend(send); err != nil {
					return "", err
				}
				pending = wrRecv | wrSend
			}
		}
	}
	elapsed := time.Since(start)
	meas := Measurement{Test: test.Kind, Size: test.Size, Iters: test.Iters, Bytes: 2 * uint64(test.Size) * uint64(test.Iters),
		Elapsed: elapsed, Latency: rec.stats()}
	t.e.measured(meas)
	return fmt.Sprintf("%d bytes in %.2f seconds = %.2f Mbit/sec; %d iters in %.2f seconds = %.2f usec/iter",
		meas.Bytes, elapsed.Seconds(), float64(meas.Bytes)*8/float64(elapsed.Microseconds()), test.Iters, elapsed.Seconds(),
		float64(elapsed.Microseconds())/float64(test.Iters)), nil
}

// foreignAnswer recognises a server that answers a hello with something
// other than the grdma protocol's JSON: an ibv_rc_pingpong server sends
// its 52-byte address, which is named as such however its bytes arrive
// (together, or in pieces). nil when the answer is JSON, or none came
// (receive says why).
func (s *session) foreignAnswer(doing string) error {
	s.conn.SetReadDeadline(time.Now().Add(s.timeout))
	first, err := s.rd.Peek(1)
	switch {
	case isTimeout(err):
		return s.peerError(doing, err) // no answer: receive would wait again
	case err != nil || first[0] == '{':
		return nil
	}
	b := make([]byte, pingpongAddressLen)
	n, _ := io.ReadFull(s.rd, b)
	var a PingpongAddress
	if n == len(b) && a.UnmarshalBinary(b) == nil {
		return &PeerError{Host: s.host, Doing: doing, Err: errors.New(
			"the peer answered with an ibv_rc_pingpong address: it is an ibv_rc_pingpong server, not a grdma probe listener (give pingpong to talk to it)")}
	}
	return &PeerError{Host: s.host, Doing: doing, Err: fmt.Errorf(
		"not a grdma probe listener: it answered %.60q (ibv_rc_pingpong and perftest servers use port %d too: give pingpong to talk to ibv_rc_pingpong)", b[:n], DefaultPeerPort)}
}
