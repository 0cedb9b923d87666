package uverbstest_test

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// SEND into a posted receive, RDMA WRITE into and RDMA READ out of the
// other host's memory, each verified byte for byte.
func TestSendWriteReadBetweenHosts(t *testing.T) {
	a, b, _ := pair(t, defaultLink)
	const n = 5000 // more than the MTU: several PSNs
	fill(a.buf[:n], 1)

	b.recv(10, 0, 8192)
	a.post(uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, n)}})
	wantWC(t, a.wait(1)[0], 1, uverbs.WCSuccess, uverbs.WCSend, n)
	recv := b.wait(1)[0]
	wantWC(t, recv, 10, uverbs.WCSuccess, uverbs.WCRecv, n)
	if recv.QPNum != b.qp.QP().QPN || recv.WCFlags != 1 || recv.PortNum != 1 {
		t.Errorf("receive completion %+v: want qp %d, GRH flag, port 1", recv, b.qp.QP().QPN)
	}
	if !equal(b.buf[:n], a.buf[:n]) {
		t.Fatal("SEND: the received bytes differ")
	}

	fill(a.buf[8192:8192+n], 2)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(8192, n)},
		RemoteAddr: b.mr.Addr + 16384, RKey: b.mr.RKey})
	wantWC(t, a.wait(1)[0], 2, uverbs.WCSuccess, uverbs.WCRDMAWrite, n)
	if !equal(b.buf[16384:16384+n], a.buf[8192:8192+n]) {
		t.Fatal("RDMA WRITE: the written bytes differ")
	}

	a.post(uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(32768, n)},
		RemoteAddr: b.mr.Addr + 16384, RKey: b.mr.RKey})
	wantWC(t, a.wait(1)[0], 3, uverbs.WCSuccess, uverbs.WCRDMARead, n)
	if !equal(a.buf[32768:32768+n], b.buf[16384:16384+n]) {
		t.Fatal("RDMA READ: the read bytes differ")
	}

	// The PSNs moved by the packets the messages took (5 each at 1024).
	attr, err := a.c.QueryQP(a.qp.QP(), uverbs.QPAttrAll)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != ib.QPStateRTS || attr.SQPSN != defaultLink.psn+15 || attr.DestQPN != b.qp.QP().QPN {
		t.Errorf("QUERY_QP after traffic: %+v", attr)
	}
}

// A queue pair connected to itself, as the single-host probe does, with
// immediate data and a scatter list of two SGEs; a send neither signalled
// nor on a queue pair that signals all completes silently.
func TestLoopbackToSelf(t *testing.T) {
	e := newEndSignalling(t, uverbstest.NewDevice(uverbstest.Config{}), false)
	e.connect(e, defaultLink)
	fill(e.buf[:300], 3)
	if err := e.qp.PostRecv(uverbs.RecvWR{ID: 7, SGL: []uverbs.SGE{e.sge(4096, 100), e.sge(8192, 200)}}); err != nil {
		t.Fatal(err)
	}
	e.post(uverbs.SendWR{ID: 8, Opcode: uverbs.WRSendWithImm, ImmData: 0xabcd, SGL: []uverbs.SGE{e.sge(0, 300)}})
	wc := e.wait(1)[0]
	wantWC(t, wc, 7, uverbs.WCSuccess, uverbs.WCRecv, 300)
	if wc.Ex != 0xabcd || wc.WCFlags != 3 {
		t.Errorf("receive %+v: want immediate 0xabcd, flags GRH|WITH_IMM", wc)
	}
	// The send was not signalled (and sq_sig_all is off): no completion.
	if n := e.cq.Poll(make([]uverbs.WC, 4)); n != 0 {
		t.Errorf("%d more completions, want none", n)
	}
	if !equal(e.buf[4096:4196], e.buf[:100]) || !equal(e.buf[8192:8392], e.buf[100:300]) {
		t.Fatal("the scatter list got other bytes")
	}
}

// Many connections at once between two hosts, each its own goroutine
// waiting with events: every message arrives whole, in order.
func TestManyConnections(t *testing.T) {
	fab := uverbstest.NewFabric()
	da, db := fab.NewDevice(uverbstest.Config{}), fab.NewDevice(uverbstest.Config{})
	const conns, msgs = 16, 50
	var wg sync.WaitGroup
	for i := range conns {
		a, b := newEnd(t, da), newEnd(t, db)
		a.connect(b, defaultLink)
		b.connect(a, defaultLink)
		wg.Go(func() {
			for m := range msgs {
				b.recv(uint64(m), 0, 64)
				binary.LittleEndian.PutUint64(a.buf, uint64(i*1000+m))
				if err := a.qp.PostSend(uverbs.SendWR{ID: uint64(m), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}}); err != nil {
					t.Error(err)
					return
				}
				wc := b.wait(1)[0]
				if wc.Status != uverbs.WCSuccess || wc.WRID != uint64(m) || binary.LittleEndian.Uint64(b.buf) != uint64(i*1000+m) {
					t.Errorf("connection %d message %d: %+v, payload %d", i, m, wc, binary.LittleEndian.Uint64(b.buf))
					return
				}
				a.wait(1)
			}
		})
	}
	wg.Wait()
	if r := da.Resources(); r.QPs != conns || r.Contexts != conns {
		t.Errorf("host a: %+v", r)
	}
}
