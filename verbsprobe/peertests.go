package verbsprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/grdma/grdma/internal/spin"
	"github.com/grdma/grdma/uverbs"
)

// The parts of a bw, lat or pingpong test's memory region.
const (
	partSource = 0 // what this side sends, writes, or is read from
	partTarget = 1 // where the peer's messages land
)

// pattern fills b with bytes that both sides compute from the session's
// seed: salt 1 is the SEND, 2 the RDMA WRITE, 3 what the RDMA READ reads.
func pattern(b []byte, seed uint64, salt uint64) {
	x := seed ^ (salt * 0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// verifyPattern checks that got holds the pattern of salt, generated as
// it compares: no copy of the expected bytes is made.
func verifyPattern(operation string, got []byte, seed, salt uint64) error {
	x := seed ^ (salt * 0x9e3779b97f4a7c15)
	for i := range got {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if got[i] != byte(x) {
			return &PayloadMismatchError{Operation: operation, Offset: i, Got: got[i], Want: byte(x)}
		}
	}
	return nil
}

// verify checks that got holds this session's pattern of salt.
func (t *traffic) verify(operation string, got []byte, salt uint64) error {
	return verifyPattern(operation, got, t.e.link.seed, salt)
}

// postReceives posts receives into the part peers' messages land in:
// traffic's receive part, else the target part, as many as the queue
// takes.
func (e *testEnv) postReceives() error {
	c := e.conn
	qp, ok := c.qp.(dataPath)
	if !ok {
		return nil // no data path: the test step says so
	}
	part, n := partTarget, int(c.qp.QP().Cap.MaxRecvWR)
	if e.test.Kind == TestTraffic {
		part, n = regionReceive, 1
	}
	for range n {
		if err := qp.PostRecv(uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{c.mr.sge(part)}}); err != nil {
			return err
		}
	}
	return nil
}

// armTraffic readies the server's memory and its receive before it tells
// the client its endpoint.
func armTraffic(e *testEnv) error {
	if e.role != RoleServer {
		return nil
	}
	m := e.conn.mr
	pattern(m.region(regionSource), e.link.seed, 3)
	clear(m.region(regionReceive))
	clear(m.region(regionWritten))
	return e.postReceives()
}

// armMessages posts the receives the peer's first messages need before it
// can send them: both sides of pingpong, the client of lat send, the
// server of bw and lat send; a lat write server clears its target, whose
// last byte it watches.
func armMessages(e *testEnv) error {
	t := e.test
	switch {
	case isPingpong(t.Kind):
		return e.postReceives()
	case e.role == RoleClient:
		if t.Kind == TestLatency && t.Op == OpSend {
			return e.postReceives()
		}
	case t.Kind == TestLatency && t.Op == OpWrite:
		clear(e.conn.mr.region(partTarget))
	case t.Op == OpSend:
		return e.postReceives()
	}
	return nil
}

// remotePart addresses part i of the peer's memory region.
func (t *traffic) remotePart(i int) (uint64, uint32) {
	r := t.e.link.remote
	return r.Addr + uint64(i*r.Part), r.RKey
}

// peerSend sends the SEND pattern into the server's posted receive.
func (t *traffic) peerSend() (string, error) {
	m := t.e.conn.mr
	pattern(m.region(regionSource), t.e.link.seed, 1)
	return t.run(operation{
		name:   "SEND",
		send:   uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{m.sge(regionSource)}},
		expect: []expectedWC{{wrSend, uverbs.WCSend, -1}},
		detail: fmt.Sprintf("%d bytes sent; the peer verifies them", m.part),
	}, nil)
}

// peerWrite writes the WRITE pattern into the server's written part.
func (t *traffic) peerWrite() (string, error) {
	m := t.e.conn.mr
	pattern(m.region(regionSource), t.e.link.seed, 2)
	addr, rkey := t.remotePart(regionWritten)
	return t.run(operation{
		name:   "RDMA WRITE",
		send:   uverbs.SendWR{ID: wrWrite, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{m.sge(regionSource)}, RemoteAddr: addr, RKey: rkey},
		expect: []expectedWC{{wrWrite, uverbs.WCRDMAWrite, -1}},
		detail: fmt.Sprintf("%d bytes written; the peer verifies them", m.part),
	}, nil)
}

