package cminterop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
	"github.com/grdma/grdma/verbsprobe"
)

// A fake RDMA CM over the fake uverbs fabric: hosts whose IDs pair up as
// the kernel's do (REQ, REP or REJ 8, RTU, DREQ), and whose INIT_QP_ATTR
// answers carry what the kernel's would (the peer's QPN, PSNs, GIDs).
// A host's CM address is its fake device's IPv4 address; GID 1 is the
// IPv4-mapped GID of it.

type fakeNet struct {
	mu        sync.Mutex
	listeners map[netip.AddrPort]*fakeListener
	live      atomic.Int32 // IDs not destroyed
	nextPort  uint16
	fabric    *uverbstest.Fabric
}

func newFakeNet() *fakeNet {
	return &fakeNet{listeners: map[netip.AddrPort]*fakeListener{}, nextPort: 40000, fabric: uverbstest.NewFabric()}
}

type fakeHost struct {
	net *fakeNet
	dev *uverbstest.Device
	ip  netip.Addr
}

func (n *fakeNet) host(name, ip string) *fakeHost {
	a := netip.MustParseAddr(ip)
	return &fakeHost{net: n, ip: a, dev: n.fabric.NewDevice(uverbstest.Config{Name: name, IPv4: a})}
}

// config is a run's Config on the host.
func (h *fakeHost) config(addr netip.AddrPort, count, size int) Config {
	return Config{Addr: addr, Count: count, Size: size, Timeout: 10 * time.Second,
		kernel: func() (kernel, error) { return &fakeKernel{h: h}, nil }}
}

// clean fails the test if a CM ID or a verbs object is left.
func (h *fakeHost) clean(t *testing.T) {
	t.Helper()
	if n := h.net.live.Load(); n != 0 {
		t.Errorf("%d CM IDs left", n)
	}
	if r := h.dev.Resources(); r != (uverbstest.Resources{}) {
		t.Errorf("%s: verbs objects left: %+v", h.dev.Name(), r)
	}
}

type fakeKernel struct{ h *fakeHost }

func (k *fakeKernel) newID() (cmID, error) { return k.h.newID(), nil }

func (h *fakeHost) newID() *fakeID {
	h.net.live.Add(1)
	return &fakeID{h: h, seq: uint32(time.Now().UnixNano()) & 0xffffff, answer: make(chan fakeAnswer, 1),
		established: make(chan struct{}), disconnected: make(chan struct{}), destroyed: make(chan struct{})}
}

func (k *fakeKernel) newListener() (cmListener, error) {
	k.h.net.live.Add(1)
	return &fakeListener{h: k.h, requests: make(chan cmRequest, 8), destroyed: make(chan struct{})}, nil
}

func (k *fakeKernel) open(p rdmacm.DevicePort) (*uverbs.Context, string, error) {
	if p != k.h.port() {
		return nil, "", fmt.Errorf("no device %+v", p)
	}
	c, err := k.h.dev.Open()
	return c, k.h.dev.Name(), err
}

// chose: the fake device's GID 1 is the IPv4-mapped one (no sysfs).
func (k *fakeKernel) chose(ci *verbsprobe.CMInfo, addr rdmacm.Addr, route rdmacm.Route, dev string) {
	ci.Fill(addr, route, dev, uint32(addr.Device.Port), sysfs.FS{})
	ci.GIDIndex, ci.RoCE = 1, gid.TypeRoCEv2.String()
}

func (k *fakeKernel) Close() error { return nil }

func (h *fakeHost) port() rdmacm.DevicePort {
	return rdmacm.DevicePort{Index: 1, NodeGUID: 0x1234, Port: 1}
}

type fakeAnswer struct {
	accept rdmacm.ConnParam
	reject *rdmacm.Error
}

type fakeID struct {
	h            *fakeHost
	src, dst     netip.AddrPort
	seq          uint32
	peer         *fakeID
	peerQPN      uint32
	answer       chan fakeAnswer
	established  chan struct{}
	disconnected chan struct{}
	discOnce     sync.Once
	destroyed    chan struct{}
	destroyOnce  sync.Once
	connected    bool
	tos          uint8
}

func (id *fakeID) ResolveAddr(_ context.Context, _, dst netip.AddrPort, _ time.Duration) error {
	if dst.Addr() == netip.MustParseAddr("10.99.0.1") {
		return &rdmacm.Error{Step: rdmacm.StepResolveAddr, Event: rdmacm.EventAddrError, Status: -19, Dst: dst}
	}
	id.h.net.mu.Lock()
	id.h.net.nextPort++
	id.src = netip.AddrPortFrom(id.h.ip, id.h.net.nextPort)
	id.h.net.mu.Unlock()
	id.dst = dst
	return nil
}

func (id *fakeID) ResolveRoute(context.Context, time.Duration) error { return nil }
func (id *fakeID) SetTOS(tos uint8) error                            { id.tos = tos; return nil }

