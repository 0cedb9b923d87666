package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ID is an RDMA CM ID (struct rdma_cm_id): one end of one connection, or
// a listener. Its methods wrap the kernel's commands; those that wait
// (ResolveAddr, ResolveRoute, Connect, WaitEstablished, GetRequest,
// WaitDisconnected, Event) end when the event arrives or ctx is done. An
// ID whose step failed must still be destroyed. Methods are safe for
// concurrent use, but the CM's state machine is one connection's: drive
// each ID from one goroutine.
type ID struct {
	ch     *Channel
	handle uint32
	uid    uint64
	ps     PortSpace

	mu          sync.Mutex
	queue       []Event
	backlog     int // the requests a listener holds at most; 0 for others
	notify      chan struct{}
	destroyed   bool
	established bool // the active side saw ESTABLISHED itself (iWARP)

	// What errors describe.
	src, dst netip.AddrPort
	dev      DevicePort
	sgid     [16]byte
	tos      int // -1 until known
}

// ErrDestroyed means the ID was destroyed while, or before, it was used.
var ErrDestroyed = errors.New("rdmacm: ID destroyed")

// Handle is the kernel's number of the ID on its channel.
func (id *ID) Handle() uint32 { return id.handle }

// PortSpace is the port space the ID was created in.
func (id *ID) PortSpace() PortSpace { return id.ps }

// wake tells a waiter that the queue or the ID changed.
func (id *ID) wake() {
	select {
	case id.notify <- struct{}{}:
	default:
	}
}

// push queues an event; false when a listener has no room for a request
// (or is destroyed).
func (id *ID) push(ev Event) bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return ev.Type != EventConnectRequest
	}
	if ev.Type == EventConnectRequest && id.pendingRequests() >= id.backlog {
		return false
	}
	id.queue = append(id.queue, ev)
	id.wake()
	return true
}

func (id *ID) pendingRequests() int {
	n := 0
	for _, ev := range id.queue {
		if ev.Type == EventConnectRequest {
			n++
		}
	}
	return n
}

// Event waits for the ID's next event. Most users call the methods that
// wait for the event of their step instead; Event is for those who drive
// the state machine themselves (a listener serving many requests, a
// connected ID watching for DISCONNECTED).
func (id *ID) Event(ctx context.Context) (Event, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		id.mu.Lock()
		if len(id.queue) > 0 {
			ev := id.queue[0]
			id.queue = id.queue[1:]
			if len(id.queue) > 0 {
				id.wake()
			}
			id.mu.Unlock()
			return ev, nil
		}
		destroyed := id.destroyed
		id.mu.Unlock()
		if destroyed {
			return Event{}, ErrDestroyed
		}
		if err := id.ch.readerErr(); err != nil {
			return Event{}, err
		}
		select {
		case <-id.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-id.ch.done:
		}
	}
}

// await waits for the event of a step: want with status 0 ends it well,
// any other event (but ADDR_CHANGE, which only informs) with an *Error.
func (id *ID) await(ctx context.Context, step string, want EventType, start time.Time) (Event, error) {
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return ev, id.stepError(step, Event{}, err, start)
		}
		if ev.Type == EventAddrChange {
			continue
		}
		if ev.Type == want && ev.Status == 0 {
			return ev, nil
		}
		return ev, id.stepError(step, ev, nil, start)
	}
}

// stepError describes a failed step with what the ID knows.
func (id *ID) stepError(step string, ev Event, err error, start time.Time) *Error {
	id.mu.Lock()
	e := &Error{Step: step, Event: ev.Type, Status: ev.Status, Err: err, Src: id.src, Dst: id.dst, Device: id.dev, TOS: id.tos}
	if ev.Type == EventRejected {
		e.Private = ev.Conn.PrivateData
	}
	sgid := id.sgid
	id.mu.Unlock()
	if !start.IsZero() {
		e.Waited = time.Since(start)
	}
	if e.Device.Port != 0 && id.ch.opts.Describe != nil {
		e.Port = id.ch.opts.Describe(e.Device, sgid)
	}
	if err == nil && ev.Type == EventAddrError && ev.Status == -int32(unix.ENODEV) && e.Dst.IsValid() {
		e.Egress, e.EgressSrc = id.ch.egress(e.Dst.Addr())
	}
	return e
}

