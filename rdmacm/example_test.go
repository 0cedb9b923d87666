package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Connect an RC queue pair to a server by its IP address, as a librdmacm
// client does (rping -c -a 10.0.0.2 -q): the CM resolves the address to a
// device, port and GID; the queue pair is made on that device with
// uverbs' rxe constructors and moved INIT→RTR→RTS with the attributes the
// kernel gives (INIT_QP_ATTR) alone. (No output check: it needs an RDMA
// device and a server, e.g. `rping -s`.)
func Example_connect() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	nl, err := nldev.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nl.Close()
	cm, err := locator.OpenRDMACM(fsys, nl)
	if err != nil {
		log.Fatal(err) // e.g. rdma_ucm not loaded
	}
	defer cm.Close()
	id, err := cm.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		log.Fatal(err)
	}
	defer id.Destroy()

	// Address and route: the device, port and GID for 10.0.0.2.
	server := netip.MustParseAddrPort("10.0.0.2:7174")
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, server, 2*time.Second); err != nil {
		log.Fatal(err) // e.g. RDMA_CM_EVENT_ADDR_ERROR: the egress netdev has no RDMA device
	}
	if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
		log.Fatal(err)
	}
	route, err := id.QueryRoute()
	if err != nil {
		log.Fatal(err)
	}
	dev, err := nl.Device(route.Device.Index)
	if err != nil {
		log.Fatal(err)
	}

	// A queue pair on that device.
	c, err := locator.Open(fsys, nl, dev.Index, dev.Name)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer c.DeallocPD(pd)
	cq, err := c.CreateRxeCQ(16)
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Destroy()
	qp, err := c.CreateRxeQP(uverbs.QPInit{PD: pd, SendCQ: cq.CQ(), RecvCQ: cq.CQ(), Type: ib.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Destroy()
	move := func(state ib.QPState) {
		attr, mask, err := id.InitQPAttr(state)
		if err != nil {
			log.Fatal(err)
		}
		if err := c.ModifyQP(qp.QP(), &attr, mask); err != nil {
			log.Fatal(err)
		}
	}

	// INIT (post receives now), connect, then RTR and RTS with what the
	// server answered, and the ready-to-use message.
	move(ib.QPStateInit)
	peer, err := id.Connect(ctx, rdmacm.ConnParam{QPNum: qp.QP().QPN, ResponderResources: 1, InitiatorDepth: 1,
		RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		log.Fatal(err) // e.g. RDMA_CM_EVENT_REJECTED (invalid service ID): nothing listens on port 7174
	}
	move(ib.QPStateInit)
	move(ib.QPStateRTR)
	move(ib.QPStateRTS)
	if err := id.Establish(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("connected to QP %d of %s over %s/%d, traffic class %d\n",
		peer.QPNum, server, dev.Name, route.Device.Port, route.Paths[0].TrafficClass)

	// ... traffic ...

	// Teardown: the queue pair to ERR, then DISCONNECT.
	if err := c.ModifyQP(qp.QP(), &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState); err != nil {
		log.Fatal(err)
	}
	if err := id.Disconnect(); err != nil {
		log.Fatal(err)
	}
	if err := id.WaitDisconnected(ctx); err != nil {
		log.Fatal(err)
	}
}

// What the CM chooses for connections over an address of this node.
// (No output check: it needs an RDMA device with that address.)
func ExampleChannel_Choose() {
	cm, err := rdmacm.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer cm.Close()
	c, err := cm.Choose(context.Background(), netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("device %d port %d, GID index %d, traffic class %d, hop limit %d, path MTU %v\n",
		c.Device.Index, c.Device.Port, c.SGIDIndex, c.Path.TrafficClass, c.Path.HopLimit, c.Path.MTU)
}