// peerRead reads the server's READ pattern and verifies it.
func (t *traffic) peerRead() (string, error) {
	m := t.e.conn.mr
	clear(m.region(regionReadBack))
	addr, rkey := t.remotePart(regionSource)
	detail, err := t.run(operation{
		name:   "RDMA READ",
		send:   uverbs.SendWR{ID: wrRead, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{m.sge(regionReadBack)}, RemoteAddr: addr, RKey: rkey},
		expect: []expectedWC{{wrRead, uverbs.WCRDMARead, m.part}},
		detail: fmt.Sprintf("%d bytes read from the peer and verified", m.part),
	}, nil)
	if err != nil {
		return "", err
	}
	if err := t.verify("RDMA READ", m.region(regionReadBack), 3); err != nil {
		return "", err
	}
	return detail, nil
}

// checkSend waits for the client's "done" (its SEND, WRITE and READ
// completed), then verifies its SEND: the completion and the bytes.
func (t *traffic) checkSend() (string, error) {
	if _, err := t.e.link.expect(msgDone, "waiting for the test of"); err != nil {
		return "", err
	}
	t.e.link.gotDone = true
	m := t.e.conn.mr
	wcs, err := t.await(1)
	if err != nil {
		return "", err
	}
	if err := expect(wcs, wrRecv, uverbs.WCRecv, m.part); err != nil {
		return "", err
	}
	if err := t.verify("SEND", m.region(regionReceive), 1); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes received and verified", m.part), nil
}

// checkWrite verifies what the client's RDMA WRITE put in memory.
func (t *traffic) checkWrite() (string, error) {
	m := t.e.conn.mr
	if err := t.verify("RDMA WRITE", m.region(regionWritten), 2); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes landed and verified", m.part), nil
}

// servedRead: the client verified its RDMA READ of this side's memory.
func (t *traffic) servedRead() (string, error) {
	return fmt.Sprintf("%d bytes served; the peer verified them", t.e.conn.mr.part), nil
}

// request is the send work request a bw or lat test repeats.
func (t *traffic) request(op Operation) uverbs.SendWR {
	m := t.e.conn.mr
	switch op {
	case OpSend:
		return uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{m.sge(partSource)}}
	case OpRead:
		addr, rkey := t.remotePart(partSource)
		return uverbs.SendWR{ID: wrRead, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{m.sge(partTarget)}, RemoteAddr: addr, RKey: rkey}
	}
	addr, rkey := t.remotePart(partTarget)
	return uverbs.SendWR{ID: wrWrite, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{m.sge(partSource)}, RemoteAddr: addr, RKey: rkey}
}

// latencyRequest is request(op) for a lat test's ping or pong: inline
// when the queue pair takes the message so (peerShape asks for it), as
// perftest sends them.
func (t *traffic) latencyRequest(op Operation) uverbs.SendWR {
	wr := t.request(op)
	if op == OpRead {
		return wr
	}
	src := t.e.conn.mr.region(partSource)
	if len(src) <= int(t.e.conn.qp.QP().Cap.MaxInlineData) {
		wr.SGL, wr.Inline = nil, src
	}
	return wr
}

// poller polls the completion queue, failing on an error status, a stall
// longer than the session's timeout, or the end of ctx.
type poller struct {
	t      *traffic
	wcs    []uverbs.WC
	lastWC time.Time
	// passive: the peer paces this side (a server), whose silence the
	// session's watcher judges; no stall check here.
	passive bool
	// watch, when set, follows the peer's messages while nothing
	// completes: a client learns there that its server failed.
	watch *watcher
	empty int // polls that found nothing since the last completion
	// events: wait for completions on the Conn's completion channel, in
	// slices of eventSlice between the idle checks, instead of spinning.
	events bool
	// latency: the loop times each exchange itself; the poller reads no
	// clock per completion (in the emulated guests a clock read is a
	// system call that costs more than a poll) and checks less often.
	latency bool
	seen    int // completions (or signs of life) since the last check
	// software: the device's work runs on this machine's CPUs (rxe).
	software bool
}

// Waiting for completions: polling keeps a core busy for the whole test,
// events cost nothing while waiting but a system call and a wake-up per
// completion. Tests that measure latency (lat, pingpong) poll; the others
// wait for events, unless Options.Poll asks for polling everywhere.
// eventSlice bounds a wait for an event: the peer's messages, the stall
// check and the context are looked at between slices.
const eventSlice = 20 * time.Millisecond