// Bind binds the ID to a local address and port (rdma_bind_addr); port 0
// picks a free one. An address of a netdev with an RDMA device also binds
// the ID to that device; the unspecified address (0.0.0.0, ::) listens on
// every device. Ports below 1024 need CAP_NET_BIND_SERVICE.
func (id *ID) Bind(addr netip.AddrPort) error {
	req := bindReq{ID: id.handle}
	n, err := encodeSockaddr(req.Addr[:], addr)
	if err != nil {
		return err
	}
	req.AddrSize = uint16(n)
	if err := id.ch.execute(cmdBind, id.handle, &req, nil); err != nil {
		return bindHint(err, addr)
	}
	id.mu.Lock()
	id.src = addr
	id.mu.Unlock()
	if !addr.Addr().IsUnspecified() {
		id.learnAddr()
	}
	return nil
}

// bindHint explains the errnos of BIND.
func bindHint(err error, addr netip.AddrPort) error {
	var ce *CommandError
	if !errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, unix.EADDRNOTAVAIL):
		ce.Hint = fmt.Sprintf("no netdev of this network namespace has address %s", addr.Addr())
	case errors.Is(err, unix.ENODEV):
		ce.Hint = fmt.Sprintf("no RDMA device has a GID for %s: create one on its netdev (grdma link add NAME type rxe netdev NETDEV)", addr.Addr())
	case errors.Is(err, unix.EADDRINUSE):
		ce.Hint = fmt.Sprintf("port %d is taken by another RDMA CM ID (a listener, or a connection in time-wait: SetReuseAddr before binding)", addr.Port())
	case errors.Is(err, unix.EACCES):
		ce.Hint = fmt.Sprintf("port %d is below 1024 and needs CAP_NET_BIND_SERVICE, or the channel was opened by another user", addr.Port())
	}
	return err
}

// ResolveAddr resolves dst to an RDMA device, port and GID
// (rdma_resolve_addr): the kernel routes to dst in the ID's network
// namespace, resolves its neighbour, and binds the ID to the device port
// that has the source address's GID on the egress netdev. src may be the
// zero AddrPort (the route's source address, a free port). timeout bounds
// the neighbour resolution (librdmacm users pass 2 s). It waits for
// RDMA_CM_EVENT_ADDR_RESOLVED; RDMA_CM_EVENT_ADDR_ERROR is an *Error
// that names the egress netdev.
func (id *ID) ResolveAddr(ctx context.Context, src, dst netip.AddrPort, timeout time.Duration) error {
	req := resolveAddrReq{ID: id.handle, TimeoutMs: durationMs(timeout)}
	if src.IsValid() {
		n, err := encodeSockaddr(req.SrcAddr[:], src)
		if err != nil {
			return err
		}
		req.SrcSize = uint16(n)
	}
	n, err := encodeSockaddr(req.DstAddr[:], dst)
	if err != nil {
		return err
	}
	req.DstSize = uint16(n)
	id.mu.Lock()
	id.dst = dst
	if src.IsValid() {
		id.src = src
	}
	id.mu.Unlock()
	start := time.Now()
	if err := id.ch.execute(cmdResolveAddr, id.handle, &req, nil); err != nil {
		return err
	}
	if _, err := id.await(ctx, StepResolveAddr, EventAddrResolved, start); err != nil {
		return err
	}
	id.learnAddr()
	return nil
}

// learnAddr records the ID's addresses and device for errors.
func (id *ID) learnAddr() {
	a, err := id.QueryAddr()
	if err != nil {
		return
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if a.Src.IsValid() {
		id.src = a.Src
	}
	if a.Dst.IsValid() && !a.Dst.Addr().IsUnspecified() {
		id.dst = a.Dst
	}
	id.dev = a.Device
}

// durationMs converts a timeout to the kernel's milliseconds, at least 1
// (RESOLVE_ROUTE refuses 0).
func durationMs(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 1:
		return 1
	case ms > 1<<31:
		return 1 << 31
	}
	return uint32(ms)
}