func (id *fakeID) QueryAddr() (rdmacm.Addr, error) {
	return rdmacm.Addr{Src: id.src, Dst: id.dst, Device: id.h.port()}, nil
}

func mapped(a netip.Addr) [16]byte { return netip.AddrFrom16(a.As16()).As16() }

func (id *fakeID) QueryRoute() (rdmacm.Route, error) {
	return rdmacm.Route{Src: id.src, Dst: id.dst, Device: id.h.port(), Paths: []rdmacm.Path{{
		SGID: mapped(id.src.Addr()), DGID: mapped(id.dst.Addr()), HopLimit: 64, TrafficClass: id.tos, MTU: ib.MTU1024}}}, nil
}

func (id *fakeID) InitQPAttr(state ib.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
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
			AV: uverbs.AddressVector{PortNum: 1, IsGlobal: 1, SGIDIndex: 1, HopLimit: 64, DGID: mapped(id.dst.Addr())}}, uverbs.QPAttrsInitToRTR, nil
	case ib.QPStateRTS:
		return uverbs.QPAttr{State: state, SQPSN: id.peer.seq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			uverbs.QPAttrsRTRToRTS, nil
	}
	return uverbs.QPAttr{}, 0, errors.New("EINVAL")
}

func (id *fakeID) Connect(ctx context.Context, p rdmacm.ConnParam) (rdmacm.ConnParam, error) {
	n := id.h.net
	n.mu.Lock()
	l := n.listeners[id.dst]
	if l == nil {
		l = n.listeners[netip.AddrPortFrom(netip.IPv4Unspecified(), id.dst.Port())]
	}
	n.mu.Unlock()
	if l == nil {
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Event: rdmacm.EventRejected, Status: 8, Src: id.src, Dst: id.dst}
	}
	s := l.h.newID()
	s.src, s.dst, s.peer, s.peerQPN, s.connected = id.dst, id.src, id, p.QPNum, true
	id.peer = s
	l.requests <- cmRequest{id: s, addr: rdmacm.Addr{Src: id.dst, Dst: id.src, Device: l.h.port()},
		peer: rdmacm.ConnParam{QPNum: p.QPNum, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources}}
	select {
	case a := <-id.answer:
		if a.reject != nil {
			return rdmacm.ConnParam{}, a.reject
		}
		id.peerQPN, id.connected = a.accept.QPNum, true
		return a.accept, nil
	case <-ctx.Done():
		return rdmacm.ConnParam{}, &rdmacm.Error{Step: rdmacm.StepConnect, Err: ctx.Err(), Src: id.src, Dst: id.dst}
	}
}

func (id *fakeID) Establish() error { close(id.peer.established); return nil }

func (id *fakeID) Accept(p rdmacm.ConnParam) error {
	id.peer.answer <- fakeAnswer{accept: rdmacm.ConnParam{QPNum: p.QPNum}}
	return nil
}

func (id *fakeID) WaitEstablished(ctx context.Context) error {
	select {
	case <-id.established:
		return nil
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepAccept, Err: ctx.Err()}
	}
}

func (id *fakeID) Disconnect() error {
	for _, x := range []*fakeID{id, id.peer} {
		if x != nil {
			x.discOnce.Do(func() { close(x.disconnected) })
		}
	}
	return nil
}

func (id *fakeID) WaitDisconnected(ctx context.Context) error {
	select {
	case <-id.disconnected:
		return nil
	case <-id.destroyed:
		return rdmacm.ErrDestroyed
	case <-ctx.Done():
		return &rdmacm.Error{Step: rdmacm.StepDisconnect, Err: ctx.Err()}
	}
}

func (id *fakeID) Destroy() error {
	id.destroyOnce.Do(func() {
		close(id.destroyed)
		id.h.net.live.Add(-1)
	})
	return nil
}

type fakeListener struct {
	h           *fakeHost
	addr        netip.AddrPort
	requests    chan cmRequest
	destroyed   chan struct{}
	destroyOnce sync.Once
}

func (l *fakeListener) Bind(addr netip.AddrPort) error {
	l.h.net.mu.Lock()
	defer l.h.net.mu.Unlock()
	if l.h.net.listeners[addr] != nil {
		return errors.New("EADDRINUSE")
	}
	l.addr = addr
	l.h.net.listeners[addr] = l
	return nil
}

func (l *fakeListener) Listen(int) error { return nil }

func (l *fakeListener) getRequest(ctx context.Context) (cmRequest, error) {
	select {
	case r := <-l.requests:
		return r, nil
	case <-ctx.Done():
		return cmRequest{}, &rdmacm.Error{Step: rdmacm.StepRequest, Err: ctx.Err()}
	}
}

func (l *fakeListener) Destroy() error {
	l.destroyOnce.Do(func() {
		l.h.net.mu.Lock()
		delete(l.h.net.listeners, l.addr)
		l.h.net.mu.Unlock()
		l.h.net.live.Add(-1)
	})
	return nil
}
