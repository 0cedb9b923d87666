//go:build e2eguest

package guest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/spin"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Completion events on rxe, at library level: queue pairs of rxe0
// connected to themselves (or to each other) send, and the completions
// are waited for through a completion channel in Go's poller instead of a
// polling loop. TestFakeMatchesRxe runs one script on rxe0 and on the fake
// device of package uverbstest and compares what both answer.

// verbsEnd is a context with a protection domain, a completion channel
// and queue, a queue pair and 64 KiB registered.
type verbsEnd struct {
	t    *testing.T
	c    *uverbs.Context
	gid  [16]byte // the IPv4 GID
	gidI uint8
	pd   uverbs.PD
	ch   *uverbs.CompChannel
	cq   *uverbs.RxeCQ
	qp   *uverbs.RxeQP
	buf  []byte
	mr   uverbs.MR
}

const verbsBuf = 64 << 10

// openRxe0 opens rxe0 of the guest (made on veth0 with rxeAddr).
func openRxe0(t *testing.T) *uverbs.Context {
	t.Helper()
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	c, err := locator.OpenSysfs(fsys, "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	// Closed before cleanRDMA deletes rxe0: rxe cannot disassociate a
	// context, so deleting the device waits for its last user.
	t.Cleanup(func() { c.Close() })
	return c
}

// withRxe0 makes rxe0 on veth0 with the IPv4 address and waits for its
// IPv4 GID.
func withRxe0(t *testing.T) {
	t.Helper()
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	ipv4GID(t, "rxe0", rxeAddr)
}

// newVerbsEnd sets up an end on c: sigAll makes every send complete.
func newVerbsEnd(t *testing.T, c *uverbs.Context, sigAll bool) *verbsEnd {
	t.Helper()
	e := newVerbsBase(t, c)
	e.newQP(sigAll)
	return e
}

// newVerbsBase sets up an end on c without its queue pair.
func newVerbsBase(t *testing.T, c *uverbs.Context) *verbsEnd {
	t.Helper()
	e := &verbsEnd{t: t, c: c}
	t.Cleanup(e.close)
	// Opened from sysfs, the node has no driver ID; rxe's is known.
	gids, err := c.QueryGIDTable(uverbs.DriverIDRXE, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddr("::ffff:" + rxeAddr).As16()
	found := false
	for _, g := range gids {
		if g.GID == want {
			e.gid, e.gidI, found = g.GID, uint8(g.Index), true
		}
	}
	if !found {
		t.Fatalf("no GID %s in %+v", rxeAddr, gids)
	}
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.ch, err = c.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateRxeCQWith(uverbs.CQInit{CQE: 64, Channel: e.ch}); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = uverbs.AllocBuffer(verbsBuf); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *verbsEnd) newQP(sigAll bool) {
	e.t.Helper()
	cq := e.cq.CQ()
	var err error
	e.qp, err = e.c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: cq, RecvCQ: cq, Type: ib.QPTypeRC, SignalAll: sigAll,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// close releases what exists (a failed setup leaves some unmade).
func (e *verbsEnd) close() {
	if e.c == nil {
		return
	}
	if e.qp != nil {
		e.qp.Destroy()
	}
	if e.cq != nil {
		e.cq.Destroy()
	}
	if e.buf != nil {
		e.c.DeregMR(e.mr)
		uverbs.FreeBuffer(e.buf)
	}
	e.c.DeallocPD(e.pd)
	if e.ch != nil {
		e.ch.Close()
	}
	e.c.Close()
	e.c = nil
}

// verbsLink is how a queue pair connects.
type verbsLink struct {
	sqPSN, rqPSN      uint32
	timeout, retry    uint8
	rnrRetry, rnrTime uint8
	access            uverbs.Access
}

var goodLink = verbsLink{sqPSN: 0x100, rqPSN: 0x100, timeout: 14, retry: 7, rnrRetry: 7, rnrTime: 1,
	access: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}

// connect brings e's queue pair to RTS towards peer's.
func (e *verbsEnd) connect(peer *verbsEnd, l verbsLink) error {
	qp := e.qp.QP()
	if err := e.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: l.access},
		uverbs.QPAttrsResetToInit); err != nil {
		return err
	}
	rtr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024, DestQPN: peer.qp.QP().QPN, RQPSN: l.rqPSN,
		MaxDestRdAtomic: 1, MinRNRTimer: l.rnrTime,
		AV: uverbs.AddressVector{DGID: peer.gid, SGIDIndex: e.gidI, HopLimit: 64, IsGlobal: 1, PortNum: 1}}
	if err := e.c.ModifyQP(qp, &rtr, uverbs.QPAttrsInitToRTR); err != nil {
		return err
	}
	return e.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTS, Timeout: l.timeout, RetryCnt: l.retry,
		RNRRetry: l.rnrRetry, SQPSN: l.sqPSN, MaxRdAtomic: 1}, uverbs.QPAttrsRTRToRTS)
}

