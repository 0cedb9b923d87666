// Package rdmacmtest is a fake RDMA CM, as nltest is for netlink and
// uverbstest for uverbs: hosts on a Network whose IDs (rdmacm.Conn,
// rdmacm.Listener, made by the rdmacm.CM a Host opens) pair up as the
// kernel's do, so that code driving the CM through package rdmacm's
// interfaces runs as ordinary unit tests without an RDMA kernel.
//
// A Host is a CM address and a fake uverbs device (uverbstest.Device):
// the CM binds the host's IDs to port 1 of that device and takes its GID
// 1 (the IPv4-mapped GID of the device's address) as their source GID, so
// the queue pairs a test makes on the device connect over the fake fabric
// with the attributes INIT_QP_ATTR gives, as on rxe.
//
// What the fake does as the kernel does: ResolveAddr of an address no
// host has fails with RDMA_CM_EVENT_ADDR_ERROR (ENODEV: no RDMA device on
// the route); Connect to a port nothing listens on is rejected with
// reason 8; a request reaches the listener bound to its address (or to
// the unspecified address and its port) with the requester's parameters
// seen from the passive side and 56 bytes of private data; Accept
// answers with 196 bytes, Reject with 148 and the reason; Establish is
// the RTU, Disconnect the DREQ (or DREP) that ends both sides' waits;
// INIT_QP_ATTR answers carry the peer's QPN, the PSNs and the GIDs, and
// the ToS the client set (mirrored by the passive side); waits end with
// their context, Destroy ends WaitDisconnected with rdmacm.ErrDestroyed.
// Errors are *rdmacm.Errors with the kernel's events and statuses.
//
// Not emulated: route resolution's timing and failures, IPv6, port
// spaces other than TCP (RC connections), the listen backlog (a listener
// holds 8 requests), time-wait, and closing a channel destroying its IDs:
// Close leaves them, so that Network.Live counts the IDs the code under
// test did not destroy itself.
package rdmacmtest

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
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// Network is the fake CM's network: its hosts and their listeners.
type Network struct {
	mu        sync.Mutex
	hosts     map[netip.Addr]*Host
	listeners map[netip.AddrPort]*listener
	nextPort  uint16
	drop      bool
	live      atomic.Int32 // IDs not destroyed
}

// NewNetwork returns a network without hosts.
func NewNetwork() *Network {
	return &Network{hosts: map[netip.Addr]*Host{}, listeners: map[netip.AddrPort]*listener{}, nextPort: 40000}
}

// Host is one host of a Network: a CM address and its RDMA device.
type Host struct {
	net  *Network
	addr netip.Addr
	dev  *uverbstest.Device
}

// NewHost adds a host whose CM address (what ResolveAddr resolves and
// Bind binds) is addr, on the fake device dev. addr may differ from the
// device's own address: a test whose other traffic is real TCP puts its
// hosts on loopback addresses.
func (n *Network) NewHost(addr netip.Addr, dev *uverbstest.Device) *Host {
	h := &Host{net: n, addr: addr, dev: dev}
	n.mu.Lock()
	n.hosts[addr] = h
	n.mu.Unlock()
	return h
}

// Addr is the host's CM address.
func (h *Host) Addr() netip.Addr { return h.addr }

// Device is the host's fake uverbs device.
func (h *Host) Device() *uverbstest.Device { return h.dev }

// Port is the device port the CM binds the host's IDs to (QueryAddr's
// Addr.Device): index 1, port 1.
func (h *Host) Port() rdmacm.DevicePort {
	return rdmacm.DevicePort{Index: 1, NodeGUID: 0x1234, Port: 1}
}

// DeviceName names the device of a device port of the host, as
// locator.CMDevice does on a real host.
func (h *Host) DeviceName(p rdmacm.DevicePort) (string, error) {
	if p.Index != h.Port().Index {
		return "", fmt.Errorf("no device index %d", p.Index)
	}
	return h.dev.Name(), nil
}

// Open opens the host's CM, as locator.OpenRDMACM opens the kernel's.
func (h *Host) Open() (rdmacm.CM, error) { return &channel{h: h}, nil }

// DropRequests makes connection requests go unanswered (on) until called
// again (off): a fabric that drops RoCE, or a peer that is gone.
func (n *Network) DropRequests(on bool) {
	n.mu.Lock()
	n.drop = on
	n.mu.Unlock()
}

// Live is the number of IDs (connection ends and listeners) created and
// not destroyed.
func (n *Network) Live() int { return int(n.live.Load()) }

// Listening reports whether a listener is bound to addr.
func (n *Network) Listening(addr netip.AddrPort) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listeners[addr] != nil
}

