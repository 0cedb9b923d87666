//go:build e2eguest

package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// The RDMA CM scenarios (package rdmacm, library level): a connection by
// IP address between two IDs of this guest on rxe0's address, and each
// failure an operator meets, with `rdma res show cm_id` empty after each.

const cmPort = 7174 // rping's

// cmSetup gives the scenario rxe0 on veth0 with rxeAddr and rdma_ucm.
func cmSetup(t *testing.T) netip.Addr {
	t.Helper()
	cleanRDMA(t)
	loadModules(t, "rdma_ucm")
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	t.Cleanup(func() { noCMIDs(t) })
	return netip.MustParseAddr(rxeAddr)
}

// noCMIDs fails the test if the kernel still has an RDMA CM ID.
func noCMIDs(t *testing.T) {
	t.Helper()
	var ids []map[string]any
	ok := eventually(5*time.Second, func() bool {
		r := run(layout.Rdma, "-j", "res", "show", "cm_id")
		ids = nil
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &ids) == nil && len(ids) == 0
	})
	if !ok {
		t.Errorf("RDMA CM IDs left behind: %v", ids)
	}
}

// cmEndpoint is one side's verbs objects: a queue pair of the device the
// CM resolved, with a registered buffer. Its methods return errors: the
// passive side runs in a goroutine of its own.
type cmEndpoint struct {
	c    *uverbs.Context
	pd   uverbs.PD
	cq   *uverbs.RxeCQ
	qp   *uverbs.RxeQP
	buf  []byte
	mr   uverbs.MR
	done map[uint64]uverbs.WC // completions polled, by work request
}

// newCMEndpoint opens the uverbs device of the RDMA device the CM bound
// an ID to (by its netlink index) and creates an RC queue pair on it;
// close releases it all.
func newCMEndpoint(dev rdmacm.DevicePort) (e *cmEndpoint, err error) {
	nl, err := nldev.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	d, err := nl.Device(dev.Index)
	if err != nil {
		return nil, fmt.Errorf("device %d the CM resolved: %w", dev.Index, err)
	}
	if d.NodeGUID != dev.NodeGUID {
		return nil, fmt.Errorf("device %d: node GUID %#x, the CM says %#x", dev.Index, d.NodeGUID, dev.NodeGUID)
	}
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		return nil, err
	}
	e = &cmEndpoint{done: map[uint64]uverbs.WC{}}
	if e.c, err = locator.Open(fsys, nl, dev.Index, d.Name); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.pd, err = e.c.AllocPD(); err != nil {
		return nil, err
	}
	if e.cq, err = e.c.CreateRxeCQ(16); err != nil {
		return nil, err
	}
	init := uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if e.qp, err = e.c.CreateRxeQP(init); err != nil {
		return nil, err
	}
	if e.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return nil, err
	}
	e.mr, err = e.c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	return e, err
}

func (e *cmEndpoint) close() error {
	var errs []error
	if e.mr.LKey != 0 {
		errs = append(errs, e.c.DeregMR(e.mr))
	}
	if e.qp != nil {
		errs = append(errs, e.qp.Destroy())
	}
	if e.cq != nil {
		errs = append(errs, e.cq.Destroy())
	}
	errs = append(errs, e.c.DeallocPD(e.pd), uverbs.FreeBuffer(e.buf), e.c.Close())
	return errors.Join(errs...)
}

// move takes the queue pair to state with the CM's attributes; adjust,
// when set, changes them first (the passive side's resources).
func (e *cmEndpoint) move(id *rdmacm.ID, state ib.QPState, adjust func(*uverbs.QPAttr)) (uverbs.QPAttr, error) {
	attr, mask, err := id.InitQPAttr(state)
	if err != nil {
		return attr, fmt.Errorf("INIT_QP_ATTR %v: %w", state, err)
	}
	if adjust != nil {
		adjust(&attr)
	}
	if err := e.c.ModifyQP(e.qp.QP(), &attr, mask); err != nil {
		return attr, fmt.Errorf("MODIFY_QP to %v with the CM's attributes (mask %v): %w", state, mask, err)
	}
	return attr, nil
}

// connect moves the queue pair through INIT, RTR and RTS (the passive
// side's RTR and RTS with its resources) and returns the RTR attributes.
func (e *cmEndpoint) connect(id *rdmacm.ID, resources, depth *uint8) (uverbs.QPAttr, error) {
	var rtr uverbs.QPAttr
	var err error
	if _, err = e.move(id, ib.QPStateInit, nil); err != nil {
		return rtr, err
	}
	if rtr, err = e.move(id, ib.QPStateRTR, func(a *uverbs.QPAttr) {
		if resources != nil {
			a.MaxDestRdAtomic = *resources
		}
	}); err != nil {
		return rtr, err
	}
	_, err = e.move(id, ib.QPStateRTS, func(a *uverbs.QPAttr) {
		if depth != nil {
			a.MaxRdAtomic = *depth
		}
	})
	return rtr, err
}