func (e *verbsEnd) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr + uint64(off), Length: uint32(n), LKey: e.mr.LKey}
}

// waitWCs waits (with events) for n completions, or what came within d.
func (e *verbsEnd) waitWCs(n int, d time.Duration) []uverbs.WC {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []uverbs.WC
	wcs := make([]uverbs.WC, 16)
	for len(got) < n {
		k, err := e.cq.Wait(ctx, wcs[:n-len(got)])
		if err != nil {
			break
		}
		got = append(got, wcs[:k]...)
	}
	return got
}

// pollN polls (no events) until n completions came or d passed.
func (e *verbsEnd) pollN(n int, d time.Duration) []uverbs.WC {
	var got []uverbs.WC
	wcs := make([]uverbs.WC, 16)
	for end := time.Now().Add(d); len(got) < n && time.Now().Before(end); {
		k := e.cq.Poll(wcs[:n-len(got)])
		got = append(got, wcs[:k]...)
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

// TestCompletionEvents: a queue pair of rxe0 connected to itself sends;
// the completion arrives as an event on the channel (armed, the queue is
// empty until the SEND, and WaitEvent returns once the kernel wrote the
// event); a wait ends with its context; armed for solicited completions
// only, the queue gets no event for an unsolicited SEND and one for a
// solicited SEND; DESTROY_CQ counts the events read.
func TestCompletionEvents(t *testing.T) {
	withRxe0(t)
	c := openRxe0(t)
	ctx := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
	wcs := make([]uverbs.WC, 4)
	post := func(e *verbsEnd, id uint64, flags uverbs.SendFlags) {
		t.Helper()
		if err := e.qp.PostRecv(uverbs.RecvWR{ID: id, SGL: []uverbs.SGE{e.sge(4096, 64)}}); err != nil {
			t.Fatal(err)
		}
		if err := e.qp.PostSend(uverbs.SendWR{ID: id + 1, Opcode: uverbs.WRSend, Flags: flags, SGL: []uverbs.SGE{e.sge(0, 4)}}); err != nil {
			t.Fatal(err)
		}
	}
	destroyCounts := func(e *verbsEnd, want uint32) {
		t.Helper()
		e.qp.Destroy()
		e.qp = nil
		ev, err := e.cq.DestroyEvents()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Comp != want || ev.Async != 0 {
			t.Errorf("DESTROY_CQ reports %+v, want %d completion events", ev, want)
		}
		if e.cq, err = c.CreateRxeCQ(4); err != nil { // for the cleanup
			t.Fatal(err)
		}
	}

	e := newVerbsEnd(t, c, true)
	if err := e.connect(e, goodLink); err != nil {
		t.Fatal(err)
	}
	t.Run("event", func(t *testing.T) {
		if err := e.cq.Arm(false); err != nil {
			t.Fatal(err)
		}
		if n := e.cq.Poll(wcs); n != 0 {
			t.Fatalf("%d completions before anything was posted", n)
		}
		copy(e.buf, "ping")
		post(e, 1, 0)
		start := time.Now()
		if err := e.cq.WaitEvent(ctx(10 * time.Second)); err != nil {
			t.Fatalf("no event: %v", err)
		}
		t.Logf("the event came %v after the post", time.Since(start))
		if got := e.pollN(2, 10*time.Second); len(got) != 2 || string(e.buf[4096:4100]) != "ping" {
			t.Errorf("completions %+v, received %q", got, e.buf[4096:4100])
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { _, err := e.cq.Wait(cctx, wcs); done <- err }()
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled wait: %v", err)
			}
			t.Logf("the cancelled wait returned %v after cancel", time.Since(start))
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled wait did not return")
		}
		if _, err := e.cq.Wait(ctx(30*time.Millisecond), wcs); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait with a deadline: %v", err)
		}
	})
	t.Run("destroy_counts_events", func(t *testing.T) { destroyCounts(e, 1) })

	t.Run("solicited", func(t *testing.T) {
		s := newVerbsEnd(t, c, true)
		if err := s.connect(s, goodLink); err != nil {
			t.Fatal(err)
		}
		if err := s.cq.Arm(true); err != nil {
			t.Fatal(err)
		}
		post(s, 10, 0)
		if got := s.pollN(2, 10*time.Second); len(got) != 2 {
			t.Fatalf("%d completions of the unsolicited SEND, want 2", len(got))
		}
		if err := s.cq.WaitEvent(ctx(300 * time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("an unsolicited SEND: %v, want no event", err)
		}
		post(s, 20, uverbs.SendSolicited)
		if err := s.cq.WaitEvent(ctx(10 * time.Second)); err != nil {
			t.Fatalf("no event for a solicited SEND: %v", err)
		}
		if got := s.pollN(2, 10*time.Second); len(got) != 2 {
			t.Errorf("%d completions of the solicited SEND, want 2", len(got))
		}
		destroyCounts(s, 1)
	})
}

// cpuTime is the process's CPU time, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pollUntil is the busy poller verbsprobe uses: spin (spin.Yield) for
// 10 ms, then poll every 50 µs, until a completion or d.
func pollUntil(cq *uverbs.RxeCQ, wcs []uverbs.WC, d time.Duration) int {
	start := time.Now()
	for i := 0; ; i++ {
		if n := cq.Poll(wcs); n > 0 {
			return n
		}
		if i%64 != 0 {
			continue
		}
		waited := time.Since(start)
		switch {
		case waited > d:
			return 0
		case waited < 10*time.Millisecond:
			spin.Yield()
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// spinPoll polls without sleeping (spin.Yield only), as the latency tests do.
func spinPoll(cq *uverbs.RxeCQ, wcs []uverbs.WC) int {
	for {
		if n := cq.Poll(wcs); n > 0 {
			return n
		}
		spin.Yield()
	}
}

// TestCompletionEventFigures measures, on rxe0, what waiting costs: the
// CPU time of a goroutine waiting 10 s for a completion that does not
// come, with events and with verbsprobe's busy poller; and the latency of
// an RC SEND ping-pong between two queue pairs of rxe0 (one goroutine
// posts, waits for the other side's receive, answers), with events and
// with polling, interleaved in rounds. It logs the figures (BENCHMARKS.md)
// and asserts only that every message arrived.
func TestCompletionEventFigures(t *testing.T) {
	withRxe0(t)
	c := openRxe0(t)
	a := newVerbsEnd(t, c, false)
	b := newVerbsEnd(t, c, false)
	if err := a.connect(b, goodLink); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(a, goodLink); err != nil {
		t.Fatal(err)
	}
	wcs := make([]uverbs.WC, 4)

	idle := 10 * time.Second
	before := cpuTime(t)
	ctx, cancel := context.WithTimeout(context.Background(), idle)
	_, err := a.cq.Wait(ctx, wcs)
	cancel()
	events := cpuTime(t) - before
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle wait: %v", err)
	}
	before = cpuTime(t)
	if n := pollUntil(a.cq, wcs, idle); n != 0 {
		t.Fatalf("%d completions while idle", n)
	}
	polling := cpuTime(t) - before
	t.Logf("FIGURE idle_wait_10s_cpu_ms events=%.1f poller=%.1f", float64(events)/1e6, float64(polling)/1e6)

	// Ping-pong: a sends to b, b answers; one round trip per message.
	const rounds, perRound = 10, 200
	pingpong := func(useEvents bool) []time.Duration {
		lat := make([]time.Duration, 0, perRound)
		for i := range perRound {
			for _, e := range []*verbsEnd{a, b} {
				if err := e.qp.PostRecv(uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{e.sge(4096, 64)}}); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			for _, hop := range [][2]*verbsEnd{{a, b}, {b, a}} {
				from, to := hop[0], hop[1]
				if err := from.qp.PostSend(uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{from.sge(0, 8)}}); err != nil {
					t.Fatal(err)
				}
				var n int
				if useEvents {
					wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					n, err = to.cq.Wait(wctx, wcs[:1])
					cancel()
					if err != nil {
						t.Fatalf("ping-pong wait: %v", err)
					}
				} else {
					n = spinPoll(to.cq, wcs[:1])
				}
				if n != 1 || wcs[0].Status != uverbs.WCSuccess || wcs[0].Opcode != uverbs.WCRecv {
					t.Fatalf("ping-pong: %d completions %+v", n, wcs[0])
				}
			}
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	var withEvents, withPolling []time.Duration
	for r := range rounds {
		if r%2 == 0 {
			withEvents = append(withEvents, pingpong(true)...)
			withPolling = append(withPolling, pingpong(false)...)
		} else {
			withPolling = append(withPolling, pingpong(false)...)
			withEvents = append(withEvents, pingpong(true)...)
		}
	}
	q := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))]) / 1e3
	}
	t.Logf("FIGURE rc_send_pingpong_rtt_usec events_median=%.1f polling_median=%.1f events_p99=%.1f polling_p99=%.1f n=%d",
		q(withEvents, 0.5), q(withPolling, 0.5), q(withEvents, 0.99), q(withPolling, 0.99), len(withEvents))
}

