//go:build e2eguest

package guest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Unreliable datagrams on rxe, at library level: UD queue pairs of rxe0
// send to each other through address handles (the kernel's AH number,
// and the address vector alone as kernels before 5.10 take it), and the
// receiver finds the network header in front of each payload.
// TestUDFakeMatchesRxe runs one script on rxe0 and on uverbstest's fake
// and compares what both answer.

// udQKey is the Q_Key of the script's queue pairs (ibv_ud_pingpong's).
const udQKey = 0x11111111

// udEnd is a verbsEnd (context, protection domain, completion channel
// and queue, 64 KiB registered) whose UD queue pairs and address handles
// newQP and ah make.
type udEnd struct {
	*verbsEnd
	qps []*uverbs.RxeQP
	ahs []uverbs.AH
}

func newUDEnd(t *testing.T, c *uverbs.Context) *udEnd {
	t.Helper()
	e := &udEnd{verbsEnd: newVerbsBase(t, c)}
	t.Cleanup(e.close) // before the verbsEnd's: cleanups run last first
	return e
}

// newQP makes a UD queue pair and brings it to RTS with qkey.
func (e *udEnd) newQP(qkey uint32) (*uverbs.RxeQP, error) {
	cq := e.cq.CQ()
	qp, err := e.c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: cq, RecvCQ: cq, Type: ib.QPTypeUD,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	e.qps = append(e.qps, qp)
	return qp, e.c.ConnectUD(qp.QP(), 1, qkey, 0x123)
}

func (e *udEnd) ah(attr uverbs.AHAttr) (uverbs.AH, error) {
	ah, err := e.c.CreateRxeAH(e.pd, attr)
	if err == nil {
		e.ahs = append(e.ahs, ah)
	}
	return ah, err
}

// close destroys the queue pairs and address handles; the verbsEnd's
// cleanup the rest.
func (e *udEnd) close() {
	if e.c == nil {
		return
	}
	for _, qp := range e.qps {
		qp.Destroy()
	}
	for _, ah := range e.ahs {
		e.c.DestroyAH(ah)
	}
	e.qps, e.ahs = nil, nil
}

// The script's buffer: what is sent at 0, received at udRecvAt.
const udRecvAt = 16 << 10