func (e *cmEndpoint) postRecv() error {
	return e.qp.PostRecv(uverbs.RecvWR{ID: 1, SGL: []uverbs.SGE{{Addr: e.mr.Addr + 2048, Length: 2048, LKey: e.mr.LKey}}})
}

// send sends msg and waits for its completion.
func (e *cmEndpoint) send(msg string) error {
	copy(e.buf, msg)
	err := e.qp.PostSend(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: e.mr.Addr, Length: uint32(len(msg)), LKey: e.mr.LKey}}})
	if err != nil {
		return err
	}
	_, err = e.completion(2)
	return err
}

// completion waits for the completion of work request wrID, keeping the
// others polled meanwhile.
func (e *cmEndpoint) completion(wrID uint64) (uverbs.WC, error) {
	var wcs [4]uverbs.WC
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, wc := range wcs[:e.cq.Poll(wcs[:])] {
			if wc.Status != uverbs.WCSuccess {
				return wc, fmt.Errorf("work request %d: %v", wc.WRID, wc.Status)
			}
			e.done[wc.WRID] = wc
		}
		if wc, ok := e.done[wrID]; ok {
			delete(e.done, wrID)
			return wc, nil
		}
		time.Sleep(time.Millisecond)
	}
	return uverbs.WC{}, fmt.Errorf("no completion of work request %d in 10 s", wrID)
}

// received waits for the posted receive and returns the message.
func (e *cmEndpoint) received() (string, error) {
	wc, err := e.completion(1)
	if err != nil {
		return "", err
	}
	return string(e.buf[2048 : 2048+wc.ByteLen]), nil
}

// toErr moves the queue pair to ERR, as librdmacm does before it
// disconnects.
func (e *cmEndpoint) toErr() error {
	return e.c.ModifyQP(e.qp.QP(), &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState)
}

// cmConn is what a connection between two IDs of this guest showed.
type cmConn struct {
	clientRTR, serverRTR uverbs.QPAttr
	route                rdmacm.Route
	paths                []rdmacm.PathRecord
	addr                 rdmacm.Addr
	srcGID, dstGID       [16]byte
	steps                []string
}

