package cminterop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
)

// libfabric's fi_pingpong (libfabric-bin; util/pingpong.c) with -e msg:
// a TCP control connection (the server's port 47592) carries the
// server's endpoint name (its RDMA CM address), a sync before the
// exchange ("q", "a"), and the client's count of messages received
// after it ("cnt ok"); the data goes over an RC connection made through
// the RDMA CM. libfabric's verbs provider puts a one-byte header (the
// length of the application's data, 0 for fi_pingpong) in the CM's
// private data both ways; grdma's zeroed private data reads the same.

// Limits and defaults of fabtests runs (fi_pingpong's -I and -S).
const (
	// DefaultFabtestsIters and DefaultFabtestsSize are fi_pingpong's.
	DefaultFabtestsIters = 10
	DefaultFabtestsSize  = 64
	// MaxFabtestsIters bounds iters.
	MaxFabtestsIters = 1 << 20
	// FabtestsNameMax is the longest endpoint name taken from a server:
	// a sockaddr_in6 is 28 bytes (fi_pingpong itself allows 1024).
	FabtestsNameMax = 128
	// fabtestsCtrlMsg is fi_pingpong's smallest receive (PP_MAX_CTRL_MSG).
	fabtestsCtrlMsg = 64
	// fabtestsCountLen is the count message's length (PP_MSG_LEN_CNT).
	fabtestsCountLen = 10
)

// libfabric's address formats (enum fi_addr_format) of the names sent.
const (
	fiSockaddrIn  = 2
	fiSockaddrIn6 = 3
)

// The control messages, with their NULs as fi_pingpong sends them.
var (
	fabtestsSyncQ   = []byte("q\x00")
	fabtestsSyncA   = []byte("a\x00")
	fabtestsCountOK = []byte("cnt ok\x00")
	fabtestsFin     = []byte("fin\x00")
)

// FabtestsName is a server's endpoint name as fi_pingpong sends it on
// its control connection: the name's length (big-endian 32 bits), the
// address format (32 bits, the host's order: little-endian here), and
// the name, a struct sockaddr_in or sockaddr_in6.
type FabtestsName struct {
	Addr netip.AddrPort
}

// MarshalBinary is the name as fi_pingpong's server sends it.
func (n FabtestsName) MarshalBinary() ([]byte, error) {
	a := n.Addr.Addr().Unmap()
	var sa []byte
	format := uint32(fiSockaddrIn)
	if a.Is4() {
		sa = make([]byte, 16)
		binary.LittleEndian.PutUint16(sa, 2) // AF_INET
		b := a.As4()
		copy(sa[4:], b[:])
	} else {
		format = fiSockaddrIn6
		sa = make([]byte, 28)
		binary.LittleEndian.PutUint16(sa, 10) // AF_INET6
		b := a.As16()
		copy(sa[8:], b[:])
		binary.NativeEndian.PutUint32(sa[24:], scopeID(n.Addr.Addr().Zone()))
	}
	binary.BigEndian.PutUint16(sa[2:], n.Addr.Port())
	out := binary.BigEndian.AppendUint32(nil, uint32(len(sa)))
	out = binary.LittleEndian.AppendUint32(out, format)
	return append(out, sa...), nil
}

// scopeID is an IPv6 zone as a sockaddr_in6's scope ID: a number, or an
// interface's name (0 when there is none).
func scopeID(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}

// readFabtestsName reads a server's name: a length over FabtestsNameMax,
// or a name that is not an IPv4 or IPv6 socket address, is refused
// before anything is allocated for it.
func readFabtestsName(r io.Reader) (FabtestsName, error) {
	var n FabtestsName
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return n, fmt.Errorf("the server's endpoint name: %w", err)
	}
	l := binary.BigEndian.Uint32(head[:])
	if l > FabtestsNameMax {
		return n, fmt.Errorf("the server names an endpoint name of %d bytes; at most %d (a socket address) are taken", l, FabtestsNameMax)
	}
	sa := make([]byte, l)
	if _, err := io.ReadFull(r, sa); err != nil {
		return n, fmt.Errorf("the server's endpoint name: %w", err)
	}
	format := binary.LittleEndian.Uint32(head[4:])
	switch {
	case format == fiSockaddrIn && l >= 8 && binary.LittleEndian.Uint16(sa) == 2:
		n.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), binary.BigEndian.Uint16(sa[2:]))
	case format == fiSockaddrIn6 && l >= 28 && binary.LittleEndian.Uint16(sa) == 10:
		a := netip.AddrFrom16([16]byte(sa[8:24]))
		if scope := binary.NativeEndian.Uint32(sa[24:]); scope != 0 {
			a = a.WithZone(strconv.FormatUint(uint64(scope), 10)) // a link-local address's interface
		}
		n.Addr = netip.AddrPortFrom(a, binary.BigEndian.Uint16(sa[2:]))
	default:
		return n, fmt.Errorf("the server's endpoint name (format %d, %d bytes) is not an IPv4 or IPv6 socket address: is it fi_pingpong -e msg -p verbs?", format, l)
	}
	return n, nil
}