// udScript is the script TestUDFakeMatchesRxe runs on both devices: what
// happens to datagrams of every size, to a wrong Q_Key, to a receive too
// small, to an unknown queue pair; address handles and their refusals.
func udScript(t *testing.T, open func() *uverbs.Context, grh func(b []byte)) []string {
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	errno := func(err error) string {
		var en syscall.Errno
		if errors.As(err, &en) {
			return unix.ErrnoName(en)
		}
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	c := open()
	e := newUDEnd(t, c)
	a, err := e.newQP(udQKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.newQP(udQKey)
	if err != nil {
		t.Fatal(err)
	}
	name := func(qpn uint32) string {
		switch qpn {
		case a.QP().QPN:
			return "A"
		case b.QP().QPN:
			return "B"
		}
		return fmt.Sprint(qpn)
	}
	wcs := func(n int, d time.Duration) []uverbs.WC {
		got := e.waitWCs(n, d)
		slices.SortStableFunc(got, func(x, y uverbs.WC) int { return int(x.WRID) - int(y.WRID) })
		for _, w := range got {
			src := ""
			if w.Opcode == uverbs.WCRecv && w.Status == uverbs.WCSuccess {
				src = " src " + name(w.SrcQP)
			}
			say("  wr %d %v opcode %v len %d flags %d qp %s%s port %d pkey %d", w.WRID, w.Status, w.Opcode, w.ByteLen,
				w.WCFlags, name(w.QPNum), src, w.PortNum, w.PKeyIndex)
		}
		if len(got) < n {
			say("  %d of %d completions", len(got), n)
		}
		return got
	}
	// 6.12 rounds the queues up (31 for 16), 6.1 does not: at least what
	// was asked.
	caps := b.QP().Cap
	say("qp caps at least asked: %v, inline %d", caps.MaxSendWR >= 16 && caps.MaxRecvWR >= 16 && caps.MaxSendSGE == 1 &&
		caps.MaxRecvSGE == 1, caps.MaxInlineData)
	attr, err := c.QueryQP(b.QP(), uverbs.QPAttrAll)
	say("query_qp: %s state %v qkey %#x port %d pkey_index %d sq_psn %#x", errno(err), attr.State, attr.QKey,
		attr.PortNum, attr.PKeyIndex, attr.SQPSN)

	toSelf := uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: e.gid, SGIDIndex: e.gidI, HopLimit: 64}, IsGlobal: 1, PortNum: 1}
	ah, err := e.ah(toSelf)
	say("create_ah: %s, an AH number: %v", errno(err), ah.RxeAHNum() != 0)
	if err != nil {
		return out
	}
	for i := range 4096 {
		e.buf[i] = byte(i*7 + 1)
	}
	id := uint64(0)
	send := func(ah uverbs.AH, n int, qkey uint32, qpn uint32) {
		id++
		clear(e.buf[udRecvAt : udRecvAt+uverbs.GRHSize+4096])
		if err := b.PostRecv(uverbs.RecvWR{ID: 100 + id, SGL: []uverbs.SGE{e.sge(udRecvAt, uverbs.GRHSize+4096)}}); err != nil {
			say("  post recv: %s", errno(err))
		}
		if err := a.PostSend(uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{e.sge(0, n)}, AH: &ah, RemoteQPN: qpn, RemoteQKey: qkey}); err != nil {
			say("  post send: %s", errno(err))
		}
	}
	received := func(got []uverbs.WC, n int) {
		for _, w := range got {
			if w.Opcode != uverbs.WCRecv || w.Status != uverbs.WCSuccess {
				continue
			}
			in := e.buf[udRecvAt : udRecvAt+uverbs.GRHSize+n]
			say("  payload intact: %v", bytes.Equal(in[uverbs.GRHSize:], e.buf[:n]))
			if grh != nil {
				grh(in[:uverbs.GRHSize])
			}
			g, err := uverbs.ParseGRH(in)
			say("  grh: %s ipv4 %v sgid own %v dgid own %v hop %d tclass %d next %d length %d", errno(err), g.IPv4,
				g.SGID == e.gid, g.DGID == e.gid, g.HopLimit, g.TrafficClass, g.NextHeader, g.PayloadLength)
		}
	}

	say("64 bytes to B")
	send(ah, 64, udQKey, b.QP().QPN)
	received(wcs(2, 5*time.Second), 64)
	say("64 bytes to B, the address vector alone")
	send(ah.AVOnly(), 64, udQKey, b.QP().QPN)
	received(wcs(2, 5*time.Second), 64)
	for _, n := range []int{1, 512, 1024, 1025, 4096} {
		say("%d bytes to B", n)
		send(ah, n, udQKey, b.QP().QPN)
		received(wcs(2, 5*time.Second), n)
		e.drain(b)
	}
	say("a wrong Q_Key")
	send(ah, 64, udQKey+1, b.QP().QPN)
	wcs(2, udDropWait)
	e.drain(b)
	say("the Q_Key's high bit (rxe sends it as it is)")
	send(ah, 64, 0x80000000, b.QP().QPN)
	received(wcs(2, 5*time.Second), 64)
	e.drain(b)
	say("an unknown queue pair")
	send(ah, 64, udQKey, 0xfffff0)
	wcs(2, udDropWait)
	e.drain(b)

	say("a receive too small for 128 bytes, then 32 bytes into it")
	id++
	if err := b.PostRecv(uverbs.RecvWR{ID: 100 + id, SGL: []uverbs.SGE{e.sge(udRecvAt, uverbs.GRHSize+64)}}); err != nil {
		say("  post recv: %s", errno(err))
	}
	if err := a.PostSend(uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.sge(0, 128)}, AH: &ah, RemoteQPN: b.QP().QPN, RemoteQKey: udQKey}); err != nil {
		say("  post send: %s", errno(err))
	}
	wcs(2, udDropWait)
	id++
	if err := a.PostSend(uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.sge(0, 32)}, AH: &ah, RemoteQPN: b.QP().QPN, RemoteQKey: udQKey}); err != nil {
		say("  post send: %s", errno(err))
	}
	received(wcs(2, 5*time.Second), 32)
	attr, err = c.QueryQP(b.QP(), uverbs.QPAttrAll)
	say("  B: %s state %v", errno(err), attr.State)
	e.drain(b)

	say("a queue pair in RTR sends")
	r, err := e.c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeUD,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err == nil {
		e.qps = append(e.qps, r)
		qp := r.QP()
		say("  init without a Q_Key: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1},
			uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort)))
		say("  init with access flags: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, QKey: 1},
			uverbs.QPAttrsResetToInitUD|uverbs.QPAttrAccessFlags)))
		say("  init: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, QKey: 1}, uverbs.QPAttrsResetToInitUD)))
		say("  rtr with a path: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024},
			uverbs.QPAttrState|uverbs.QPAttrPathMTU)))
		say("  rtr: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTR}, uverbs.QPAttrsInitToRTRUD)))
		err := r.PostSend(uverbs.SendWR{ID: 900, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}, AH: &ah,
			RemoteQPN: b.QP().QPN, RemoteQKey: udQKey})
		say("  post send: %s", errno(err))
	} else {
		say("  create_qp: %s", errno(err))
	}

	say("address handles refused")
	bad := toSelf
	bad.GRH.SGIDIndex = 200
	_, err = e.ah(bad)
	say("  a source GID index that does not exist: %s", errno(err))
	bad = toSelf
	bad.IsGlobal = 0
	_, err = e.ah(bad)
	say("  no GRH on RoCE: %s", errno(err))
	bad = toSelf
	bad.PortNum = 2
	_, err = e.ah(bad)
	say("  port 2: %s", errno(err))
	say("dealloc_pd with an AH: %s", errno(c.DeallocPD(e.pd)))
	ex, _, err := c.QueryDeviceEx()
	say("completion timestamps: %s mask %#x clock %d kHz", errno(err), ex.TimestampMask, ex.HCACoreClock)
	return out
}

