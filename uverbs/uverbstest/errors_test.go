package uverbstest_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// A WRITE or READ with a key the peer does not have, beyond its region,
// or without the peer's permission: the requester completes with a remote
// access error (REM_ACCESS_ERR, or REM_INV_REQ_ERR when the queue pair
// forbids the operation), both queue pairs go to the error state, and
// what was queued behind is flushed.
func TestRemoteAccessErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		access uverbs.Access // the queue pairs'
		wr     func(a, b *end) uverbs.SendWR
		want   uverbs.WCStatus
	}{
		{"write bad rkey", defaultLink.access, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey + 1}
		}, uverbs.WCRemAccessErr},
		{"read bad rkey", defaultLink.access, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr, RKey: 0x12345}
		}, uverbs.WCRemAccessErr},
		{"write past the region", defaultLink.access, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr + bufSize - 32, RKey: b.mr.RKey}
		}, uverbs.WCRemAccessErr},
		{"read with the lkey of another host", defaultLink.access, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr, RKey: a.mr.RKey ^ 0x100}
		}, uverbs.WCRemAccessErr},
		{"write to a queue pair without remote write", uverbs.AccessLocalWrite | uverbs.AccessRemoteRead, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}
		}, uverbs.WCRemInvReqErr},
		{"read from a queue pair without remote read", uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite, func(a, b *end) uverbs.SendWR {
			return uverbs.SendWR{Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}
		}, uverbs.WCRemInvReqErr},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := defaultLink
			l.access = tt.access
			a, b, _ := pair(t, l)
			b.recv(1, 0, 64) // flushed when b goes to the error state
			wr := tt.wr(a, b)
			wr.ID = 5
			a.post(wr)
			a.post(uverbs.SendWR{ID: 6, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
			wcs := a.wait(2)
			wantWC(t, wcs[0], 5, tt.want, 0, 0)
			wantWC(t, wcs[1], 6, uverbs.WCWRFlushErr, 0, 0)
			wantWC(t, b.wait(1)[0], 1, uverbs.WCWRFlushErr, 0, 0)
			if a.state() != ib.QPStateErr || b.state() != ib.QPStateErr {
				t.Errorf("states %v and %v, want ERR and ERR", a.state(), b.state())
			}
		})
	}
}

// An SGE of the requester outside its own regions: the requester refuses
// it without sending a packet and the queue pair goes to the error state,
// where rxe 6.12 completes it as flushed (6.1: LOC_QP_OP_ERR).
func TestLocalProtectionError(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	var sent atomic.Int32
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment { sent.Add(1); return uverbstest.Impairment{} })
	a.post(uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{{Addr: a.mr.Addr, Length: 8, LKey: a.mr.LKey + 1}}})
	wantWC(t, a.wait(1)[0], 1, uverbs.WCWRFlushErr, 0, 0)
	if a.state() != ib.QPStateErr {
		t.Errorf("state %v, want ERR", a.state())
	}
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(bufSize-4, 8)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey})
	wantWC(t, a.wait(1)[0], 2, uverbs.WCWRFlushErr, 0, 0)
	if n := sent.Load(); n != 0 {
		t.Errorf("%d packets sent, want none", n)
	}
}

