package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
)

// A fake RDMA CM for the probe over the CM on the fake uverbs fabric: a
// network of channels, one a host, whose IDs pair up as the kernel's do
// (REQ, REP or REJ, RTU, DREQ), and whose INIT_QP_ATTR answers carry what
// the kernel's would (the peer's QPN, the PSNs, the GIDs). Rejection
// reasons and private data are the kernel's.

type fakeCMNet struct {
	mu        sync.Mutex
	listeners map[netip.AddrPort]*fakeCMListener
	live      atomic.Int32 // IDs not destroyed
	nextPort  uint16
	// drop: requests get no answer (a fabric that drops RoCE).
	drop bool
	// gids are the fabric addresses (the fake devices' IPv4s) of the CM
	// addresses (loopback: the control channel is real TCP).
	gids map[netip.Addr]netip.Addr
}

func newFakeCMNet() *fakeCMNet {
	return &fakeCMNet{listeners: map[netip.AddrPort]*fakeCMListener{}, nextPort: 40000, gids: map[netip.Addr]netip.Addr{}}
}

// channel is a host's CM: its address, its device's, and the device.
func (n *fakeCMNet) channel(ip, gidIP string, dev string) func() (cmChannel, error) {
	n.gids[netip.MustParseAddr(ip)] = netip.MustParseAddr(gidIP)
	return func() (cmChannel, error) {
		return &fakeCMChannel{net: n, ip: netip.MustParseAddr(ip), dev: dev}, nil
	}
}

type fakeCMChannel struct {
	net    *fakeCMNet
	ip     netip.Addr
	dev    string
	closed bool
}

func (c *fakeCMChannel) newID() (cmID, error) {
	c.net.live.Add(1)
	return &fakeCMID{ch: c, seq: uint32(time.Now().UnixNano()) & 0xffffff, answer: make(chan fakeAnswer, 1),
		established: make(chan struct{}), disconnected: make(chan struct{})}, nil
}

func (c *fakeCMChannel) newListener() (cmListener, error) {
	c.net.live.Add(1)
	return &fakeCMListener{ch: c, requests: make(chan cmRequest, 8)}, nil
}

func (c *fakeCMChannel) deviceName(p rdmacm.DevicePort) (string, error) {
	if p.Index != 1 {
		return "", fmt.Errorf("no device index %d", p.Index)
	}
	return c.dev, nil
}

func (c *fakeCMChannel) Close() error { c.closed = true; return nil }

func (c *fakeCMChannel) port() rdmacm.DevicePort {
	return rdmacm.DevicePort{Index: 1, NodeGUID: 0x1234, Port: 1}
}

type fakeAnswer struct {
	accept rdmacm.ConnParam
	reject *rdmacm.Error
}

type fakeCMID struct {
	ch           *fakeCMChannel
	src, dst     netip.AddrPort
	seq          uint32
	peer         *fakeCMID
	peerQPN      uint32
	answer       chan fakeAnswer
	established  chan struct{}
	disconnected chan struct{}
	discOnce     sync.Once
	destroyed    atomic.Bool
	tos          uint8
	connected    bool
}

func (id *fakeCMID) ResolveAddr(_ context.Context, _, dst netip.AddrPort, _ time.Duration) error {
	if dst.Addr() == netip.MustParseAddr("10.99.0.1") {
		return &rdmacm.Error{Step: rdmacm.StepResolveAddr, Event: rdmacm.EventAddrError, Status: -19, Dst: dst}
	}
	id.ch.net.mu.Lock()
	id.ch.net.nextPort++
	id.src = netip.AddrPortFrom(id.ch.ip, id.ch.net.nextPort)
	id.ch.net.mu.Unlock()
	id.dst = dst
	return nil
}
func (id *fakeCMID) SetTOS(tos uint8) error                            { id.tos = tos; return nil }
func (id *fakeCMID) ResolveRoute(context.Context, time.Duration) error { return nil }
func (id *fakeCMID) QueryAddr() (rdmacm.Addr, error) {
	return rdmacm.Addr{Src: id.src, Dst: id.dst, Device: id.ch.port()}, nil
}
func (id *fakeCMID) QueryRoute() (rdmacm.Route, error) {
	return rdmacm.Route{Src: id.src, Dst: id.dst, Device: id.ch.port(), Paths: []rdmacm.Path{{
		SGID: id.ch.net.gids[id.src.Addr()].As16(), DGID: id.ch.net.gids[id.dst.Addr()].As16(), TrafficClass: id.tos, HopLimit: 64, MTU: ib.MTU1024}}}, nil
}