// fabtestsCount is the client's count message: the decimal count,
// NUL-padded to 10 bytes.
func fabtestsCount(n int) []byte {
	b := make([]byte, fabtestsCountLen)
	copy(b, strconv.Itoa(n))
	return b
}

// parseFabtestsCount reads a count message: digits, then NULs.
func parseFabtestsCount(b []byte) (int, error) {
	s := b
	if i := bytes.IndexByte(b, 0); i >= 0 {
		s = b[:i]
	}
	n, err := strconv.Atoi(string(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("the client's count message %q is not a count", sample(b))
	}
	return n, nil
}

// ctrlExpect reads len(want) bytes and checks them.
func ctrlExpect(c net.Conn, want []byte, what string) error {
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("%s on the control connection: %w", what, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s on the control connection: %q, want %q", what, sample(got), sample(want))
	}
	return nil
}

// ctrlCtx closes c when ctx ends, so its reads and writes end too; the
// returned function stops that.
func ctrlCtx(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// fabtestsNames name the work requests in errors.
var fabtestsNames = map[uint64]string{
	wrRecv: "the receive of a fi_pingpong message (a longer message fails it: fi_pingpong's -S larger than size?)",
	wrSend: "the SEND of a fi_pingpong message",
}

// Buffer layout of a fabtests endpoint: the receive, then the send.
func fabtestsBufs(size int) (recvLen, sendOff, total int) {
	recvLen = max(size, fabtestsCtrlMsg)
	return recvLen, recvLen, 2 * recvLen
}

// fabtestsClient runs fi_pingpong's client against fi_pingpong -e msg's
// server: iters messages of size bytes, each answered.
func fabtestsClient(ctx context.Context, s *session, cfg Config, iters, size int) error {
	res := s.res
	res.Size = size
	var ctrl net.Conn
	var name FabtestsName
	if err := s.step("fabtests control", func() (string, error) {
		var err error
		if ctrl, err = cfg.dialCtrl(ctx, cfg.Addr); err != nil {
			return "", fmt.Errorf("fi_pingpong's control connection to %s: %w (is fi_pingpong -e msg -p verbs running there?)", cfg.Addr, err)
		}
		stop := ctrlCtx(ctx, ctrl)
		defer stop()
		if name, err = readFabtestsName(ctrl); err != nil {
			return "", err
		}
		if name.Addr.Port() == 0 {
			return "", fmt.Errorf("the server's endpoint name %s has no port to connect to", name.Addr)
		}
		if name.Addr.Addr().IsUnspecified() {
			// A server listening on every address: connect to the one its
			// control port answered on.
			name.Addr = netip.AddrPortFrom(cfg.Addr.Addr(), name.Addr.Port())
		}
		return "endpoint " + name.Addr.String(), nil
	}); err != nil {
		return err
	}
	defer ctrl.Close()
	stop := ctrlCtx(ctx, ctrl)
	defer stop()
	recvLen, sendOff, total := fabtestsBufs(size)
	dcfg := cfg
	dcfg.Addr = name.Addr
	// libfabric's verbs provider connects with responder resources and
	// depth (it offers RDMA) and retries 7 times for RNR.
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if err := s.dial(ctx, dcfg, 4, 4, total, param, fabtestsPrepare(recvLen)); err != nil {
		return err
	}
	s.watch(ctx)
	e := s.ep
	if err := s.step(string(Fabtests), func() (string, error) {
		if _, err := ctrl.Write(fabtestsSyncQ); err != nil {
			return "", fmt.Errorf("sync: %w", err)
		}
		if err := ctrlExpect(ctrl, fabtestsSyncA, "sync"); err != nil {
			return "", err
		}
		fill(e.buf[sendOff:sendOff+size], 0)
		t0 := time.Now()
		for i := 0; i < iters; i++ {
			if err := fabtestsSend(ctx, e, sendOff, size); err != nil {
				return "", fmt.Errorf("message %d: %w", i, err)
			}
			n, err := fabtestsRecv(ctx, e, recvLen)
			if err != nil {
				return "", fmt.Errorf("message %d's answer: %w", i, err)
			}
			if n != size {
				return "", fmt.Errorf("message %d's answer has %d bytes, not %d: fi_pingpong's -S must be size", i, n, size)
			}
			res.Count++
			res.Bytes += 2 * uint64(size)
		}
		res.Elapsed = time.Since(t0)
		if _, err := ctrl.Write(fabtestsCount(res.Count)); err != nil {
			return "", fmt.Errorf("count: %w", err)
		}
		if err := ctrlExpect(ctrl, fabtestsCountOK, "the server's acknowledgement of the count"); err != nil {
			return "", err
		}
		if err := fabtestsFinish(ctx, e, sendOff, recvLen); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d messages of %d bytes each way", res.Count, size), nil
	}); err != nil {
		return err
	}
	ctrl.Close()
	return s.hangUp(ctx)
}

// fabtestsServer serves one fi_pingpong -e msg client: it listens on
// the RDMA CM and on the control port, sends its endpoint name, and
// answers iters messages with messages of the size received.
func fabtestsServer(ctx context.Context, s *session, cfg Config, iters, size int) error {
	res := s.res
	// fi_pingpong's client sends its -S nowhere: the server takes any
	// message up to MaxSize, and answers with one as long.
	recvLen, sendOff, total := fabtestsBufs(MaxSize)
	// The CM listens on the same port number as the control connection
	// (the RDMA CM's port space is its own).
	ccfg := cfg
	ccfg.OnListen = nil
	if err := s.listen(ccfg); err != nil {
		return err
	}
	var ctrl net.Conn
	if err := s.step("fabtests control", func() (string, error) {
		l, err := cfg.listenCtrl(cfg.Addr)
		if err != nil {
			return "", fmt.Errorf("fi_pingpong's control port %s: %w", cfg.Addr, err)
		}
		defer l.Close()
		if cfg.OnListen != nil {
			cfg.OnListen(cfg.Addr)
		}
		stop := context.AfterFunc(ctx, func() { l.Close() })
		defer stop()
		// A TCP client that goes away without connecting over the RDMA
		// CM (a port scan, a health check) gives the port back to the
		// next: one stray client must not spend the run.
		strays := 0
		for {
			c, detail, err := fabtestsCtrlClient(ctx, s, l, cfg.Addr)
			if errors.Is(err, errStrayClient) {
				strays++
				continue
			}
			if err != nil {
				return "", err
			}
			ctrl = c
			if strays > 0 {
				detail += fmt.Sprintf(" (after %d TCP clients that left without connecting)", strays)
			}
			return detail, nil
		}
	}); err != nil {
		return err
	}
	defer ctrl.Close()
	stop := ctrlCtx(ctx, ctrl)
	defer stop()
	if err := s.accept(ctx, cfg, 4, 4, total, fabtestsPrepare(recvLen)); err != nil {
		return err
	}
	s.watch(ctx)
	e := s.ep
	if err := s.step(string(Fabtests), func() (string, error) {
		if err := ctrlExpect(ctrl, fabtestsSyncQ, "sync"); err != nil {
			return "", err
		}
		if _, err := ctrl.Write(fabtestsSyncA); err != nil {
			return "", fmt.Errorf("sync: %w", err)
		}
		fill(e.buf[sendOff:sendOff+recvLen], 0)
		var t0 time.Time
		for i := 0; i < iters; i++ {
			n, err := fabtestsRecv(ctx, e, recvLen)
			if err != nil {
				return "", fmt.Errorf("message %d: %w (fi_pingpong's -I must be iters, %d)", i, err, iters)
			}
			if cfg.Size != 0 && n != cfg.Size {
				return "", fmt.Errorf("message %d has %d bytes, not size %d: fi_pingpong's -S must be size", i, n, cfg.Size)
			}
			if i == 0 {
				t0 = time.Now()
				res.Size = n
			}
			if err := fabtestsSend(ctx, e, sendOff, n); err != nil {
				return "", fmt.Errorf("message %d's answer: %w", i, err)
			}
			res.Count++
			res.Bytes += 2 * uint64(n)
		}
		if !t0.IsZero() {
			res.Elapsed = time.Since(t0)
		}
		b := make([]byte, fabtestsCountLen)
		if _, err := io.ReadFull(ctrl, b); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return "", fmt.Errorf("the client's count on the control connection: %w (fi_pingpong's -I must be iters, %d)", err, iters)
		}
		n, err := parseFabtestsCount(b)
		if err != nil {
			return "", err
		}
		if n != res.Count {
			return "", fmt.Errorf("the client counts %d answers, this side sent %d: fi_pingpong's -I must be iters", n, res.Count)
		}
		if _, err := ctrl.Write(fabtestsCountOK); err != nil {
			return "", fmt.Errorf("count: %w", err)
		}
		if err := fabtestsFinish(ctx, e, sendOff, recvLen); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d messages of %d bytes answered", res.Count, res.Size), nil
	}); err != nil {
		return err
	}
	ctrl.Close()
	return s.hangUp(ctx)
}

// errStrayClient is a control client that left, or spoke first,
// before it connected over the RDMA CM: not fi_pingpong.
var errStrayClient = errors.New("a control client left before connecting over the RDMA CM")

// fabtestsCtrlClient takes one control client from l: it sends the
// endpoint name and waits for the client's connection request on the
// CM, which it keeps in s for accept. A client that closes the control
// connection or writes on it first is errStrayClient, its connection
// closed.
func fabtestsCtrlClient(ctx context.Context, s *session, l net.Listener, addr netip.AddrPort) (_ net.Conn, detail string, err error) {
	c, err := l.Accept()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, "", fmt.Errorf("waiting for fi_pingpong's client: %w", err)
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if addr.Addr().IsUnspecified() {
		// The name must be an address the client can connect to: the
		// one its control connection came to.
		la, ok := c.LocalAddr().(*net.TCPAddr)
		if !ok {
			return nil, "", fmt.Errorf("the control connection's local address %v", c.LocalAddr())
		}
		ip, _ := netip.AddrFromSlice(la.IP)
		addr = netip.AddrPortFrom(ip.Unmap().WithZone(la.Zone), addr.Port())
	}
	b, _ := FabtestsName{Addr: addr}.MarshalBinary()
	stopc := ctrlCtx(ctx, c)
	defer stopc()
	if _, err := c.Write(b); err != nil {
		return nil, "", fmt.Errorf("%w (sending the endpoint name: %v)", errStrayClient, err)
	}
	// fi_pingpong writes nothing on the control connection before its
	// CM connection is established, which needs this side's accept: a
	// read that ends before the request is a client gone (or not
	// fi_pingpong).
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := make(chan error, 1)
	go func() {
		var one [1]byte
		_, err := c.Read(one[:])
		if err == nil {
			err = errors.New("it wrote first")
		}
		gone <- err
		cancel()
	}()
	req, err := s.listener.NextRequest(rctx)
	c.SetReadDeadline(time.Now()) // ends the read
	werr := <-gone
	c.SetReadDeadline(time.Time{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("waiting for fi_pingpong's connection request: %w", ctx.Err())
		}
		return nil, "", fmt.Errorf("%w: %v", errStrayClient, werr)
	}
	s.pending = &req
	return c, fmt.Sprintf("client %s, endpoint %s", c.RemoteAddr(), addr), nil
}

// fabtestsPrepare names the work requests and posts the first receive,
// before the connection: fi_pingpong sends as soon as it is synced.
func fabtestsPrepare(recvLen int) func(*endpoint) error {
	return func(e *endpoint) error {
		e.names = fabtestsNames
		return e.postRecv(wrRecv, 0, recvLen)
	}
}

// fabtestsSend sends n bytes from off and waits for the completion.
func fabtestsSend(ctx context.Context, e *endpoint, off, n int) error {
	if err := e.post(uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(off, n)}}); err != nil {
		return err
	}
	_, err := e.completion(ctx, wrSend, "SEND")
	return err
}