// ResolveRoute finds the path to the resolved address
// (rdma_resolve_route): on RoCE the kernel builds it at once from the
// route, with the ToS (SetTOS, else the port's configfs default) and the
// RoCE version of the port's default mode (v2 through a gateway). Set
// the options that shape the path (ToS, ACK timeout) before. It waits
// for RDMA_CM_EVENT_ROUTE_RESOLVED.
func (id *ID) ResolveRoute(ctx context.Context, timeout time.Duration) error {
	start := time.Now()
	req := resolveRouteReq{ID: id.handle, TimeoutMs: durationMs(timeout)}
	if err := id.ch.execute(cmdResolveRoute, id.handle, &req, nil); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && errors.Is(err, unix.EINVAL) {
			ce.Hint = "the ID's address is not resolved (ResolveAddr first, once)"
		}
		return err
	}
	if _, err := id.await(ctx, StepResolveRoute, EventRouteResolved, start); err != nil {
		return err
	}
	if r, err := id.QueryRoute(); err == nil && len(r.Paths) > 0 {
		id.mu.Lock()
		id.tos, id.sgid = int(r.Paths[0].TrafficClass), r.Paths[0].SGID
		id.mu.Unlock()
	}
	return nil
}

// Addr is what QUERY (ADDR) answers: the ID's addresses and the device
// port it is bound to.
type Addr struct {
	Src, Dst netip.AddrPort
	// Device is the bound device port; HasDevice tells whether there is
	// one (a wildcard listener has none). Device.Index is the device's
	// RDMA netlink index (kernels since 5.8), or NoDeviceIndex.
	Device DevicePort
	PKey   uint16
}

// NoDeviceIndex is Device.Index where the kernel did not say (before 5.8).
const NoDeviceIndex = ^uint32(0)

// HasDevice reports whether the ID is bound to a device. A node GUID of
// 0 is no device (rdma-core #1547), nor is port 0.
func (a Addr) HasDevice() bool { return a.Device.NodeGUID != 0 && a.Device.Port != 0 }

// QueryAddr returns the ID's addresses and device (QUERY, option ADDR).
func (id *ID) QueryAddr() (Addr, error) {
	var r queryAddrResp
	resp := make([]byte, binary.Size(r))
	binary.NativeEndian.PutUint32(resp[unsafe.Offsetof(r.IBDevIndex):], NoDeviceIndex)
	if err := id.ch.execute(cmdQuery, id.handle, &queryReq{ID: id.handle, Option: queryAddr}, resp); err != nil {
		return Addr{}, err
	}
	if _, err := binary.Decode(resp, binary.NativeEndian, &r); err != nil {
		return Addr{}, err
	}
	return Addr{
		Src:    decodeSockaddr(r.SrcAddr[:min(int(r.SrcSize), len(r.SrcAddr))]),
		Dst:    decodeSockaddr(r.DstAddr[:min(int(r.DstSize), len(r.DstAddr))]),
		Device: DevicePort{Index: r.IBDevIndex, NodeGUID: binary.BigEndian.Uint64(r.NodeGUID[:]), Port: r.PortNum},
		PKey:   r.PKey,
	}, nil
}

// QueryGID returns the source and destination GIDs the ID uses (QUERY,
// option GID): on RoCE those of the IP addresses (::ffff:a.b.c.d for
// IPv4).
func (id *ID) QueryGID() (src, dst [16]byte, err error) {
	var r queryAddrResp
	resp := make([]byte, binary.Size(r))
	if err := id.ch.execute(cmdQuery, id.handle, &queryReq{ID: id.handle, Option: queryGID}, resp); err != nil {
		return src, dst, err
	}
	if _, err := binary.Decode(resp, binary.NativeEndian, &r); err != nil {
		return src, dst, err
	}
	// struct sockaddr_ib: family, pkey, flowinfo, then the GID at 8.
	copy(src[:], r.SrcAddr[8:24])
	copy(dst[:], r.DstAddr[8:24])
	return src, dst, nil
}

// SetTOS sets the ToS byte (DSCP<<2 | ECN) of the ID's connections,
// which becomes the RoCE traffic class (RDMA_OPTION_ID_TOS). Without it
// the port's configfs default_roce_tos applies. Call it before
// ResolveRoute.
func (id *ID) SetTOS(tos uint8) error {
	if err := id.setOption(optionTOS, []byte{tos}); err != nil {
		return err
	}
	id.mu.Lock()
	id.tos = int(tos)
	id.mu.Unlock()
	return nil
}

// SetAckTimeout sets the queue pair's local ACK timeout exponent (4.096
// µs × 2^t), which also sets the RoCE packet lifetime
// (RDMA_OPTION_ID_ACK_TIMEOUT, kernels since 5.1). Call it before
// ResolveRoute.
func (id *ID) SetAckTimeout(t uint8) error { return id.setOption(optionAckTimeout, []byte{t}) }

// SetReuseAddr lets the ID bind a port another ID holds in time-wait
// (RDMA_OPTION_ID_REUSEADDR). Call it before Bind.
func (id *ID) SetReuseAddr(on bool) error { return id.setOption(optionReuseAddr, intOption(on)) }