// Listeners is the number of listeners bound.
func (n *Network) Listeners() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.listeners)
}

// gid is the source GID of the host whose CM address is a; zero for none.
func (n *Network) gid(a netip.Addr) [16]byte {
	n.mu.Lock()
	h := n.hosts[a]
	n.mu.Unlock()
	if h == nil {
		return [16]byte{}
	}
	return h.dev.GID(1)
}

// channel is an open CM of a host.
type channel struct {
	h      *Host
	closed atomic.Bool
}

var errPortSpace = errors.New("rdmacmtest: the fake CM makes RC connections (PortSpaceTCP) only")

func (c *channel) CreateConn(ps rdmacm.PortSpace) (rdmacm.Conn, error) {
	if err := c.check(ps); err != nil {
		return nil, err
	}
	return c.h.newID(), nil
}

func (c *channel) CreateListener(ps rdmacm.PortSpace) (rdmacm.Listener, error) {
	if err := c.check(ps); err != nil {
		return nil, err
	}
	c.h.net.live.Add(1)
	return &listener{h: c.h, requests: make(chan rdmacm.ConnRequest, 8), destroyed: make(chan struct{})}, nil
}

func (c *channel) check(ps rdmacm.PortSpace) error {
	if c.closed.Load() {
		return rdmacm.ErrClosed
	}
	if ps != rdmacm.PortSpaceTCP {
		return errPortSpace
	}
	return nil
}

func (c *channel) Close() error { c.closed.Store(true); return nil }

type answer struct {
	accept rdmacm.ConnParam
	reject *rdmacm.Error
}

// conn is one end of a connection.
type conn struct {
	h            *Host
	src, dst     netip.AddrPort
	seq          uint32 // this side's first PSN
	peer         *conn
	peerQPN      uint32
	answer       chan answer
	established  chan struct{}
	disconnected chan struct{}
	discOnce     sync.Once
	destroyed    chan struct{}
	destroyOnce  sync.Once
	connected    bool
	tos          uint8
}

func (h *Host) newID() *conn {
	h.net.live.Add(1)
	return &conn{h: h, seq: uint32(time.Now().UnixNano()) & 0xffffff, answer: make(chan answer, 1),
		established: make(chan struct{}), disconnected: make(chan struct{}), destroyed: make(chan struct{})}
}

// ENODEV, as RDMA_CM_EVENT_ADDR_ERROR's status.
const statusNoDevice = -19

func (id *conn) ResolveAddr(_ context.Context, _, dst netip.AddrPort, _ time.Duration) error {
	n := id.h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hosts[dst.Addr()] == nil {
		return &rdmacm.Error{Step: rdmacm.StepResolveAddr, Event: rdmacm.EventAddrError, Status: statusNoDevice, Dst: dst}
	}
	n.nextPort++
	id.src = netip.AddrPortFrom(id.h.addr, n.nextPort)
	id.dst = dst
	return nil
}

func (id *conn) SetTOS(tos uint8) error                            { id.tos = tos; return nil }
func (id *conn) ResolveRoute(context.Context, time.Duration) error { return nil }

func (id *conn) QueryAddr() (rdmacm.Addr, error) {
	return rdmacm.Addr{Src: id.src, Dst: id.dst, Device: id.h.Port()}, nil
}

func (id *conn) QueryRoute() (rdmacm.Route, error) {
	n := id.h.net
	return rdmacm.Route{Src: id.src, Dst: id.dst, Device: id.h.Port(), Paths: []rdmacm.Path{{
		SGID: n.gid(id.src.Addr()), DGID: n.gid(id.dst.Addr()), TrafficClass: id.tos, HopLimit: 64, MTU: ib.MTU1024}}}, nil
}

func (id *conn) InitQPAttr(state ib.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
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
			AV: uverbs.AddressVector{PortNum: 1, IsGlobal: 1, SGIDIndex: 1, HopLimit: 64, TrafficClass: id.tos,
				DGID: id.h.net.gid(id.dst.Addr())}}, uverbs.QPAttrsInitToRTR, nil
	case ib.QPStateRTS:
		if id.peer == nil {
			return uverbs.QPAttr{}, 0, errors.New("EINVAL: not connected")
		}
		return uverbs.QPAttr{State: state, SQPSN: id.peer.seq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			uverbs.QPAttrsRTRToRTS, nil
	}
	return uverbs.QPAttr{}, 0, errors.New("EINVAL")
}

// rejectNoListener is the CM's reject reason when nothing listens (IB_CM_REJ_INVALID_SERVICE_ID).
const rejectNoListener = 8