// fabtestsRecv waits for a message and posts the receive again (before
// anything is sent: the peer answers at once); it returns its length.
func fabtestsRecv(ctx context.Context, e *endpoint, recvLen int) (int, error) {
	wc, err := e.completion(ctx, wrRecv, "RECV")
	if err != nil {
		return 0, err
	}
	if wc.Opcode != uverbs.WCRecv {
		return 0, fmt.Errorf("RECV completed as %v", wc.Opcode)
	}
	return int(wc.ByteLen), e.postRecv(wrRecv, 0, recvLen)
}

// fabtestsFinish is fi_pingpong's end: each side sends "fin" and
// receives the other's.
func fabtestsFinish(ctx context.Context, e *endpoint, sendOff, recvLen int) error {
	copy(e.buf[sendOff:], fabtestsFin)
	if err := fabtestsSend(ctx, e, sendOff, len(fabtestsFin)); err != nil {
		return fmt.Errorf("fin: %w", err)
	}
	wc, err := e.completion(ctx, wrRecv, "RECV of the peer's fin")
	if err != nil {
		return err
	}
	if wc.Opcode != uverbs.WCRecv {
		return fmt.Errorf("the peer's fin completed as %v", wc.Opcode)
	}
	return nil
}

// fill fills b with letters, as fi_pingpong's own buffers do not need
// (it checks data only with -v).
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte('a' + (seed+i)%26)
	}
}

// dialCtrl opens the control connection (tests: their own).
func (cfg Config) dialCtrl(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if cfg.ctrlDial != nil {
		return cfg.ctrlDial(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr.String())
}

// listenCtrl listens for the control connection (tests: their own).
func (cfg Config) listenCtrl(addr netip.AddrPort) (net.Listener, error) {
	if cfg.ctrlListen != nil {
		return cfg.ctrlListen(addr)
	}
	return net.Listen("tcp", addr.String())
}