// SetAFOnly makes an IPv6 wildcard listener take IPv6 only
// (RDMA_OPTION_ID_AFONLY). Call it before Bind.
func (id *ID) SetAFOnly(on bool) error { return id.setOption(optionAFOnly, intOption(on)) }

func intOption(on bool) []byte {
	b := make([]byte, 4)
	if on {
		binary.NativeEndian.PutUint32(b, 1)
	}
	return b
}

func (id *ID) setOption(name uint32, val []byte) error {
	var pin runtime.Pinner
	pin.Pin(&val[0])
	defer pin.Unpin()
	req := setOptionReq{OptVal: uint64(uintptr(unsafe.Pointer(&val[0]))), ID: id.handle, Level: optionLevelID, OptName: name, OptLen: uint32(len(val))}
	return id.ch.execute(cmdSetOption, id.handle, &req, nil)
}

// DefaultBacklog is the listen backlog Listen uses for 0.
const DefaultBacklog = 64

// Listen makes a bound ID a listener (rdma_listen). backlog (at most
// 1024, the kernel's net.rdma_ucm.max_backlog; 0 for DefaultBacklog)
// bounds both the kernel's unread requests and those read but not yet
// taken with GetRequest: requests beyond it are rejected.
func (id *ID) Listen(backlog int) error {
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	backlog = min(backlog, 1024)
	id.mu.Lock()
	id.backlog = backlog
	id.mu.Unlock()
	if err := id.ch.execute(cmdListen, id.handle, &listenReq{ID: id.handle, Backlog: uint32(backlog)}, nil); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && errors.Is(err, unix.EADDRINUSE) {
			ce.Hint = "another RDMA CM listener has this port"
		}
		return err
	}
	return nil
}

// Request is a connection request a listener received.
type Request struct {
	// ID is the request's own ID, bound to the device the request
	// arrived on: Accept or Reject it, and Destroy it when done.
	ID *ID
	// Peer is the requester's parameters, swapped to this side's view
	// (ResponderResources is what this side may accept), with its 56
	// bytes of private data.
	Peer ConnParam
	// Addr is the new ID's addresses and device (QUERY ADDR).
	Addr Addr
}

// GetRequest waits for the next connection request of a listener
// (RDMA_CM_EVENT_CONNECT_REQUEST).
func (id *ID) GetRequest(ctx context.Context) (*Request, error) {
	ev, err := id.await(ctx, StepRequest, EventConnectRequest, time.Time{})
	if err != nil {
		return nil, err
	}
	req := &Request{ID: ev.ID, Peer: ev.Conn}
	if a, err := ev.ID.QueryAddr(); err == nil {
		req.Addr = a
		ev.ID.mu.Lock()
		ev.ID.src, ev.ID.dst, ev.ID.dev = a.Src, a.Dst, a.Device
		ev.ID.mu.Unlock()
	}
	return req, nil
}

// Connect sends the connection request of the queue pair p.QPNum
// (rdma_connect) and waits for the answer: the peer's parameters
// (CONNECT_RESPONSE, with 196 bytes of private data). The queue pair
// must then go INIT→RTR→RTS with InitQPAttr's attributes before
// Establish sends the ready-to-use message. RDMA_CM_EVENT_REJECTED and
// RDMA_CM_EVENT_UNREACHABLE are *Errors; so is ctx ending the wait, which
// leaves the request pending until the ID is destroyed.
func (id *ID) Connect(ctx context.Context, p ConnParam) (ConnParam, error) {
	cp, err := p.encode(MaxConnectPrivateData)
	if err != nil {
		return ConnParam{}, err
	}
	start := time.Now()
	if err := id.ch.execute(cmdConnect, id.handle, &connectReq{ConnParam: cp, ID: id.handle}, nil); err != nil {
		return ConnParam{}, err
	}
	for {
		ev, err := id.Event(ctx)
		switch {
		case err != nil:
			return ConnParam{}, id.stepError(StepConnect, Event{}, err, start)
		case ev.Type == EventAddrChange:
			continue
		case ev.Type == EventConnectResponse && ev.Status == 0:
			return ev.Conn, nil
		case ev.Type == EventEstablished && ev.Status == 0:
			// iWARP: the kernel moved the queue pair and is done.
			id.mu.Lock()
			id.established = true
			id.mu.Unlock()
			return ev.Conn, nil
		}
		return ev.Conn, id.stepError(StepConnect, ev, nil, start)
	}
}

