package uverbstest_test

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

const qkey = 0x11111111

// udEnd is an end with a UD queue pair in RTS and an address handle to
// peer's IPv4 GID.
func udPair(t *testing.T) (a, b *end, fab *uverbstest.Fabric) {
	return udPairOf(t, uverbstest.Config{})
}

func udPairOf(t *testing.T, cfg uverbstest.Config) (a, b *end, fab *uverbstest.Fabric) {
	t.Helper()
	fab = uverbstest.NewFabric()
	a = newEndOf(t, fab.NewDevice(cfg), ib.QPTypeUD, true)
	b = newEndOf(t, fab.NewDevice(cfg), ib.QPTypeUD, true)
	for _, e := range []*end{a, b} {
		if err := e.c.ConnectUD(e.qp.QP(), 1, qkey, 0x42); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, fab
}

// ahTo makes an address handle from e to GID 1 (the IPv4 one) of dev.
func (e *end) ahTo(dev *uverbstest.Device) uverbs.AH {
	e.t.Helper()
	ah, err := e.c.CreateRxeAH(e.pd, uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: dev.GID(1), SGIDIndex: 1, HopLimit: 64},
		IsGlobal: 1, PortNum: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := e.c.DestroyAH(ah); err != nil {
			e.t.Errorf("destroy AH: %v", err)
		}
	})
	return ah
}

func (e *end) sendTo(ah uverbs.AH, id uint64, off, n int, qpn, qk uint32) {
	e.t.Helper()
	e.post(uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{e.sge(off, n)},
		AH: &ah, RemoteQPN: qpn, RemoteQKey: qk})
}

// A datagram between hosts: the receive holds the IPv4 header ahead of
// the payload, from which the sender's GID is read; the completion names
// the sending queue pair. The address vector alone (a kernel before 5.10)
// delivers the same.
func TestUDBetweenHosts(t *testing.T) {
	a, b, _ := udPair(t)
	ah := a.ahTo(b.dev)
	if ah.RxeAHNum() == 0 {
		t.Fatal("no AH number")
	}
	fill(a.buf[:4096], 3)
	for i, h := range []uverbs.AH{ah, ah.AVOnly()} {
		id := uint64(10 * (i + 1))
		clear(b.buf[:8192])
		b.recv(id, 0, uverbs.GRHSize+1024)
		a.sendTo(h, id+1, 0, 100, b.qp.QP().QPN, qkey)
		wantWC(t, a.wait(1)[0], id+1, uverbs.WCSuccess, uverbs.WCSend, 100)
		wc := b.wait(1)[0]
		wantWC(t, wc, id, uverbs.WCSuccess, uverbs.WCRecv, uverbs.GRHSize+100)
		if wc.SrcQP != a.qp.QP().QPN || wc.WCFlags&uverbs.WCGRH == 0 || wc.QPNum != b.qp.QP().QPN {
			t.Errorf("receive completion %+v: want src_qp %d, the GRH flag", wc, a.qp.QP().QPN)
		}
		if !equal(b.buf[uverbs.GRHSize:uverbs.GRHSize+100], a.buf[:100]) {
			t.Error("the payload differs")
		}
		g, err := uverbs.ParseGRH(b.buf)
		if err != nil {
			t.Fatal(err)
		}
		want := uverbs.GRH{IPv4: true, SGID: a.dev.GID(1), DGID: b.dev.GID(1), HopLimit: 64, NextHeader: 17,
			PayloadLength: 8 + 12 + 8 + 100 + 4}
		if g != want {
			t.Errorf("GRH %+v\nwant %+v", g, want)
		}
	}
}

// What UD drops, and what its sender never hears of: a wrong Q_Key (its
// high bit set too: rxe sends it as it is), an unknown queue pair, no
// receive posted, a lost packet, a receive too small (6.12); on 6.1 a
// receive too small fails, and its queue pair goes to the error state.
func TestUDDrops(t *testing.T) {
	t.Run("6.12", func(t *testing.T) { udDrops(t, false) })
	t.Run("6.1", func(t *testing.T) { udDrops(t, true) })
}