// udDropWait is how long a case whose datagram is dropped waits for the
// completions (the send's alone, expected): the whole of it, every time.
// Long enough that the send's completes on a loaded CI host (two TCG
// guests on two cores; 0.5 s left little room), short enough for three cases.
const udDropWait = 2 * time.Second

// drain takes what is left: a receive still posted is flushed by moving
// the queue pair through ERROR and back to RTS, so each case starts with
// an empty receive queue.
func (e *udEnd) drain(qp *uverbs.RxeQP) {
	e.t.Helper()
	q := qp.QP()
	if err := e.c.ModifyQP(q, &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState); err != nil {
		e.t.Fatal(err)
	}
	// The flushed receive, if any: one later than this lands in the
	// next case's transcript.
	e.waitWCs(16, 500*time.Millisecond)
	if err := e.c.ModifyQP(q, &uverbs.QPAttr{State: ib.QPStateReset}, uverbs.QPAttrState); err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.ConnectUD(q, 1, udQKey, 0x123); err != nil {
		e.t.Fatal(err)
	}
}

// TestUDFakeMatchesRxe runs udScript on rxe0 and on the fake device, and
// compares what both answer line by line. It logs the network header rxe
// wrote in front of the first datagram.
func TestUDFakeMatchesRxe(t *testing.T) {
	// rxe on 6.1 fails a receive too small for a datagram, 6.12 drops it.
	kernel := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	fakeDev := uverbstest.NewDevice(uverbstest.Config{IPv4: netip.MustParseAddr(rxeAddr),
		ShortReceiveFails: strings.HasPrefix(kernel, "6.1.")})
	// Registered first, so run last: after the script's ends closed.
	t.Cleanup(func() {
		if res := fakeDev.Resources(); res != (uverbstest.Resources{}) {
			t.Errorf("the fake has %+v left", res)
		}
	})
	withRxe0(t)
	first := true
	real := udScript(t, func() *uverbs.Context { return openRxe0(t) }, func(b []byte) {
		if first {
			t.Logf("rxe0's GRH of the first datagram: %s", hex.EncodeToString(b))
			first = false
		}
	})
	t.Logf("rxe0:\n%s", strings.Join(real, "\n"))
	fake := udScript(t, func() *uverbs.Context {
		c, err := fakeDev.Open()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, nil)
	for i := range max(len(real), len(fake)) {
		r, f := "(none)", "(none)"
		if i < len(real) {
			r = real[i]
		}
		if i < len(fake) {
			f = fake[i]
		}
		if r != f {
			t.Errorf("line %d:\n rxe0: %s\n fake: %s", i, r, f)
		}
	}
}

// TestUDPingLoopback: grdma probe rxe0 serve and a ping of it on this
// host (the lookup over 127.0.0.1, the datagrams through rxe0 to itself):
// every probe answered, the responder's line names the lookup, and its
// counters when it stops: a report for each probe but the 64-byte ones,
// whose echoes carried the delay (udping.FlagEchoDelay).
func TestUDPingLoopback(t *testing.T) {
	withRxe0(t)
	const port = 18600
	srv, out, errb := startLocal(t, grdma(), "-j", "probe", "rxe0", "serve", "127.0.0.1:"+fmt.Sprint(port))
	if !eventually(20*time.Second, func() bool { return listening(port) }) {
		t.Fatalf("serve never listened:\n%s", errb.String())
	}
	r := run(grdma(), "-j", "probe", "rxe0", "peer", fmt.Sprintf("127.0.0.1:%d", port), "ping", "count", "6", "interval", "100ms")
	checkPings(t, r, 6, "::ffff:"+rxeAddr)
	srv.Process.Signal(syscall.SIGTERM)
	if code := exitCode(srv); code != 0 || !strings.Contains(errb.String(), "answering UD pings on qpn") ||
		!strings.Contains(errb.String(), "UD ping: 6 probes answered, 4 reports") || // the two 64-byte probes asked for one reply
		!strings.Contains(out.String(), `"kind":"ud-ping"`) {
		t.Errorf("serve: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
}
