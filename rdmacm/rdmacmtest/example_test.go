package rdmacmtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/rdmacm/rdmacmtest"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Two hosts on one network: b listens, a connects with a hello in its
// request's private data and b accepts; a then connects to a port
// nothing listens on and is rejected with reason 8, as by the kernel.
// The code under test sees only rdmacm.CM, Conn and Listener.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fab := uverbstest.NewFabric()
	n := rdmacmtest.NewNetwork()
	a := n.NewHost(netip.MustParseAddr("10.0.0.1"), fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.0.0.1")}))
	b := n.NewHost(netip.MustParseAddr("10.0.0.2"), fab.NewDevice(uverbstest.Config{Name: "rxe1", IPv4: netip.MustParseAddr("10.0.0.2")}))

	// b's side: bind, listen, accept one request.
	cmB, _ := b.Open()
	defer cmB.Close()
	l, _ := cmB.CreateListener(rdmacm.PortSpaceTCP)
	defer l.Destroy()
	l.Bind(netip.MustParseAddrPort("0.0.0.0:7174"))
	l.Listen(rdmacm.DefaultBacklog)
	served := make(chan string, 1)
	go func() {
		req, err := l.NextRequest(ctx)
		if err != nil {
			served <- err.Error()
			return
		}
		defer req.Conn.Destroy()
		req.Conn.Accept(rdmacm.ConnParam{QPNum: 18})
		req.Conn.WaitEstablished(ctx)
		req.Conn.WaitDisconnected(ctx)
		served <- fmt.Sprintf("b: request from %s, qpn %d, %q", req.Addr.Dst.Addr(), req.Peer.QPNum, bytes.TrimRight(req.Peer.PrivateData, "\x00"))
	}()

	// a's side: resolve, connect, establish, disconnect.
	cmA, _ := a.Open()
	defer cmA.Close()
	c, _ := cmA.CreateConn(rdmacm.PortSpaceTCP)
	defer c.Destroy()
	if err := c.ResolveAddr(ctx, netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.2:7174"), 2*time.Second); err != nil {
		log.Fatal(err)
	}
	c.ResolveRoute(ctx, 2*time.Second)
	addr, _ := c.QueryAddr()
	name, _ := a.DeviceName(addr.Device)
	peer, err := c.Connect(ctx, rdmacm.ConnParam{QPNum: 17, PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	c.Establish()
	c.Disconnect()
	c.WaitDisconnected(ctx)
	fmt.Printf("a: via %s/%d, peer qpn %d\n", name, addr.Device.Port, peer.QPNum)
	fmt.Println(<-served)

	c2, _ := cmA.CreateConn(rdmacm.PortSpaceTCP)
	defer c2.Destroy()
	c2.ResolveAddr(ctx, netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.2:9999"), 2*time.Second)
	_, err = c2.Connect(ctx, rdmacm.ConnParam{QPNum: 19})
	var ce *rdmacm.Error
	if errors.As(err, &ce) {
		fmt.Println("a:", ce.Event, "reason", ce.Status)
	}
	// Output:
	// a: via rxe0/1, peer qpn 18
	// b: request from 10.0.0.1, qpn 17, "hello"
	// a: RDMA_CM_EVENT_REJECTED reason 8
}