func (id *fakeCMID) InitQPAttr(state ib.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	switch state {
	case ib.QPStateInit:
		a := uverbs.QPAttr{State: state, PortNum: 1}
		if id.connected {
			a.AccessFlags = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
		}
		return a, uverbs.QPAttrsResetToInit, nil
	case ib.QPStateRTR:
		if !id.connected {
			return uverbs.QPAttr{}, 0, errors.New("EINVAL: not connected")
		}
		return uverbs.QPAttr{State: state, PathMTU: ib.MTU1024, DestQPN: id.peerQPN, RQPSN: id.seq, MaxDestRdAtomic: 16,
			MinRNRTimer: 0, AV: uverbs.AddressVector{PortNum: 1, IsGlobal: 1, SGIDIndex: 1, HopLimit: 64, TrafficClass: id.tos,
				DGID: id.ch.net.gids[id.dst.Addr()].As16()}}, uverbs.QPAttrsInitToRTR, nil
	case ib.QPStateRTS:
		return uverbs.QPAttr{State: state, SQPSN: id.peer.seq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			uverbs.QPAttrsRTRToRTS, nil
	}
	return uverbs.QPAttr{}, 0, errors.New("EINVAL")
}

func (id *fakeCMID) Connect(ctx context.Context, p rdmacm.ConnParam) (rdmacm.ConnParam, error) {
	n := id.ch.net
	n.mu.Lock()
	l := n.listeners[id.dst]
	if l == nil {
		l = n.listeners[netip.AddrPortFrom(netip.IPv4Unspecified(), id.dst.Port())]
	}
	n.mu.Unlock()
	if l == nil {
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Event: rdmacm.EventRejected, Status: 8, Src: id.src, Dst: id.dst}
	}
	if n.drop {
		<-ctx.Done()
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Err: ctx.Err(), Src: id.src, Dst: id.dst}
	}
	srv, _ := l.ch.newID()
	s := srv.(*fakeCMID)
	s.src, s.dst, s.peer, s.peerQPN, s.connected, s.tos = id.dst, id.src, id, p.QPNum, true, id.tos
	id.peer = s
	priv := make([]byte, rdmacm.MaxConnectPrivateData)
	copy(priv, p.PrivateData)
	l.requests <- cmRequest{id: s, addr: rdmacm.Addr{Src: id.dst, Dst: id.src, Device: l.ch.port()},
		peer: rdmacm.ConnParam{QPNum: p.QPNum, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources, PrivateData: priv}}
	select {
	case a := <-id.answer:
		if a.reject != nil {
			a.reject.Src, a.reject.Dst = id.src, id.dst
			return rdmacm.ConnParam{}, a.reject
		}
		id.peerQPN, id.connected = a.accept.QPNum, true
		return a.accept, nil
	case <-ctx.Done():
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Err: ctx.Err(), Src: id.src, Dst: id.dst}
	}
}

func (id *fakeCMID) Establish() error { close(id.peer.established); return nil }

func (id *fakeCMID) Accept(p rdmacm.ConnParam) error {
	priv := make([]byte, rdmacm.MaxAcceptPrivateData)
	copy(priv, p.PrivateData)
	id.peer.answer <- fakeAnswer{accept: rdmacm.ConnParam{QPNum: p.QPNum, PrivateData: priv}}
	return nil
}

func (id *fakeCMID) WaitEstablished(ctx context.Context) error {
	select {
	case <-id.established:
		return nil
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepAccept, Err: ctx.Err()}
	}
}

func (id *fakeCMID) Reject(reason rdmacm.RejectReason, private []byte) error {
	priv := make([]byte, rdmacm.MaxRejectPrivateData)
	copy(priv, private)
	id.peer.answer <- fakeAnswer{reject: &rdmacm.Error{Step: rdmacm.StepConnect, Event: rdmacm.EventRejected, Status: int32(reason), Private: priv}}
	return nil
}

func (id *fakeCMID) Disconnect() error {
	for _, x := range []*fakeCMID{id, id.peer} {
		if x != nil {
			x.discOnce.Do(func() { close(x.disconnected) })
		}
	}
	return nil
}

func (id *fakeCMID) WaitDisconnected(ctx context.Context) error {
	select {
	case <-id.disconnected:
		return nil
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepDisconnect, Err: ctx.Err()}
	}
}

func (id *fakeCMID) Destroy() error {
	if !id.destroyed.Swap(true) {
		id.ch.net.live.Add(-1)
	}
	return nil
}

type fakeCMListener struct {
	ch        *fakeCMChannel
	addr      netip.AddrPort
	requests  chan cmRequest
	destroyed atomic.Bool
}

func (l *fakeCMListener) Bind(addr netip.AddrPort) error {
	l.ch.net.mu.Lock()
	defer l.ch.net.mu.Unlock()
	if l.ch.net.listeners[addr] != nil {
		return errors.New("EADDRINUSE")
	}
	l.addr = addr
	l.ch.net.listeners[addr] = l
	return nil
}
func (l *fakeCMListener) Listen(int) error { return nil }
func (l *fakeCMListener) QueryAddr() (rdmacm.Addr, error) {
	return rdmacm.Addr{Src: l.addr}, nil
}
func (l *fakeCMListener) getRequest(ctx context.Context) (cmRequest, error) {
	select {
	case r := <-l.requests:
		return r, nil
	case <-ctx.Done():
		return cmRequest{}, &rdmacm.Error{Step: rdmacm.StepRequest, Err: ctx.Err()}
	}
}
func (l *fakeCMListener) Destroy() error {
	if !l.destroyed.Swap(true) {
		l.ch.net.mu.Lock()
		delete(l.ch.net.listeners, l.addr)
		l.ch.net.mu.Unlock()
		l.ch.net.live.Add(-1)
	}
	return nil
}