// cmLoopback connects a client ID to a listener on the wildcard address
// and cmPort, both in this guest, the client to addr; sends a message
// each way and disconnects. tos, if not negative, is set on the client ID.
func cmLoopback(t *testing.T, addr netip.Addr, tos int) cmConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var conn cmConn
	start := time.Now()
	step := func(format string, args ...any) {
		conn.steps = append(conn.steps, fmt.Sprintf("%8v %s", time.Since(start).Round(time.Microsecond), fmt.Sprintf(format, args...)))
	}
	defer func() {
		for _, s := range conn.steps {
			t.Log(s)
		}
	}()

	server, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	listener, err := server.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Destroy()
	if err := listener.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), cmPort)); err != nil {
		t.Fatal(err)
	}
	if err := listener.Listen(1); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- cmServe(ctx, listener, &conn.serverRTR) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("passive side: %v", err)
		}
	}()

	client, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	id, err := client.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Destroy()
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(addr, cmPort), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	step("address resolved")
	if conn.addr, err = id.QueryAddr(); err != nil {
		t.Fatal(err)
	}
	if tos >= 0 {
		if err := id.SetTOS(uint8(tos)); err != nil {
			t.Fatal(err)
		}
	}
	if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	step("route resolved")
	if conn.route, err = id.QueryRoute(); err != nil {
		t.Fatal(err)
	}
	if conn.paths, err = id.QueryPath(); err != nil {
		t.Fatal(err)
	}
	if conn.srcGID, conn.dstGID, err = id.QueryGID(); err != nil {
		t.Fatal(err)
	}
	e, err := newCMEndpoint(conn.addr.Device)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := e.move(id, ib.QPStateInit, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.postRecv(); err != nil {
		t.Fatal(err)
	}
	peer, err := id.Connect(ctx, rdmacm.ConnParam{QPNum: e.qp.QP().QPN, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		t.Fatal(err)
	}
	step("connect response: peer QPN %d", peer.QPNum)
	if conn.clientRTR, err = e.connect(id, nil, nil); err != nil {
		t.Fatal(err)
	}
	if conn.clientRTR.DestQPN != peer.QPNum {
		t.Errorf("RTR dest QPN %d, the peer's is %d", conn.clientRTR.DestQPN, peer.QPNum)
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	step("established (RTU sent)")
	if err := e.send("ping from the client"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.received(); err != nil || got != "pong from the server" {
		t.Fatalf("client received %q, %v", got, err)
	}
	step("message exchanged")
	// The client ends the connection: ERR, DISCONNECT, and both see
	// DISCONNECTED.
	if err := e.toErr(); err != nil {
		t.Fatal(err)
	}
	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := id.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	step("disconnected")
	return conn
}

// cmServe takes one request of the listener, connects it and answers one
// message, then waits for the peer to disconnect.
func cmServe(ctx context.Context, listener *rdmacm.ID, rtr *uverbs.QPAttr) error {
	req, err := listener.GetRequest(ctx)
	if err != nil {
		return err
	}
	defer req.ID.Destroy()
	if !req.Addr.HasDevice() {
		return fmt.Errorf("the request's ID has no device: %+v", req.Addr)
	}
	e, err := newCMEndpoint(req.Addr.Device)
	if err != nil {
		return err
	}
	defer e.close()
	if _, err := e.move(req.ID, ib.QPStateInit, nil); err != nil {
		return err
	}
	if err := e.postRecv(); err != nil {
		return err
	}
	resources := min(req.Peer.ResponderResources, 1)
	depth := min(req.Peer.InitiatorDepth, 1)
	if *rtr, err = e.connect(req.ID, &resources, &depth); err != nil {
		return err
	}
	if err := req.ID.Accept(rdmacm.ConnParam{QPNum: e.qp.QP().QPN, ResponderResources: resources, InitiatorDepth: depth, RNRRetryCount: 7}); err != nil {
		return err
	}
	if err := req.ID.WaitEstablished(ctx); err != nil {
		return err
	}
	if got, err := e.received(); err != nil || got != "ping from the client" {
		return fmt.Errorf("server received %q, %v", got, err)
	}
	if err := e.send("pong from the server"); err != nil {
		return err
	}
	if err := req.ID.WaitDisconnected(ctx); err != nil {
		return err
	}
	if err := e.toErr(); err != nil {
		return err
	}
	return req.ID.Disconnect()
}

// TestCMConnect connects two IDs of this guest over rxe0's IPv4 address:
// the CM resolves the address to rxe0 port 1 and its IPv4 GID (RoCE v2,
// rxe's only kind), the queue pairs go INIT→RTR→RTS with the kernel's
// INIT_QP_ATTR answers alone, a SEND goes each way, and nothing is left.
func TestCMConnect(t *testing.T) {
	addr := cmSetup(t)
	conn := cmLoopback(t, addr, -1)
	a := conn.addr
	if a.Device.Port != 1 || a.Dst.Addr() != addr || a.Src.Addr() != addr {
		t.Errorf("QUERY ADDR: %+v; want port 1, %s both ways", a, addr)
	}
	gid := netip.AddrFrom16(conn.srcGID)
	if gid != netip.AddrFrom16(addr.As16()).Unmap().WithZone("") && gid.Unmap() != addr {
		t.Errorf("QUERY GID: source %s, want ::ffff:%s", gid, addr)
	}
	if len(conn.route.Paths) != 1 || len(conn.paths) != 1 {
		t.Fatalf("QUERY_ROUTE %d paths, QUERY PATH %d; want 1", len(conn.route.Paths), len(conn.paths))
	}
	p := conn.route.Paths[0]
	if p.SGID != conn.srcGID || p.DGID != conn.dstGID || p.HopLimit == 0 || p.MTU != ib.MTU1024 || p.PKey != 0xffff {
		t.Errorf("QUERY_ROUTE path %+v", p)
	}
	// QUERY PATH packs the same record as the SA does: both decodings
	// must agree.
	if q := conn.paths[0].Path; q != p {
		t.Errorf("QUERY PATH %+v\nQUERY_ROUTE %+v", q, p)
	}
	// The address vector the CM gives the queue pair is the route's.
	av := conn.clientRTR.AV
	if av.IsGlobal != 1 || av.DGID != p.DGID || av.HopLimit != p.HopLimit || av.TrafficClass != p.TrafficClass || av.PortNum != 1 {
		t.Errorf("client RTR address vector %+v, route %+v", av, p)
	}
	t.Logf("route: %s → %s, sgid index %d, traffic class %d, hop limit %d, path MTU %v, packet lifetime %d, timeout %d",
		conn.route.Src, conn.route.Dst, av.SGIDIndex, p.TrafficClass, p.HopLimit, p.MTU, p.PacketLifeTime, conn.clientRTR.Timeout)
}

// TestCMToS: a ToS set on the ID is the route's traffic class and the
// address vector's on both sides (the passive side mirrors the request).
func TestCMToS(t *testing.T) {
	addr := cmSetup(t)
	conn := cmLoopback(t, addr, 0x68)
	if tc := conn.route.Paths[0].TrafficClass; tc != 0x68 {
		t.Errorf("route traffic class %#x, want 0x68", tc)
	}
	if c, s := conn.clientRTR.AV.TrafficClass, conn.serverRTR.AV.TrafficClass; c != 0x68 || s != 0x68 {
		t.Errorf("RTR traffic class: client %#x, server %#x; want 0x68", c, s)
	}
}

// TestCMErrors: each failure an operator meets is an error that says what
// happened, and leaves no ID behind.
func TestCMErrors(t *testing.T) {
	addr := cmSetup(t)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newID := func(t *testing.T) *rdmacm.ID {
		id, err := ch.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { id.Destroy() })
		return id
	}

	t.Run("addr_error_no_rdma_device", func(t *testing.T) {
		// veth1 has an address but no RDMA device.
		ip(t, "addr", "add", "192.168.78.1/24", "dev", "veth1")
		defer run(layout.IP, "addr", "del", "192.168.78.1/24", "dev", "veth1")
		id := newID(t)
		err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.MustParseAddrPort("192.168.78.1:7174"), 2*time.Second)
		var cmErr *rdmacm.Error
		if !errors.As(err, &cmErr) || cmErr.Event != rdmacm.EventAddrError || !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENODEV) {
			t.Fatalf("error %v (%T), want ADDR_ERROR with ENODEV", err, err)
		}
		if cmErr.Egress != "veth1" {
			t.Errorf("egress %q, want veth1: %v", cmErr.Egress, err)
		}
		t.Log(err)
	})
	t.Run("bind_no_rdma_device", func(t *testing.T) {
		ip(t, "addr", "add", "192.168.78.1/24", "dev", "veth1")
		defer run(layout.IP, "addr", "del", "192.168.78.1/24", "dev", "veth1")
		id := newID(t)
		err := id.Bind(netip.MustParseAddrPort("192.168.78.1:7174"))
		if !errors.Is(err, syscall.ENODEV) {
			t.Fatalf("error %v, want ENODEV", err)
		}
		t.Log(err)
	})
	t.Run("rejected_nothing_listens", func(t *testing.T) {
		id := newID(t)
		if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(addr, cmPort+1), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err := id.Connect(ctx, rdmacm.ConnParam{QPNum: 0x123, RetryCount: 7, RNRRetryCount: 7})
		var cmErr *rdmacm.Error
		if !errors.As(err, &cmErr) || cmErr.Event != rdmacm.EventRejected || rdmacm.RejectReason(cmErr.Status) != rdmacm.RejectInvalidServiceID ||
			!errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("error %v, want REJECTED with reason 8", err)
		}
		t.Log(err)
	})
	t.Run("rejected_by_peer", func(t *testing.T) {
		listener := newID(t)
		if err := listener.Bind(netip.AddrPortFrom(addr, cmPort+2)); err != nil {
			t.Fatal(err)
		}
		if err := listener.Listen(1); err != nil {
			t.Fatal(err)
		}
		go func() {
			if req, err := listener.GetRequest(ctx); err == nil {
				req.ID.Reject(rdmacm.RejectConsumer, []byte("no thanks"))
				req.ID.Destroy()
			}
		}()
		id := newID(t)
		if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(addr, cmPort+2), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err := id.Connect(ctx, rdmacm.ConnParam{QPNum: 0x123, RetryCount: 7, RNRRetryCount: 7})
		var cmErr *rdmacm.Error
		if !errors.As(err, &cmErr) || cmErr.Event != rdmacm.EventRejected || rdmacm.RejectReason(cmErr.Status) != rdmacm.RejectConsumer {
			t.Fatalf("error %v, want REJECTED with reason 28", err)
		}
		t.Log(err)
	})
	t.Run("route_before_address", func(t *testing.T) {
		id := newID(t)
		err := id.ResolveRoute(ctx, time.Second)
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("error %v, want EINVAL", err)
		}
		t.Log(err)
	})
	t.Run("canceled", func(t *testing.T) {
		id := newID(t)
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		err := id.ResolveAddr(cctx, netip.AddrPort{}, netip.AddrPortFrom(addr, cmPort), 2*time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})
	t.Run("listen_port_taken", func(t *testing.T) {
		a, b := newID(t), newID(t)
		if err := a.Bind(netip.AddrPortFrom(addr, cmPort+3)); err != nil {
			t.Fatal(err)
		}
		if err := a.Listen(1); err != nil {
			t.Fatal(err)
		}
		err := b.Bind(netip.AddrPortFrom(addr, cmPort+3))
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("error %v, want EADDRINUSE", err)
		}
		t.Log(err)
	})
}