// newPoller returns a poller of the test's completions; latency tests
// poll, the others wait for events when the Conn has a channel.
func (t *traffic) newPoller(latency bool) *poller {
	pl := &poller{t: t, wcs: make([]uverbs.WC, 64), lastWC: time.Now(), latency: latency,
		software: t.e.conn.dev.driver.software}
	pl.events = t.e.conn.channel != nil && !latency
	if s := t.e.link; s != nil && s.role == RoleClient && s.incoming != nil {
		pl.watch = &watcher{s: s, lastHeard: time.Now(), quiet: true}
	}
	return pl
}

// poll returns the completions that arrived. Polling, it waits for none:
// only every idleCheckEvery empty polls does it look at the clock, the
// context and the peer, and yield. With events it waits up to eventSlice.
func (pl *poller) poll(doing string) ([]uverbs.WC, error) {
	n := pl.t.cq.Poll(pl.wcs)
	if n == 0 && pl.events {
		ctx, cancel := context.WithTimeout(pl.t.e.ctx, eventSlice)
		var err error
		n, err = pl.t.cq.Wait(ctx, pl.wcs)
		cancel()
		switch {
		case pl.t.e.ctx.Err() != nil:
			return nil, interruption(pl.t.e.ctx)
		case errors.Is(err, context.DeadlineExceeded):
			return nil, pl.check(doing, time.Now())
		case err != nil:
			return nil, err
		}
	}
	if n > 0 {
		if err := firstError(pl.wcs[:n]); err != nil {
			return nil, err
		}
		pl.empty = 0
		if pl.latency {
			pl.seen += n
		} else {
			pl.lastWC = time.Now()
		}
		return pl.wcs[:n], nil
	}
	every := idleCheckEvery
	if pl.latency {
		every = latencyCheckEvery
	}
	pl.empty++
	if pl.software {
		spin.Empty(pl.empty)
	}
	if pl.empty%every != 0 {
		return nil, nil
	}
	return nil, pl.idle(doing, time.Now())
}

// idleCheckEvery is how many empty polls go between two idle checks;
// latencyCheckEvery the same in a latency test's loop.
const (
	idleCheckEvery    = 64
	latencyCheckEvery = 1024
)

// firstError returns the error of the first failed completion that is
// not a flush: the flushes that follow a failure say nothing of its cause.
func firstError(wcs []uverbs.WC) error {
	var flushed *uverbs.WC
	for i, wc := range wcs {
		switch {
		case wc.Status == uverbs.WCSuccess:
		case wc.Status == uverbs.WCWRFlushErr:
			if flushed == nil {
				flushed = &wcs[i]
			}
		default:
			return &WCError{WC: wc}
		}
	}
	if flushed != nil {
		return &WCError{WC: *flushed}
	}
	return nil
}