// TestFakeMatchesRxe runs one script of commands, traffic and failures
// on rxe0 and on uverbstest's fake device, and compares what both answer
// line by line: capacities, completions (status, opcode, length, flags),
// states, PSNs and errnos. The fake is rxe as 6.12 has it; where 6.1's
// rxe answers otherwise (steps in rxe61Differs), 6.1's answers are logged.
func TestFakeMatchesRxe(t *testing.T) {
	withRxe0(t)
	real := verbsScript(t, func() *uverbs.Context { return openRxe0(t) })
	fakeDev := uverbstest.NewDevice(uverbstest.Config{IPv4: netip.MustParseAddr(rxeAddr)})
	fake := verbsScript(t, func() *uverbs.Context {
		c, err := fakeDev.Open()
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	old := strings.HasPrefix(string(release), "6.1.")
	t.Logf("rxe0 (%s):\n%s", strings.TrimSpace(string(release)), strings.Join(real, "\n"))
	step := ""
	for i := range max(len(real), len(fake)) {
		r, f := "(none)", "(none)"
		if i < len(real) {
			r = real[i]
		}
		if i < len(fake) {
			f = fake[i]
		}
		if !strings.HasPrefix(r, " ") {
			step = r
		}
		switch {
		case r == f:
		case old && slices.ContainsFunc(rxe61Differs, func(p string) bool { return strings.HasPrefix(step, p) }):
			t.Logf("6.1 differs, line %d:\n rxe0: %s\n fake: %s", i, r, f)
		default:
			t.Errorf("line %d:\n rxe0: %s\n fake: %s", i, r, f)
		}
	}
	if res := fakeDev.Resources(); res != (uverbstest.Resources{}) {
		t.Errorf("the fake has left %+v", res)
	}
}

// rxe61Differs are the script's steps where 6.1's rxe answers otherwise
// than 6.12's (which the fake is): the capacities it reports (6.1 echoes
// the work requests asked for), and errors of a queue pair connected to
// itself (6.1 completes the failed request with its status, 6.12 flushes
// it with the error state its own responder caused).
var rxe61Differs = []string{
	"cq ", "qp {",
	"SEND longer than the receive (self)", "a receive with a bad lkey (self)",
	"WRITE with a bad rkey, then a SEND (self)", "READ past the region (self)",
	"a SEND from a bad lkey", "WRITE to a queue pair without remote write (self)",
}

// verbsScript runs the script on contexts open gives and returns what
// it saw, one line a step.
func verbsScript(t *testing.T, open func() *uverbs.Context) []string {
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
	e := newVerbsEnd(t, c, true)
	qpn := e.qp.QP().QPN
	var names map[uint32]string // of the failure cases' queue pairs
	wc := func(w uverbs.WC) string {
		own := "own"
		if n, ok := names[w.QPNum]; ok {
			own = n
		} else if w.QPNum != qpn {
			own = fmt.Sprint(w.QPNum)
		}
		return fmt.Sprintf("wr %d %v opcode %d len %d flags %d imm %#x qp %s src %d port %d", w.WRID, w.Status, w.Opcode,
			w.ByteLen, w.WCFlags, w.Ex, own, w.SrcQP, w.PortNum)
	}
	wcsOf := func(n int) {
		got := e.waitWCs(n, 5*time.Second)
		slices.SortStableFunc(got, func(a, b uverbs.WC) int { return int(a.WRID) - int(b.WRID) })
		for _, w := range got {
			say("  %s", wc(w))
		}
		if len(got) < n {
			say("  %d of %d completions", len(got), n)
		}
	}
	state := func() {
		a, err := c.QueryQP(e.qp.QP(), uverbs.QPAttrAll)
		say("  state %v (%s) sq_psn +%d rq_psn +%d", a.State, errno(err), a.SQPSN-goodLink.sqPSN, a.RQPSN-goodLink.rqPSN)
	}
	fresh := func(l verbsLink) {
		e.qp.Destroy()
		e.newQP(true)
		qpn = e.qp.QP().QPN
		if err := e.connect(e, l); err != nil {
			say("  connect: %s", errno(err))
		}
	}
	post := func(wr uverbs.SendWR) {
		if err := e.qp.PostSend(wr); err != nil {
			say("  post send: %s", errno(err))
		}
	}
	recv := func(id uint64, n int) {
		if err := e.qp.PostRecv(uverbs.RecvWR{ID: id, SGL: []uverbs.SGE{e.sge(8192, n)}}); err != nil {
			say("  post recv: %s", errno(err))
		}
	}

	// Shapes.
	say("cq %d entries; qp caps %+v", e.cq.CQ().CQE, e.qp.QP().Cap)
	for _, cqe := range []uint32{1, 100} {
		cq, err := c.CreateRxeCQ(cqe)
		if err == nil {
			say("cq of %d: %d entries", cqe, cq.CQ().CQE)
			cq.Destroy()
		}
	}
	cq := e.cq.CQ()
	for _, cp := range []uverbs.QPCap{{MaxSendWR: 10, MaxRecvWR: 5, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 64},
		{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 256}, {MaxInlineData: 512},
		{MaxInlineData: 513}, {MaxSendSGE: 32}, {MaxSendSGE: 33}} {
		qp, err := c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: cq, RecvCQ: cq, Type: ib.QPTypeRC, Cap: cp})
		say("qp %+v: %s %+v", cp, errno(err), func() uverbs.QPCap {
			if qp == nil {
				return uverbs.QPCap{}
			}
			return qp.QP().Cap
		}())
		if qp != nil {
			qp.Destroy()
		}
	}

	// The state machine.
	qp := e.qp.QP()
	init := uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: goodLink.access}
	say("RESET->RTR: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTR}, uverbs.QPAttrsInitToRTR)))
	say("RESET->ERR: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState)))
	say("RESET->RESET (or back from ERR): %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateReset}, uverbs.QPAttrState)))
	say("RESET->INIT without port: %s", errno(c.ModifyQP(qp, &init, uverbs.QPAttrsResetToInit&^uverbs.QPAttrPort)))
	say("RESET->INIT: %s", errno(c.ModifyQP(qp, &init, uverbs.QPAttrsResetToInit)))
	rtr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024, DestQPN: qp.QPN, RQPSN: 1, MaxDestRdAtomic: 1,
		MinRNRTimer: 1, AV: uverbs.AddressVector{DGID: e.gid, SGIDIndex: e.gidI, HopLimit: 64, IsGlobal: 1, PortNum: 1}}
	noGRH := rtr
	noGRH.AV.IsGlobal = 0
	say("INIT->RTR without GRH: %s", errno(c.ModifyQP(qp, &noGRH, uverbs.QPAttrsInitToRTR)))
	bigMTU := rtr
	bigMTU.PathMTU = ib.MTU8192
	say("INIT->RTR MTU 8192: %s", errno(c.ModifyQP(qp, &bigMTU, uverbs.QPAttrsInitToRTR)))
	say("INIT->RTR: %s", errno(c.ModifyQP(qp, &rtr, uverbs.QPAttrsInitToRTR)))
	say("RTR->RTS timeout 32: %s", errno(c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTS, Timeout: 32},
		uverbs.QPAttrsRTRToRTS)))
	say("RTS->INIT: %s", errno(c.ModifyQP(qp, &init, uverbs.QPAttrState)))
	say("DESTROY_CQ in use: %s; DEALLOC_PD in use: %s", errno(c.DestroyCQ(cq)), errno(c.DeallocPD(e.pd)))
	_, err := c.RegMR(e.pd, e.buf, uverbs.AccessRemoteWrite)
	say("REG_MR remote write alone: %s", errno(err))
	_, err = c.CreateRxeCQWith(uverbs.CQInit{CQE: 4, CompVector: 9})
	say("CREATE_CQ vector 9: %s", errno(err))

	// Traffic on a queue pair connected to itself.
	fresh(goodLink)
	fill := func(n int) {
		for i := range n {
			e.buf[i] = byte(i)
		}
	}
	fill(5000)
	say("SEND 5000:")
	recv(1, 8192)
	post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 5000)}})
	wcsOf(2)
	say("SEND with immediate, solicited:")
	recv(3, 64)
	post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSolicited, ImmData: 0x12345678, SGL: []uverbs.SGE{e.sge(0, 8)}})
	wcsOf(2)
	say("WRITE, WRITE with immediate, READ:")
	post(uverbs.SendWR{ID: 5, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{e.sge(0, 100)}, RemoteAddr: e.mr.Addr + 16384, RKey: e.mr.RKey})
	recv(6, 64)
	post(uverbs.SendWR{ID: 7, Opcode: uverbs.WRRDMAWriteWithImm, ImmData: 7, SGL: []uverbs.SGE{e.sge(0, 100)}, RemoteAddr: e.mr.Addr + 20000, RKey: e.mr.RKey})
	post(uverbs.SendWR{ID: 8, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{e.sge(30000, 100)}, RemoteAddr: e.mr.Addr + 16384, RKey: e.mr.RKey})
	wcsOf(4)
	say("  data %v", string(e.buf[16384:16484]) == string(e.buf[:100]) && string(e.buf[30000:30100]) == string(e.buf[:100]))
	say("a zero-length SEND:")
	recv(9, 64)
	post(uverbs.SendWR{ID: 10, Opcode: uverbs.WRSend})
	wcsOf(2)
	state()

	// Failures, each on fresh queue pairs: a queue pair connected to
	// itself, and two (A requests, B responds) connected to each other.
	type failure struct {
		name       string
		reqL, resL verbsLink
		run        func(req, res *uverbs.RxeQP)
		wcs        [2]int // completions connected to itself, and as a pair
	}
	sendOn := func(qp *uverbs.RxeQP, wr uverbs.SendWR) {
		if err := qp.PostSend(wr); err != nil {
			say("  post send: %s", errno(err))
		}
	}
	recvOn := func(qp *uverbs.RxeQP, id uint64, sge uverbs.SGE) {
		if err := qp.PostRecv(uverbs.RecvWR{ID: id, SGL: []uverbs.SGE{sge}}); err != nil {
			say("  post recv: %s", errno(err))
		}
	}
	noWrite, rnr1, ahead, behind := goodLink, goodLink, goodLink, goodLink
	noWrite.access = uverbs.AccessLocalWrite
	rnr1.rnrRetry = 1
	ahead.sqPSN, ahead.timeout, ahead.retry = goodLink.rqPSN+10, 8, 1
	behind.sqPSN, behind.timeout, behind.retry = goodLink.rqPSN-10, 8, 1
	failures := []failure{
		{"SEND longer than the receive", goodLink, goodLink, func(req, res *uverbs.RxeQP) {
			recvOn(res, 11, e.sge(8192, 100))
			sendOn(req, uverbs.SendWR{ID: 12, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 200)}})
		}, [2]int{2, 2}},
		{"a receive with a bad lkey", goodLink, goodLink, func(req, res *uverbs.RxeQP) {
			recvOn(res, 13, uverbs.SGE{Addr: e.mr.Addr, Length: 64, LKey: e.mr.LKey + 1})
			sendOn(req, uverbs.SendWR{ID: 14, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
		}, [2]int{2, 2}},
		{"WRITE with a bad rkey, then a SEND", goodLink, goodLink, func(req, res *uverbs.RxeQP) {
			sendOn(req, uverbs.SendWR{ID: 15, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{e.sge(0, 8)}, RemoteAddr: e.mr.Addr, RKey: e.mr.RKey + 1})
			wcsOf(1)
			sendOn(req, uverbs.SendWR{ID: 16, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
		}, [2]int{1, 1}},
		{"READ past the region", goodLink, goodLink, func(req, res *uverbs.RxeQP) {
			sendOn(req, uverbs.SendWR{ID: 18, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{e.sge(0, 64)}, RemoteAddr: e.mr.Addr + verbsBuf - 8, RKey: e.mr.RKey})
		}, [2]int{1, 1}},
		{"a SEND from a bad lkey", goodLink, goodLink, func(req, res *uverbs.RxeQP) {
			sendOn(req, uverbs.SendWR{ID: 20, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{{Addr: e.mr.Addr, Length: 8, LKey: 0x4242}}})
		}, [2]int{1, 1}},
		{"WRITE to a queue pair without remote write", goodLink, noWrite, func(req, res *uverbs.RxeQP) {
			sendOn(req, uverbs.SendWR{ID: 21, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{e.sge(0, 8)}, RemoteAddr: e.mr.Addr, RKey: e.mr.RKey})
		}, [2]int{1, 1}},
		{"no receive, rnr_retry 1", rnr1, rnr1, func(req, res *uverbs.RxeQP) {
			sendOn(req, uverbs.SendWR{ID: 22, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
		}, [2]int{1, 1}},
		{"requester PSN ahead, retry 1", ahead, goodLink, func(req, res *uverbs.RxeQP) {
			recvOn(res, 23, e.sge(8192, 64))
			sendOn(req, uverbs.SendWR{ID: 24, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
		}, [2]int{2, 1}},
		{"requester PSN behind, retry 1", behind, goodLink, func(req, res *uverbs.RxeQP) {
			recvOn(res, 25, e.sge(8192, 64))
			sendOn(req, uverbs.SendWR{ID: 26, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
		}, [2]int{2, 1}},
	}
	peerEnd := &verbsEnd{t: t, c: c, gid: e.gid, gidI: e.gidI, pd: e.pd, cq: e.cq}
	for ti, topo := range []string{"self", "pair"} {
		for _, f := range failures {
			say("%s (%s):", f.name, topo)
			if left := e.cq.Poll(make([]uverbs.WC, 16)); left > 0 {
				say("  %d completions left from before", left)
			}
			e.qp.Destroy()
			e.newQP(true)
			req, res := e.qp, e.qp
			resEnd := e
			if topo == "pair" {
				peerEnd.newQP(true)
				res, resEnd = peerEnd.qp, peerEnd
			}
			names = map[uint32]string{req.QP().QPN: "A"}
			if res != req {
				names[res.QP().QPN] = "B"
			}
			if err := e.connect(resEnd, f.reqL); err != nil {
				say("  connect: %s", errno(err))
			}
			if topo == "pair" {
				// B's own sends (none here) would go with B's link.
				l := f.resL
				l.sqPSN = goodLink.rqPSN
				if err := resEnd.connect(e, l); err != nil {
					say("  connect: %s", errno(err))
				}
			} else if f.resL.access != f.reqL.access {
				say("  access %s", errno(c.ModifyQP(req.QP(), &uverbs.QPAttr{State: ib.QPStateRTS, AccessFlags: f.resL.access},
					uverbs.QPAttrState|uverbs.QPAttrAccessFlags)))
			}
			f.run(req, res)
			wcsOf(f.wcs[ti])
			for _, qp := range []*uverbs.RxeQP{req, res} {
				a, err := c.QueryQP(qp.QP(), uverbs.QPAttrAll)
				say("  %s: state %v (%s) sq_psn %+d rq_psn %+d", names[qp.QP().QPN], a.State, errno(err),
					int32(a.SQPSN-f.reqL.sqPSN), int32(a.RQPSN-goodLink.rqPSN))
				if topo == "self" {
					break
				}
			}
			if topo == "pair" {
				peerEnd.qp.Destroy()
			}
		}
	}
	names = nil

	say("MODIFY to ERR with work queued, then RESET and again:")
	fresh(goodLink)
	recv(26, 8)
	say("  ERR: %s", errno(c.ModifyQP(e.qp.QP(), &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState)))
	post(uverbs.SendWR{ID: 27, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	wcsOf(2)
	say("  RESET: %s", errno(c.ModifyQP(e.qp.QP(), &uverbs.QPAttr{State: ib.QPStateReset}, uverbs.QPAttrState)))
	say("  doorbell in RESET: %s", errno(c.RingSendDoorbell(e.qp.QP())))
	if err := e.connect(e, goodLink); err != nil {
		say("  connect: %s", errno(err))
	}
	recv(28, 8)
	post(uverbs.SendWR{ID: 29, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	wcsOf(2)

	// Events and what DESTROY_CQ counts, on a new queue nothing else
	// waited on.
	say("events:")
	e.qp.Destroy()
	e.cq.Destroy()
	if e.cq, err = c.CreateRxeCQWith(uverbs.CQInit{CQE: 16, Channel: e.ch}); err != nil {
		t.Fatal(err)
	}
	fresh(goodLink)
	if err := e.cq.Arm(false); err != nil {
		say("  arm: %s", errno(err))
	}
	recv(30, 8)
	post(uverbs.SendWR{ID: 31, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	say("  event: %s", errno(e.cq.WaitEvent(wctx)))
	cancel()
	say("  %d completions", len(e.pollN(2, 5*time.Second)))
	e.qp.Destroy()
	e.qp = nil
	ev, err := e.cq.DestroyEvents()
	say("  DESTROY_CQ: %s, reported %+v", errno(err), ev)
	if e.cq, err = c.CreateRxeCQ(4); err != nil {
		t.Fatal(err)
	}
	e.close()
	return out
}

// The busy loops' yields follow where rxe works: Debian's 6.1 rxe runs in
// softirq (its BTF names no rxe_alloc_wq), 6.12's on a workqueue.
func TestRxeThreads(t *testing.T) {
	release := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	want := !strings.HasPrefix(release, "6.1.")
	if got := spin.RxeThreads(); got != want {
		t.Errorf("spin.RxeThreads() on %s = %v, want %v", release, got, want)
	}
}
