package uverbstest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Two fake hosts on one fabric: host a sends a message to host b, whose
// queue pair has a receive posted; b waits for the completion with an
// event, without polling.
func Example() {
	fab := uverbstest.NewFabric()
	hosts := []*uverbstest.Device{fab.NewDevice(uverbstest.Config{}), fab.NewDevice(uverbstest.Config{})}
	type side struct {
		c   *uverbs.Context
		ch  *uverbs.CompChannel
		cq  *uverbs.RxeCQ
		qp  *uverbs.RxeQP
		buf []byte
		mr  uverbs.MR
	}
	var s [2]side
	for i, dev := range hosts {
		c, err := dev.Open() // a *uverbs.Context, as uverbs.Open gives
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		pd, _ := c.AllocPD()
		ch, _ := c.CreateCompChannel()
		defer ch.Close()
		cq, _ := c.CreateRxeCQWith(uverbs.CQInit{CQE: 16, Channel: ch})
		qp, err := c.CreateRxeQP(uverbs.QPInit{PD: pd, SendCQ: cq.CQ(), RecvCQ: cq.CQ(), Type: ib.QPTypeRC,
			SignalAll: true, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		buf, _ := uverbs.AllocBuffer(4096)
		defer uverbs.FreeBuffer(buf)
		mr, _ := c.RegMR(pd, buf, uverbs.AccessLocalWrite)
		s[i] = side{c, ch, cq, qp, buf, mr}
	}
	// Connect each queue pair to the other's: GID 1 is the IPv4 one.
	for i := range s {
		me, peer := s[i], s[1-i]
		qp := me.qp.QP()
		me.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
			uverbs.QPAttrsResetToInit)
		me.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024, DestQPN: peer.qp.QP().QPN,
			RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12, AV: uverbs.AddressVector{DGID: hosts[1-i].GID(1), SGIDIndex: 1,
				HopLimit: 64, IsGlobal: 1, PortNum: 1}}, uverbs.QPAttrsInitToRTR)
		if err := me.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
			SQPSN: 1, MaxRdAtomic: 1}, uverbs.QPAttrsRTRToRTS); err != nil {
			log.Fatal(err)
		}
	}
	a, b := s[0], s[1]
	b.qp.PostRecv(uverbs.RecvWR{ID: 1, SGL: []uverbs.SGE{{Addr: b.mr.Addr, Length: 4096, LKey: b.mr.LKey}}})
	n := copy(a.buf, "hello, b")
	a.qp.PostSend(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{{Addr: a.mr.Addr, Length: uint32(n), LKey: a.mr.LKey}}})

	wcs := make([]uverbs.WC, 1)
	if _, err := b.cq.Wait(context.Background(), wcs); err != nil {
		log.Fatal(err)
	}
	fmt.Println(wcs[0].Opcode, wcs[0].Status, string(b.buf[:wcs[0].ByteLen]))
	for _, e := range s {
		e.qp.Destroy()
		e.cq.Destroy()
	}
	// Output: RECV success hello, b
}