// Establish sends the ready-to-use message that completes an active
// connection (librdmacm's rdma_establish; ACCEPT without parameters),
// once the queue pair is in RTS. The connection is usable when it
// returns; the passive side sees ESTABLISHED.
func (id *ID) Establish() error {
	id.mu.Lock()
	done := id.established
	id.mu.Unlock()
	if done {
		return nil
	}
	return id.ch.execute(cmdAccept, id.handle, &acceptReq{UID: id.uid, ID: id.handle}, nil)
}

// Accept answers a connection request with the queue pair p.QPNum
// (rdma_accept), which should be in RTS (RTR at least) already. The
// connection is established when the peer's ready-to-use message
// arrives: WaitEstablished.
func (id *ID) Accept(p ConnParam) error {
	cp, err := p.encode(MaxAcceptPrivateData)
	if err != nil {
		return err
	}
	return id.ch.execute(cmdAccept, id.handle, &acceptReq{UID: id.uid, ConnParam: cp, ID: id.handle}, nil)
}

// WaitEstablished waits for RDMA_CM_EVENT_ESTABLISHED after Accept.
func (id *ID) WaitEstablished(ctx context.Context) error {
	_, err := id.await(ctx, StepAccept, EventEstablished, time.Now())
	return err
}

// Reject refuses a connection request (rdma_reject) with reason
// RejectConsumer (or RejectVendorOptionNotSupported) and up to
// MaxRejectPrivateData bytes the requester receives.
func (id *ID) Reject(reason RejectReason, private []byte) error {
	if len(private) > MaxRejectPrivateData {
		return fmt.Errorf("rdmacm: %d bytes of reject private data, at most %d fit", len(private), MaxRejectPrivateData)
	}
	req := rejectReq{ID: id.handle, PrivateDataLen: uint8(len(private)), Reason: uint8(reason)}
	copy(req.PrivateData[:], private)
	return id.ch.execute(cmdReject, id.handle, &req, nil)
}

// rejectAndDestroy refuses a request nobody will take.
func (id *ID) rejectAndDestroy(reason RejectReason) {
	id.Reject(reason, nil)
	id.Destroy()
}

// Disconnect ends a connection (rdma_disconnect): a DREQ, or the DREP of
// a DREQ received. Move the queue pair to ERR first, as librdmacm does,
// so that its work requests flush.
func (id *ID) Disconnect() error {
	return id.ch.execute(cmdDisconnect, id.handle, &disconnectReq{ID: id.handle}, nil)
}

// WaitDisconnected waits for RDMA_CM_EVENT_DISCONNECTED (after
// Disconnect, or the peer's).
func (id *ID) WaitDisconnected(ctx context.Context) error {
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return id.stepError(StepDisconnect, Event{}, err, time.Time{})
		}
		switch ev.Type {
		case EventDisconnected:
			return nil
		case EventTimewaitExit, EventAddrChange, EventEstablished:
			continue
		}
		return id.stepError(StepDisconnect, ev, nil, time.Time{})
	}
}

// NotifyCommEst is IB_EVENT_COMM_EST: data arrived on the queue pair
// before the ready-to-use message.
const NotifyCommEst = 4

// Notify tells the CM of a queue pair event (rdma_notify): NotifyCommEst
// makes a passive ID established when a receive completes before the
// ready-to-use message arrived.
func (id *ID) Notify(event uint32) error {
	return id.ch.execute(cmdNotify, id.handle, &notifyReq{ID: id.handle, Event: event}, nil)
}

// Destroy destroys the ID (rdma_destroy_id) and its unread events; a
// listener's requests not yet taken are destroyed with it (their peers
// see a reject). Waits on the ID end with ErrDestroyed.
func (id *ID) Destroy() error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return nil
	}
	id.destroyed = true
	pending := id.queue
	id.queue = nil
	id.mu.Unlock()
	id.wake()
	resp := make([]byte, binary.Size(destroyIDResp{}))
	err := id.ch.execute(cmdDestroyID, id.handle, &destroyIDReq{ID: id.handle}, resp)
	id.ch.mu.Lock()
	delete(id.ch.ids, id.uid)
	id.ch.mu.Unlock()
	for _, ev := range pending {
		if ev.Type == EventConnectRequest && ev.ID != id {
			ev.ID.Destroy()
		}
	}
	return err
}