// A SEND longer than the receive's buffers, or a receive SGE outside the
// receiver's regions, is a malformed request to rxe: LOC_QP_OP_ERR at the
// receiver, REM_OP_ERR at the sender. Path MTUs that differ: an invalid
// request.
func TestReceiveErrors(t *testing.T) {
	t.Run("too long", func(t *testing.T) {
		a, b, _ := pair(t, defaultLink)
		b.recv(1, 0, 100)
		a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 101)}})
		wantWC(t, a.wait(1)[0], 2, uverbs.WCRemOpErr, 0, 0)
		wantWC(t, b.wait(1)[0], 1, uverbs.WCLocQPOpErr, 0, 0)
	})
	t.Run("bad receive lkey", func(t *testing.T) {
		a, b, _ := pair(t, defaultLink)
		if err := b.qp.PostRecv(uverbs.RecvWR{ID: 1, SGL: []uverbs.SGE{{Addr: b.mr.Addr, Length: 100, LKey: 7}}}); err != nil {
			t.Fatal(err)
		}
		a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 10)}})
		wantWC(t, a.wait(1)[0], 2, uverbs.WCRemOpErr, 0, 0)
		wantWC(t, b.wait(1)[0], 1, uverbs.WCLocQPOpErr, 0, 0)
	})
	t.Run("path MTU mismatch", func(t *testing.T) {
		fab := uverbstest.NewFabric()
		a, b := newEnd(t, fab.NewDevice(uverbstest.Config{})), newEnd(t, fab.NewDevice(uverbstest.Config{}))
		la, lb := defaultLink, defaultLink
		la.mtu, lb.mtu = ib.MTU4096, ib.MTU1024
		a.connect(b, la)
		b.connect(a, lb)
		b.recv(1, 0, 8192)
		a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 2000)}})
		wantWC(t, a.wait(1)[0], 2, uverbs.WCRemInvReqErr, 0, 0)
	})
}

// No receive posted: the responder answers RNR NAKs; the requester waits
// its peer's RNR timer each time and gives up after rnr_retry retries, or
// retries for ever with rnr_retry 7 until a receive comes.
func TestReceiverNotReady(t *testing.T) {
	l := defaultLink
	l.rnrRetry = 2
	a, b, fab := pair(t, l)
	var mu sync.Mutex
	var attempts []int
	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment {
		mu.Lock()
		defer mu.Unlock()
		if !p.Response {
			attempts = append(attempts, p.Attempt)
		}
		return uverbstest.Impairment{}
	})
	a.post(uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wantWC(t, a.wait(1)[0], 1, uverbs.WCRNRRetryExcErr, 0, 0)
	mu.Lock()
	if len(attempts) != 3 {
		t.Errorf("attempts %v, want the first and 2 retries", attempts)
	}
	mu.Unlock()
	if b.state() != ib.QPStateRTS {
		t.Errorf("receiver in %v, want RTS: RNR is no error there", b.state())
	}

	l.rnrRetry = 7
	a, b, _ = pair(t, l)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	time.Sleep(5 * time.Millisecond) // a few RNR rounds of 10 µs
	b.recv(3, 0, 8)
	wantWC(t, a.wait(1)[0], 2, uverbs.WCSuccess, uverbs.WCSend, 8)
	wantWC(t, b.wait(1)[0], 3, uverbs.WCSuccess, uverbs.WCRecv, 8)
}

// Lost packets: a lost request or answer is sent again after the ACK
// timeout; a duplicate SEND is acknowledged without taking a second
// receive; when every try is lost the requester fails with
// RETRY_EXC_ERR after retry_cnt retries.
func TestPacketLoss(t *testing.T) {
	l := defaultLink
	l.timeout = 1 // 8 µs
	l.retry = 3
	a, b, fab := pair(t, l)
	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment {
		// The first answer to each request is lost.
		return uverbstest.Impairment{Drop: p.Response && p.Attempt == 0}
	})
	b.recv(1, 0, 64)
	b.recv(2, 64, 64)
	a.post(uverbs.SendWR{ID: 3, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 16)}})
	wantWC(t, a.wait(1)[0], 3, uverbs.WCSuccess, uverbs.WCSend, 16)
	wantWC(t, b.wait(1)[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 16)
	if n := b.cq.Poll(make([]uverbs.WC, 2)); n != 0 {
		t.Errorf("the retried SEND took another receive")
	}
	a.post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(0, 16)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey})
	wantWC(t, a.wait(1)[0], 4, uverbs.WCSuccess, uverbs.WCRDMARead, 16)

	var tries atomic.Int32
	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment {
		tries.Add(1)
		return uverbstest.Impairment{Drop: p.From == a.dev}
	})
	a.post(uverbs.SendWR{ID: 5, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 16)}})
	wantWC(t, a.wait(1)[0], 5, uverbs.WCRetryExcErr, 0, 0)
	if n := tries.Load(); n != 4 {
		t.Errorf("%d tries, want 1 + 3 retries", n)
	}
}