func udDrops(t *testing.T, shortFails bool) {
	a, b, fab := udPairOf(t, uverbstest.Config{ShortReceiveFails: shortFails})
	ah := a.ahTo(b.dev)
	qpn := b.qp.QP().QPN
	nothing := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		wcs := make([]uverbs.WC, 4)
		if n, err := b.cq.Wait(ctx, wcs); err == nil {
			t.Errorf("%s: received %+v", what, wcs[:n])
		}
	}
	sent := func(id uint64) {
		t.Helper()
		wantWC(t, a.wait(1)[0], id, uverbs.WCSuccess, uverbs.WCSend, 64)
	}
	a.sendTo(ah, 1, 0, 64, qpn, qkey)
	sent(1)
	nothing("no receive posted")

	b.recv(2, 0, uverbs.GRHSize+64)
	a.sendTo(ah, 3, 0, 64, qpn, qkey+1)
	sent(3)
	nothing("a wrong Q_Key")
	a.sendTo(ah, 4, 0, 64, 0xabcdef, qkey)
	sent(4)
	nothing("an unknown queue pair")
	a.sendTo(ah, 5, 0, 64, qpn, 0x80000000)
	sent(5)
	nothing("the Q_Key's high bit")

	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment { return uverbstest.Impairment{Drop: true} })
	a.sendTo(ah, 6, 0, 64, qpn, qkey)
	sent(6)
	nothing("a lost packet")
	fab.Impair(nil)

	a.sendTo(ah, 7, 0, 65, qpn, qkey)
	wantWC(t, a.wait(1)[0], 7, uverbs.WCSuccess, uverbs.WCSend, 65)
	if !shortFails {
		nothing("a receive too small")
		a.sendTo(ah, 8, 0, 64, qpn, qkey)
		sent(8)
		wantWC(t, b.wait(1)[0], 2, uverbs.WCSuccess, uverbs.WCRecv, uverbs.GRHSize+64)
		return
	}
	if wc := b.wait(1)[0]; wc.WRID != 2 || wc.Status != uverbs.WCLocQPOpErr {
		t.Errorf("a receive too small: %+v", wc)
	}
	if s := b.state(); s != ib.QPStateErr {
		t.Errorf("after a receive too small: %v", s)
	}
}

// A datagram larger than the port's MTU is not sent, and its send
// completes as if it had been (C10-93.1.1; rxe does so).
func TestUDLargerThanMTU(t *testing.T) {
	a, b, _ := udPair(t)
	ah := a.ahTo(b.dev)
	b.recv(1, 0, uverbs.GRHSize+4096)
	a.sendTo(ah, 2, 0, 1025, b.qp.QP().QPN, qkey)
	wantWC(t, a.wait(1)[0], 2, uverbs.WCSuccess, uverbs.WCSend, 1025)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if n, err := b.cq.Wait(ctx, make([]uverbs.WC, 1)); err == nil {
		t.Errorf("a 1025-byte datagram at MTU 1024 arrived (%d completions)", n)
	}
}

// A delayed datagram is passed by the next one: UD does not keep order.
func TestUDReorders(t *testing.T) {
	a, b, fab := udPair(t)
	ah := a.ahTo(b.dev)
	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment {
		if p.Length == 10 {
			return uverbstest.Impairment{Delay: 100 * time.Millisecond}
		}
		return uverbstest.Impairment{}
	})
	b.recv(1, 0, uverbs.GRHSize+64)
	b.recv(2, 4096, uverbs.GRHSize+64)
	a.sendTo(ah, 11, 0, 10, b.qp.QP().QPN, qkey)
	a.sendTo(ah, 12, 0, 20, b.qp.QP().QPN, qkey)
	a.wait(2)
	got := b.wait(2)
	if got[0].ByteLen != uverbs.GRHSize+20 || got[1].ByteLen != uverbs.GRHSize+10 {
		t.Errorf("arrivals %d then %d bytes, want 20 then 10", got[0].ByteLen-uverbs.GRHSize, got[1].ByteLen-uverbs.GRHSize)
	}
}

// Address handles: their checks, and the objects they hold.
func TestAddressHandles(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{IPv4: netip.MustParseAddr("10.1.2.3")})
	e := newEndOf(t, dev, ib.QPTypeUD, true)
	good := uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: dev.GID(1), SGIDIndex: 1, HopLimit: 64}, IsGlobal: 1, PortNum: 1}
	for name, c := range map[string]func(a *uverbs.AHAttr){
		"no GRH on RoCE": func(a *uverbs.AHAttr) { a.IsGlobal = 0 },
		"no such GID":    func(a *uverbs.AHAttr) { a.GRH.SGIDIndex = 9 },
		"no such port":   func(a *uverbs.AHAttr) { a.PortNum = 2 },
		"port 0":         func(a *uverbs.AHAttr) { a.PortNum = 0 },
	} {
		attr := good
		c(&attr)
		if ah, err := e.c.CreateRxeAH(e.pd, attr); err == nil {
			t.Errorf("%s: created %+v", name, ah)
		}
	}
	ah, err := e.c.CreateRxeAH(e.pd, good)
	if err != nil {
		t.Fatal(err)
	}
	if r := dev.Resources(); r.AHs != 1 {
		t.Errorf("resources %+v, want 1 AH", r)
	}
	wantErrno(t, "DEALLOC_PD with an AH", e.c.DeallocPD(e.pd), syscall.EBUSY)
	if err := e.c.DestroyAH(ah); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "DESTROY_AH twice", e.c.DestroyAH(ah), syscall.EINVAL)
}