// idle is called when polling found nothing: it yields, and fails on a
// stall or the end of ctx.
func (pl *poller) idle(doing string, now time.Time) error {
	if err := pl.check(doing, now); err != nil {
		return err
	}
	if now.Sub(pl.lastWC) < spinFor {
		spin.Yield()
	} else {
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// check fails on the end of ctx, on the peer's failure and on a stall.
func (pl *poller) check(doing string, now time.Time) error {
	if pl.seen > 0 {
		pl.lastWC, pl.seen = now, 0
	}
	if ctx := pl.t.e.ctx; ctx.Err() != nil {
		return interruption(ctx)
	}
	if pl.watch != nil {
		if err := pl.watch.check(doing); err != nil {
			return err
		}
	}
	if s := pl.t.e.link; !pl.passive && now.Sub(pl.lastWC) > s.timeout {
		return fmt.Errorf("nothing completed for %v: the peer stopped, or packets are lost (UDP 4791 filtered?)", s.timeout)
	}
	return nil
}

// progress notes a sign of life that is not a completion (a byte written
// by the peer).
func (pl *poller) progress() { pl.seen++ }

// bandwidth streams the test's operation with a window of outstanding
// requests, for Iters messages or Duration.
func (t *traffic) bandwidth() (string, error) {
	s := t.e.link
	test := t.e.test
	wr := t.request(test.Op)
	wr.Flags |= uverbs.SendSignaled
	window := int(t.e.conn.qp.QP().Cap.MaxSendWR)
	target := test.Iters
	if test.Duration > 0 {
		target = math.MaxInt
	}
	pl := t.newPoller(false)
	tick := ticker{s: s}
	posted, completed := 0, 0
	doing := "streaming " + test.String() + " to"
	start := time.Now()
	end := start.Add(test.Duration)
	for completed < target {
		for posted-completed < window && posted < target {
			if err := t.qp.PostSend(wr); err != nil {
				return "", err
			}
			posted++
		}
		wcs, err := pl.poll(doing)
		if err != nil {
			return "", err
		}
		completed += len(wcs)
		if test.Duration > 0 && target > posted && time.Now().After(end) {
			target = posted
		}
		if err := tick.tick(completed); err != nil {
			return "", err
		}
	}
	m := Measurement{Test: test.Kind, Op: test.Op, Size: test.Size, Iters: completed,
		Bytes: uint64(completed) * uint64(test.Size), Elapsed: time.Since(start)}
	t.e.measured(m)
	return fmt.Sprintf("%.3f Gb/s, %.4f Mmsg/s: %d × %d bytes in %v", m.BWGbps(), m.MsgRateMpps(), m.Iters, m.Size,
		m.Elapsed.Round(time.Microsecond)), nil
}

// serveBandwidth answers a bw test: for SEND it keeps receives posted
// and counts what arrives; WRITE and READ need nothing of this side's
// CPU, which watches the connection until the peer is done.
func (t *traffic) serveBandwidth() (string, error) {
	s := t.e.link
	w := watcher{s: s, lastHeard: time.Now()}
	doing := "serving " + t.e.test.String() + " to"
	if t.e.test.Op != OpSend {
		if err := w.untilDone(t.e.ctx, doing); err != nil {
			return "", err
		}
		verb := map[Operation]string{OpWrite: "wrote into", OpRead: "read from"}[t.e.test.Op]
		return fmt.Sprintf("the peer %s this side's memory; no CPU work here", verb), nil
	}
	pl := t.newPoller(false)
	pl.passive = true
	var received int
	var first, last time.Time
	recv := uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{t.e.conn.mr.sge(partTarget)}}
	pl.watch = &w
	for {
		wcs, err := pl.poll(doing)
		if err != nil {
			return "", err
		}
		for _, wc := range wcs {
			if wc.Opcode != uverbs.WCRecv {
				continue
			}
			if received == 0 {
				first = pl.lastWC
			}
			received++
			last = pl.lastWC
			if err := t.qp.PostRecv(recv); err != nil {
				return "", err
			}
		}
		if len(wcs) > 0 {
			w.heard()
		} else if w.done != nil {
			break // the client's sends all completed: every SEND is here
		}
	}
	m := Measurement{Test: t.e.test.Kind, Op: t.e.test.Op, Size: t.e.test.Size, Iters: received,
		Bytes: uint64(received) * uint64(t.e.test.Size), Elapsed: last.Sub(first)}
	t.e.measured(m)
	return fmt.Sprintf("received %d × %d bytes, %.3f Gb/s", received, t.e.test.Size, m.BWGbps()), nil
}

// seqByte is the marker of exchange i in a latency test's last byte:
// 1..127, with stopBit on the last exchange.
func seqByte(i int) byte { return byte(i%127 + 1) }

const stopBit = 0x80

// lastByte reads byte i of b, which the device writes behind Go's back,
// with an atomic load of the aligned word that holds it: aligned on the
// address, not on the slice, as arm64 faults (SIGBUS) on an unaligned
// atomic load. The word stays inside b's page (pages are word-aligned),
// which the memory region maps whole.
func lastByte(b []byte, i int) byte {
	p := unsafe.Pointer(&b[i])
	off := uintptr(p) & 3
	word := (*uint32)(unsafe.Add(p, -int(off)))
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], atomic.LoadUint32(word))
	return w[off]
}

