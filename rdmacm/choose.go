package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/grdma/grdma/ib"
)

// Choice is what the CM chooses for connections over an address of this
// node: the device port it binds them to, the source GID (its index in
// the port's table: the entry of that GID with the port's default RoCE
// mode) and the path, whose traffic class is the ToS.
type Choice struct {
	Addr      netip.Addr
	Device    DevicePort
	SGIDIndex uint8
	SGID      [16]byte
	Path      Path
}

// The queue pair numbers Choose's connection carries: the CM only
// passes them on.
const (
	chooseClientQPN = 0xc1
	chooseServerQPN = 0x5e
)

// Choose finds out what the CM chooses for connections over addr, an
// address of this node, by connecting two IDs of the channel to each
// other over it (a listener on a free port and a client, no queue pairs:
// the CM carries made-up numbers), reading the client's route and RTR
// attributes, and tearing both down. Nothing is left behind; on failure
// the error is the step's.
func (c *Channel) Choose(ctx context.Context, addr netip.Addr) (Choice, error) {
	ch := Choice{Addr: addr}
	listener, err := c.CreateID(PortSpaceTCP)
	if err != nil {
		return ch, err
	}
	defer listener.Destroy()
	if err := listener.Bind(netip.AddrPortFrom(addr, 0)); err != nil {
		return ch, err
	}
	if err := listener.Listen(1); err != nil {
		return ch, err
	}
	la, err := listener.QueryAddr()
	if err != nil {
		return ch, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serveChoose(ctx, listener) }()
	err = c.chooseClient(ctx, la.Src, &ch)
	cancel()
	if serr := <-served; err == nil && serr != nil && !errors.Is(serr, context.Canceled) {
		err = fmt.Errorf("the listening side: %w", serr)
	}
	return ch, err
}

// chooseClient connects to the listener at dst and reads what the CM
// chose.
func (c *Channel) chooseClient(ctx context.Context, dst netip.AddrPort, ch *Choice) error {
	id, err := c.CreateID(PortSpaceTCP)
	if err != nil {
		return err
	}
	defer id.Destroy()
	if err := id.ResolveAddr(ctx, netip.AddrPortFrom(dst.Addr(), 0), dst, 2*time.Second); err != nil {
		return err
	}
	if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
		return err
	}
	route, err := id.QueryRoute()
	if err != nil {
		return err
	}
	ch.Device = route.Device
	if len(route.Paths) > 0 {
		ch.Path = route.Paths[0]
		ch.SGID = ch.Path.SGID
	}
	if _, err := id.Connect(ctx, ConnParam{QPNum: chooseClientQPN, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return err
	}
	rtr, _, err := id.InitQPAttr(ib.QPStateRTR)
	if err != nil {
		return err
	}
	ch.SGIDIndex = rtr.AV.SGIDIndex
	if err := id.Establish(); err != nil {
		return err
	}
	if err := id.Disconnect(); err != nil {
		return err
	}
	return id.WaitDisconnected(ctx)
}

// serveChoose accepts Choose's one request and waits for the client to
// disconnect.
func serveChoose(ctx context.Context, listener *ID) error {
	req, err := listener.GetRequest(ctx)
	if err != nil {
		return err
	}
	defer req.ID.Destroy()
	if err := req.ID.Accept(ConnParam{QPNum: chooseServerQPN, RNRRetryCount: 7}); err != nil {
		return err
	}
	if err := req.ID.WaitEstablished(ctx); err != nil {
		return err
	}
	if err := req.ID.WaitDisconnected(ctx); err != nil {
		return err
	}
	return req.ID.Disconnect()
}