// A delayed packet arrives late, and whole.
func TestPacketDelay(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 20 * time.Millisecond}
	})
	b.recv(1, 0, 64)
	start := time.Now()
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 16)}})
	wantWC(t, b.wait(1)[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 16)
	wantWC(t, a.wait(1)[0], 2, uverbs.WCSuccess, uverbs.WCSend, 16)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("request and answer took %v, want both delays", d)
	}
}

// A port that goes down loses the packets: retries, then RETRY_EXC_ERR;
// QUERY_PORT says DOWN and Disabled.
func TestPortDown(t *testing.T) {
	l := defaultLink
	l.timeout, l.retry = 1, 1
	a, b, _ := pair(t, l)
	b.dev.SetPortState(1, ib.PortDown)
	attr, err := b.c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != ib.PortDown || attr.PhysState != ib.PhysDisabled {
		t.Errorf("QUERY_PORT state %d, physical %d; want DOWN, Disabled", attr.State, attr.PhysState)
	}
	b.recv(1, 0, 8)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wantWC(t, a.wait(1)[0], 2, uverbs.WCRetryExcErr, 0, 0)
}

// A SEND to a queue pair number nobody has, or to a queue pair connected
// elsewhere, is lost like a packet.
func TestWrongDestination(t *testing.T) {
	l := defaultLink
	l.timeout, l.retry = 1, 0
	fab := uverbstest.NewFabric()
	a, b, c := newEnd(t, fab.NewDevice(uverbstest.Config{})), newEnd(t, fab.NewDevice(uverbstest.Config{})),
		newEnd(t, fab.NewDevice(uverbstest.Config{}))
	a.connect(b, l)
	b.connect(c, l) // b expects c, not a
	b.recv(1, 0, 8)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wantWC(t, a.wait(1)[0], 2, uverbs.WCRetryExcErr, 0, 0)
	if n := b.cq.Poll(make([]uverbs.WC, 1)); n != 0 {
		t.Error("b took a SEND from a host it is not connected to")
	}
}

// PSNs that differ on the two sides: a requester ahead of what its
// responder expects is refused with a sequence NAK, one behind is
// answered with an ACK of PSNs before its own; either way its retries run
// out.
func TestPSNMismatch(t *testing.T) {
	for _, psns := range [][2]uint32{{200, 100}, {100, 200}} {
		fab := uverbstest.NewFabric()
		a, b := newEnd(t, fab.NewDevice(uverbstest.Config{})), newEnd(t, fab.NewDevice(uverbstest.Config{}))
		la, lb := defaultLink, defaultLink
		la.psn, lb.psn, la.timeout, la.retry = psns[0], psns[1], 1, 2
		a.connect(b, la)
		b.connect(a, lb)
		b.recv(1, 0, 8)
		a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		wantWC(t, a.wait(1)[0], 2, uverbs.WCRetryExcErr, 0, 0)
		if n := b.cq.Poll(make([]uverbs.WC, 1)); n != 0 {
			t.Errorf("PSNs %v: the responder took the SEND", psns)
		}
	}
}

// Work requests posted to a queue pair in the error state are flushed;
// moving it to RESET drops them and lets it connect again.
func TestErrorStateAndReset(t *testing.T) {
	a, b, _ := pair(t, defaultLink)
	if err := a.c.ModifyQP(a.qp.QP(), &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	a.recv(1, 0, 8)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wcs := a.wait(2)
	for _, wc := range wcs {
		if wc.Status != uverbs.WCWRFlushErr {
			t.Errorf("%+v, want a flush", wc)
		}
	}
	if err := a.c.ModifyQP(a.qp.QP(), &uverbs.QPAttr{State: ib.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	a.connect(b, defaultLink)
	b.recv(3, 0, 8)
	a.post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wantWC(t, a.wait(1)[0], 4, uverbs.WCSuccess, uverbs.WCSend, 8)
	wantWC(t, b.wait(1)[0], 3, uverbs.WCSuccess, uverbs.WCRecv, 8)
}

// The doorbell before RTS is refused, as rxe_post_send does.
func TestPostSendBeforeRTS(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	err := e.qp.PostSend(uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	wantErrno(t, "PostSend in RESET", err, unix.EINVAL)
}