// latency runs the ping-pong of a lat test and records each exchange.
func (t *traffic) latency() (string, error) {
	s := t.e.link
	test := t.e.test
	m := t.e.conn.mr
	src, dst := m.region(partSource), m.region(partTarget)
	wr := t.latencyRequest(test.Op)
	wr.Flags |= uverbs.SendSignaled
	pl := t.newPoller(true)
	tick := ticker{s: s}
	var rec latencyRecorder
	doing := "running " + test.String() + " with"
	start := time.Now()
	// One clock read an exchange, as perftest stamps its iterations
	// (get_cycles before each post): an exchange's sample runs from the
	// previous one's answer to its own, the loop's bookkeeping between
	// them included, as in perftest's t_typical.
	t0 := start
	unreaped := 0 // completions of sends not yet polled
	for i := 0; ; i++ {
		last := (test.Duration == 0 && i == test.Iters-1) || (test.Duration > 0 && t0.Sub(start) >= test.Duration)
		v := seqByte(i)
		if last {
			v |= stopBit
		}
		src[len(src)-1] = v
		if err := t.qp.PostSend(wr); err != nil {
			return "", err
		}
		unreaped++
		answered := false
		for !answered || unreaped > 0 {
			wcs, err := pl.poll(doing)
			if err != nil {
				return "", err
			}
			for _, wc := range wcs {
				switch wc.Opcode {
				case uverbs.WCRecv:
					if err := t.qp.PostRecv(uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{m.sge(partTarget)}}); err != nil {
						return "", err
					}
					answered = true
				default:
					unreaped--
					if test.Op == OpRead {
						answered = true
					}
				}
			}
			if !answered && test.Op == OpWrite && lastByte(dst, len(dst)-1) == v {
				answered = true
				pl.progress()
			}
		}
		t1 := time.Now()
		d := t1.Sub(t0)
		if test.Op == OpSend && dst[len(dst)-1] != v {
			return "", &PayloadMismatchError{Operation: "SEND pong", Offset: len(dst) - 1, Got: dst[len(dst)-1], Want: v}
		}
		if test.Op != OpRead {
			d /= 2 // one way, as perftest reports
		}
		rec.add(d)
		if err := tick.tickAt(i+1, t1); err != nil {
			return "", err
		}
		if last {
			break
		}
		t0 = t1
	}
	st := rec.stats()
	meas := Measurement{Test: test.Kind, Op: test.Op, Size: test.Size, Iters: st.Samples,
		Bytes: uint64(st.Samples) * uint64(test.Size), Elapsed: time.Since(start), Latency: st}
	t.e.measured(meas)
	return fmt.Sprintf("%d exchanges of %d bytes: median %.2f µs, p99 %.2f µs", st.Samples, test.Size,
		float64(st.Median)/1e3, float64(st.P99)/1e3), nil
}

// serveLatency answers a lat test: it returns each ping (WRITE, SEND);
// an RDMA READ needs no CPU work here.
func (t *traffic) serveLatency() (string, error) {
	s := t.e.link
	if t.e.test.Op == OpRead {
		return t.serveBandwidth()
	}
	m := t.e.conn.mr
	src, dst := m.region(partSource), m.region(partTarget)
	wr := t.latencyRequest(t.e.test.Op)
	wr.Flags |= uverbs.SendSignaled
	w := watcher{s: s, lastHeard: time.Now()}
	pl := t.newPoller(true)
	pl.passive = true
	doing := "answering " + t.e.test.String() + " of"
	unreaped := 0
	n := 0
	for i := 0; ; i++ {
		want := seqByte(i)
		var got byte
		for arrived := false; !arrived; {
			wcs, err := pl.poll(doing)
			if err != nil {
				return "", err
			}
			for _, wc := range wcs {
				if wc.Opcode != uverbs.WCRecv {
					unreaped--
					continue
				}
				// A SEND: its last byte is the marker. The buffer is
				// reused only after this side answers.
				got, arrived = dst[len(dst)-1], true
				if err := t.qp.PostRecv(uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{m.sge(partTarget)}}); err != nil {
					return "", err
				}
			}
			if b := lastByte(dst, len(dst)-1); t.e.test.Op == OpWrite && b&^stopBit == want {
				got, arrived = b, true
			}
			if arrived {
				w.heard()
			} else if err := w.check(doing); err != nil {
				return "", err
			}
		}
		if got&^stopBit != want {
			return "", &PayloadMismatchError{Operation: "ping", Offset: len(dst) - 1, Got: got, Want: want}
		}
		src[len(src)-1] = got
		for unreaped >= int(t.e.conn.qp.QP().Cap.MaxSendWR)-1 {
			wcs, err := pl.poll(doing)
			if err != nil {
				return "", err
			}
			unreaped -= len(wcs)
		}
		if err := t.qp.PostSend(wr); err != nil {
			return "", err
		}
		unreaped++
		n++
		if got&stopBit != 0 {
			break
		}
	}
	// The client's "done" follows.
	if err := w.untilDone(t.e.ctx, doing); err != nil {
		return "", err
	}
	return fmt.Sprintf("answered %d exchanges of %d bytes", n, t.e.test.Size), nil
}