func (id *conn) Connect(ctx context.Context, p rdmacm.ConnParam) (rdmacm.ConnParam, error) {
	n := id.h.net
	n.mu.Lock()
	l := n.listeners[id.dst]
	if l == nil {
		l = n.listeners[netip.AddrPortFrom(netip.IPv4Unspecified(), id.dst.Port())]
	}
	drop := n.drop
	n.mu.Unlock()
	if l == nil {
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Event: rdmacm.EventRejected, Status: rejectNoListener, Src: id.src, Dst: id.dst}
	}
	if drop {
		<-ctx.Done()
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Err: ctx.Err(), Src: id.src, Dst: id.dst}
	}
	s := l.h.newID()
	s.src, s.dst, s.peer, s.peerQPN, s.connected, s.tos = id.dst, id.src, id, p.QPNum, true, id.tos
	id.peer = s
	priv := make([]byte, rdmacm.MaxConnectPrivateData)
	copy(priv, p.PrivateData)
	l.requests <- rdmacm.ConnRequest{Conn: s, Addr: rdmacm.Addr{Src: id.dst, Dst: id.src, Device: l.h.Port()},
		Peer: rdmacm.ConnParam{QPNum: p.QPNum, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources, PrivateData: priv}}
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

func (id *conn) Establish() error {
	if id.peer == nil {
		return errors.New("EINVAL: not connected")
	}
	close(id.peer.established)
	return nil
}

func (id *conn) Accept(p rdmacm.ConnParam) error {
	priv := make([]byte, rdmacm.MaxAcceptPrivateData)
	copy(priv, p.PrivateData)
	id.peer.answer <- answer{accept: rdmacm.ConnParam{QPNum: p.QPNum, PrivateData: priv}}
	return nil
}

func (id *conn) WaitEstablished(ctx context.Context) error {
	select {
	case <-id.established:
		return nil
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepAccept, Err: ctx.Err()}
	}
}

func (id *conn) Reject(reason rdmacm.RejectReason, private []byte) error {
	priv := make([]byte, rdmacm.MaxRejectPrivateData)
	copy(priv, private)
	id.peer.answer <- answer{reject: &rdmacm.Error{Step: rdmacm.StepConnect, Event: rdmacm.EventRejected, Status: int32(reason), Private: priv}}
	return nil
}

func (id *conn) Disconnect() error {
	for _, x := range []*conn{id, id.peer} {
		if x != nil {
			x.discOnce.Do(func() { close(x.disconnected) })
		}
	}
	return nil
}

func (id *conn) WaitDisconnected(ctx context.Context) error {
	select {
	case <-id.disconnected:
		return nil
	case <-id.destroyed:
		return rdmacm.ErrDestroyed
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepDisconnect, Err: ctx.Err()}
	}
}

func (id *conn) Destroy() error {
	id.destroyOnce.Do(func() {
		close(id.destroyed)
		id.h.net.live.Add(-1)
	})
	return nil
}

// listener is a listening ID.
type listener struct {
	h           *Host
	addr        netip.AddrPort
	requests    chan rdmacm.ConnRequest
	destroyed   chan struct{}
	destroyOnce sync.Once
}

// Bind takes addr, EADDRINUSE when another listener has it.
func (l *listener) Bind(addr netip.AddrPort) error {
	n := l.h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[addr] != nil {
		return errors.New("EADDRINUSE")
	}
	l.addr = addr
	n.listeners[addr] = l
	return nil
}

func (l *listener) Listen(int) error { return nil }

func (l *listener) QueryAddr() (rdmacm.Addr, error) { return rdmacm.Addr{Src: l.addr}, nil }

func (l *listener) NextRequest(ctx context.Context) (rdmacm.ConnRequest, error) {
	select {
	case r := <-l.requests:
		return r, nil
	case <-l.destroyed:
		return rdmacm.ConnRequest{}, rdmacm.ErrDestroyed
	case <-ctx.Done():
		return rdmacm.ConnRequest{}, &rdmacm.Error{Step: rdmacm.StepRequest, Err: ctx.Err()}
	}
}

func (l *listener) Destroy() error {
	l.destroyOnce.Do(func() {
		close(l.destroyed)
		n := l.h.net
		n.mu.Lock()
		if n.listeners[l.addr] == l {
			delete(n.listeners, l.addr)
		}
		n.mu.Unlock()
		n.live.Add(-1)
	})
	return nil
}

var (
	_ rdmacm.CM       = (*channel)(nil)
	_ rdmacm.Conn     = (*conn)(nil)
	_ rdmacm.Listener = (*listener)(nil)
)
