package uverbstest_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// end is one side of a connection: a context on a fake device with the
// objects a probe makes, a completion channel, and 64 KiB registered.
type end struct {
	t   *testing.T
	dev *uverbstest.Device
	c   *uverbs.Context
	pd  uverbs.PD
	ch  *uverbs.CompChannel
	cq  *uverbs.RxeCQ
	qp  *uverbs.RxeQP
	buf []byte
	mr  uverbs.MR
}

const bufSize = 64 << 10

// newEnd makes an end whose queue pair signals every send, as the probe's.
func newEnd(t *testing.T, dev *uverbstest.Device) *end {
	t.Helper()
	return newEndSignalling(t, dev, true)
}

func newEndSignalling(t *testing.T, dev *uverbstest.Device, signalAll bool) *end {
	t.Helper()
	return newEndOf(t, dev, ib.QPTypeRC, signalAll)
}

// newEndOf makes an end whose queue pair is of type typ.
func newEndOf(t *testing.T, dev *uverbstest.Device, typ ib.QPType, signalAll bool) *end {
	t.Helper()
	e := &end{t: t, dev: dev}
	var err error
	if e.c, err = dev.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	if e.pd, err = e.c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.ch, err = e.c.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = e.c.CreateRxeCQWith(uverbs.CQInit{CQE: 64, Channel: e.ch}); err != nil {
		t.Fatal(err)
	}
	cq := e.cq.CQ()
	if e.qp, err = e.c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: cq, RecvCQ: cq, Type: typ, SignalAll: signalAll,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}}); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = uverbs.AllocBuffer(bufSize); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	return e
}

// close tears down in order and checks that every step works.
func (e *end) close() {
	if e.c == nil {
		return
	}
	if e.qp != nil {
		if err := e.qp.Destroy(); err != nil {
			e.t.Errorf("destroy QP: %v", err)
		}
	}
	if e.cq != nil {
		if err := e.cq.Destroy(); err != nil {
			e.t.Errorf("destroy CQ: %v", err)
		}
	}
	if err := e.c.DeregMR(e.mr); err != nil {
		e.t.Errorf("dereg MR: %v", err)
	}
	if err := e.c.DeallocPD(e.pd); err != nil {
		e.t.Errorf("dealloc PD: %v", err)
	}
	e.ch.Close()
	if err := e.c.Close(); err != nil {
		e.t.Errorf("close: %v", err)
	}
	uverbs.FreeBuffer(e.buf)
	e.c = nil
}

// link are the connection attributes both sides use.
type link struct {
	psn      uint32
	mtu      ib.MTU
	timeout  uint8
	retry    uint8
	rnrRetry uint8
	minRNR   uint8
	rdAtomic uint8
	access   uverbs.Access
	gidIndex uint8
}

var defaultLink = link{psn: 0x1234, mtu: ib.MTU1024, timeout: 14, retry: 7, rnrRetry: 3, minRNR: 1, rdAtomic: 1,
	access: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead, gidIndex: 1}

// connect brings e's queue pair to RTS, connected to peer's (itself when
// peer is e).
func (e *end) connect(peer *end, l link) {
	e.t.Helper()
	qp := e.qp.QP()
	if err := e.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: l.access},
		uverbs.QPAttrsResetToInit); err != nil {
		e.t.Fatalf("INIT: %v", err)
	}
	rtr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: l.mtu, DestQPN: peer.qp.QP().QPN, RQPSN: l.psn,
		MaxDestRdAtomic: l.rdAtomic, MinRNRTimer: l.minRNR,
		AV: uverbs.AddressVector{DGID: peer.dev.GID(int(l.gidIndex)), SGIDIndex: l.gidIndex, HopLimit: 64, IsGlobal: 1, PortNum: 1}}
	if err := e.c.ModifyQP(qp, &rtr, uverbs.QPAttrsInitToRTR); err != nil {
		e.t.Fatalf("RTR: %v", err)
	}
	rts := uverbs.QPAttr{State: ib.QPStateRTS, Timeout: l.timeout, RetryCnt: l.retry, RNRRetry: l.rnrRetry,
		SQPSN: l.psn, MaxRdAtomic: l.rdAtomic}
	if err := e.c.ModifyQP(qp, &rts, uverbs.QPAttrsRTRToRTS); err != nil {
		e.t.Fatalf("RTS: %v", err)
	}
}

// pair makes two ends on two devices of one fabric, connected.
func pair(t *testing.T, l link) (a, b *end, fab *uverbstest.Fabric) {
	fab = uverbstest.NewFabric()
	a, b = newEnd(t, fab.NewDevice(uverbstest.Config{})), newEnd(t, fab.NewDevice(uverbstest.Config{}))
	a.connect(b, l)
	b.connect(a, l)
	return a, b, fab
}

// sge is n bytes at off of e's registered buffer.
func (e *end) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr + uint64(off), Length: uint32(n), LKey: e.mr.LKey}
}

func (e *end) post(wr uverbs.SendWR) {
	e.t.Helper()
	if err := e.qp.PostSend(wr); err != nil {
		e.t.Fatalf("post send: %v", err)
	}
}

func (e *end) recv(id uint64, off, n int) {
	e.t.Helper()
	if err := e.qp.PostRecv(uverbs.RecvWR{ID: id, SGL: []uverbs.SGE{e.sge(off, n)}}); err != nil {
		e.t.Fatalf("post recv: %v", err)
	}
}

// wait returns the next n completions, waiting for them with events.
func (e *end) wait(n int) []uverbs.WC {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []uverbs.WC
	wcs := make([]uverbs.WC, 16)
	for len(got) < n {
		k, err := e.cq.Wait(ctx, wcs[:min(len(wcs), n-len(got))])
		if err != nil {
			e.t.Fatalf("waiting for %d completions, got %+v: %v", n, got, err)
		}
		got = append(got, wcs[:k]...)
	}
	return got
}

// state returns the queue pair's state.
func (e *end) state() ib.QPState {
	e.t.Helper()
	a, err := e.c.QueryQP(e.qp.QP(), uverbs.QPAttrAll)
	if err != nil {
		e.t.Fatal(err)
	}
	return a.State
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func wantWC(t *testing.T, got uverbs.WC, id uint64, status uverbs.WCStatus, op uverbs.WCOpcode, n uint32) {
	t.Helper()
	if got.WRID != id || got.Status != status || (status == uverbs.WCSuccess && (got.Opcode != op || got.ByteLen != n)) {
		t.Errorf("completion %+v (%v); want wr %d %v %v %d bytes", got, got.Status, id, status, op, n)
	}
}

func wantErrno(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }
