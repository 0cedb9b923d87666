//go:build e2eguest

package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	noCMIDsOn(t, "this guest", run)
}

// noCMIDsOn fails the test if `rdma -j res show cm_id`, run by runner,
// still lists an ID (after a while: a destroyed ID's events drain).
func noCMIDsOn(t *testing.T, where string, runner func(string, ...string) result) {
	t.Helper()
	var ids []map[string]any
	ok := eventually(5*time.Second, func() bool {
		r := runner(layout.Rdma, "-j", "res", "show", "cm_id")
		ids = nil
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &ids) == nil && len(ids) == 0
	})
	if !ok {
		t.Errorf("RDMA CM IDs left behind on %s: %v", where, ids)
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

// cmConn is what the active side of a connection saw.
type cmConn struct {
	id             *rdmacm.ID
	e              *cmEndpoint
	peer           rdmacm.ConnParam
	rtr            uverbs.QPAttr
	route          rdmacm.Route
	paths          []rdmacm.PathRecord
	addr           rdmacm.Addr
	srcGID, dstGID [16]byte
	steps          []string
}

// cmDial connects an RC queue pair to dst through the CM as a librdmacm
// client does, with a receive posted before the connection; tos, if not
// negative, is set on the ID. The caller closes the endpoint and
// destroys the ID (close does both).
func cmDial(ctx context.Context, ch *rdmacm.Channel, dst netip.AddrPort, tos int) (c *cmConn, err error) {
	c = &cmConn{}
	start := time.Now()
	step := func(format string, args ...any) {
		c.steps = append(c.steps, fmt.Sprintf("%8v %s", time.Since(start).Round(time.Microsecond), fmt.Sprintf(format, args...)))
	}
	if c.id, err = ch.CreateID(rdmacm.PortSpaceTCP); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if err := c.id.ResolveAddr(ctx, netip.AddrPort{}, dst, 2*time.Second); err != nil {
		return c, err
	}
	step("address resolved")
	if c.addr, err = c.id.QueryAddr(); err != nil {
		return c, err
	}
	if tos >= 0 {
		if err := c.id.SetTOS(uint8(tos)); err != nil {
			return c, err
		}
	}
	if err := c.id.ResolveRoute(ctx, 2*time.Second); err != nil {
		return c, err
	}
	step("route resolved")
	if c.route, err = c.id.QueryRoute(); err != nil {
		return c, err
	}
	if c.paths, err = c.id.QueryPath(); err != nil {
		return c, err
	}
	if c.srcGID, c.dstGID, err = c.id.QueryGID(); err != nil {
		return c, err
	}
	if c.e, err = newCMEndpoint(c.addr.Device); err != nil {
		return c, err
	}
	if _, err := c.e.move(c.id, ib.QPStateInit, nil); err != nil {
		return c, err
	}
	if err := c.e.postRecv(); err != nil {
		return c, err
	}
	c.peer, err = c.id.Connect(ctx, rdmacm.ConnParam{QPNum: c.e.qp.QP().QPN, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		return c, err
	}
	step("connect response: peer QPN %d", c.peer.QPNum)
	if c.rtr, err = c.e.connect(c.id, nil, nil); err != nil {
		return c, err
	}
	if c.rtr.DestQPN != c.peer.QPNum {
		return c, fmt.Errorf("RTR dest QPN %d, the peer's is %d", c.rtr.DestQPN, c.peer.QPNum)
	}
	if err := c.id.Establish(); err != nil {
		return c, err
	}
	step("established (RTU sent)")
	return c, nil
}

// disconnect ends the connection from this side: ERR, DISCONNECT, and
// the DISCONNECTED event.
func (c *cmConn) disconnect(ctx context.Context) error {
	if err := c.e.toErr(); err != nil {
		return err
	}
	if err := c.id.Disconnect(); err != nil {
		return err
	}
	return c.id.WaitDisconnected(ctx)
}

func (c *cmConn) close() error {
	var errs []error
	if c.e != nil {
		errs = append(errs, c.e.close())
	}
	if c.id != nil {
		errs = append(errs, c.id.Destroy())
	}
	return errors.Join(errs...)
}

// cmAccepted is the passive side of a connection.
type cmAccepted struct {
	req *rdmacm.Request
	e   *cmEndpoint
	rtr uverbs.QPAttr
}

// cmAccept takes the listener's next request and connects it as a
// librdmacm server does: a queue pair with a receive posted, through RTS
// with the resources it accepts (1), ACCEPT, and ESTABLISHED.
func cmAccept(ctx context.Context, listener *rdmacm.ID) (a *cmAccepted, err error) {
	a = &cmAccepted{}
	if a.req, err = listener.GetRequest(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if !a.req.Addr.HasDevice() {
		return a, fmt.Errorf("the request's ID has no device: %+v", a.req.Addr)
	}
	if a.e, err = newCMEndpoint(a.req.Addr.Device); err != nil {
		return a, err
	}
	if _, err := a.e.move(a.req.ID, ib.QPStateInit, nil); err != nil {
		return a, err
	}
	if err := a.e.postRecv(); err != nil {
		return a, err
	}
	resources := min(a.req.Peer.ResponderResources, 1)
	depth := min(a.req.Peer.InitiatorDepth, 1)
	if a.rtr, err = a.e.connect(a.req.ID, &resources, &depth); err != nil {
		return a, err
	}
	if err := a.req.ID.Accept(rdmacm.ConnParam{QPNum: a.e.qp.QP().QPN, ResponderResources: resources, InitiatorDepth: depth, RNRRetryCount: 7}); err != nil {
		return a, err
	}
	return a, a.req.ID.WaitEstablished(ctx)
}

func (a *cmAccepted) close() error {
	var errs []error
	if a.e != nil {
		errs = append(errs, a.e.close())
	}
	if a.req != nil {
		errs = append(errs, a.req.ID.Destroy())
	}
	return errors.Join(errs...)
}

// cmListen makes a listener on addr (an IPv4 address of the guest, or
// 0.0.0.0) and port.
func cmListen(t *testing.T, ch *rdmacm.Channel, addr netip.Addr, port uint16) *rdmacm.ID {
	t.Helper()
	l, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Destroy() })
	if err := l.Bind(netip.AddrPortFrom(addr, port)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	return l
}

func openCM(t *testing.T) *rdmacm.Channel {
	t.Helper()
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// loopback is what a connection between two IDs of this guest showed.
type loopback struct {
	client    *cmConn
	serverRTR uverbs.QPAttr
}

// cmLoopback connects a client ID to a listener on the wildcard address
// and cmPort, both in this guest, the client to addr; sends a message
// each way and disconnects. tos, if not negative, is set on the client ID.
func cmLoopback(t *testing.T, addr netip.Addr, tos int) loopback {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listener := cmListen(t, openCM(t), netip.IPv4Unspecified(), cmPort)
	var lb loopback
	served := make(chan error, 1)
	go func() {
		a, err := cmAccept(ctx, listener)
		if err == nil {
			lb.serverRTR = a.rtr
			err = a.echo(ctx)
		}
		if a != nil {
			err = errors.Join(err, a.close())
		}
		served <- err
	}()
	c, err := cmDial(ctx, openCM(t), netip.AddrPortFrom(addr, cmPort), tos)
	if c != nil {
		defer func() {
			for _, s := range c.steps {
				t.Log(s)
			}
			if err := c.close(); err != nil {
				t.Error(err)
			}
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	lb.client = c
	if err := c.e.send("ping from the client"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.e.received(); err != nil || got != "pong from the server" {
		t.Fatalf("client received %q, %v", got, err)
	}
	if err := c.disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("passive side: %v", err)
	}
	return lb
}

// echo answers the client's message and waits for its disconnection.
func (a *cmAccepted) echo(ctx context.Context) error {
	if got, err := a.e.received(); err != nil || got != "ping from the client" {
		return fmt.Errorf("server received %q, %v", got, err)
	}
	if err := a.e.send("pong from the server"); err != nil {
		return err
	}
	if err := a.req.ID.WaitDisconnected(ctx); err != nil {
		return err
	}
	if err := a.e.toErr(); err != nil {
		return err
	}
	return a.req.ID.Disconnect()
}

// TestCMConnect connects two IDs of this guest over rxe0's IPv4 address:
// the CM resolves the address to rxe0 port 1 and its IPv4 GID (RoCE v2,
// rxe's only kind), the queue pairs go INIT→RTR→RTS with the kernel's
// INIT_QP_ATTR answers alone, a SEND goes each way, and nothing is left.
func TestCMConnect(t *testing.T) {
	addr := cmSetup(t)
	conn := cmLoopback(t, addr, -1).client
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
	// must agree, but for the IB fields, where RoCE's record has MAC bytes.
	q := conn.paths[0].Path
	q.SLID, q.DLID, q.RawTraffic = p.SLID, p.DLID, p.RawTraffic
	if q != p {
		t.Errorf("QUERY PATH %+v\nQUERY_ROUTE %+v", q, p)
	}
	// The address vector the CM gives the queue pair is the route's.
	av := conn.rtr.AV
	if av.IsGlobal != 1 || av.DGID != p.DGID || av.HopLimit != p.HopLimit || av.TrafficClass != p.TrafficClass || av.PortNum != 1 {
		t.Errorf("client RTR address vector %+v, route %+v", av, p)
	}
	t.Logf("route: %s → %s, sgid index %d, traffic class %d, hop limit %d, path MTU %v, packet lifetime %d, timeout %d",
		conn.route.Src, conn.route.Dst, av.SGIDIndex, p.TrafficClass, p.HopLimit, p.MTU, p.PacketLifeTime, conn.rtr.Timeout)
}

// TestCMToS: a ToS set on the ID is the route's traffic class and the
// address vector's on both sides (the passive side mirrors the request).
func TestCMToS(t *testing.T) {
	addr := cmSetup(t)
	lb := cmLoopback(t, addr, 0x68)
	if tc := lb.client.route.Paths[0].TrafficClass; tc != 0x68 {
		t.Errorf("route traffic class %#x, want 0x68", tc)
	}
	if c, s := lb.client.rtr.AV.TrafficClass, lb.serverRTR.AV.TrafficClass; c != 0x68 || s != 0x68 {
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
		t.Helper()
		id, err := ch.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { id.Destroy() })
		return id
	}

	t.Run("addr_error_no_rdma_device", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t) })
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
		t.Cleanup(func() { noCMIDs(t) })
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
		t.Cleanup(func() { noCMIDs(t) })
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
		t.Cleanup(func() { noCMIDs(t) })
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
		t.Cleanup(func() { noCMIDs(t) })
		id := newID(t)
		err := id.ResolveRoute(ctx, time.Second)
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("error %v, want EINVAL", err)
		}
		t.Log(err)
	})
	t.Run("canceled", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t) })
		id := newID(t)
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		err := id.ResolveAddr(cctx, netip.AddrPort{}, netip.AddrPortFrom(addr, cmPort), 2*time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})
	t.Run("listen_port_taken", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t) })
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

// cmDefault is what grdma -j cm show prints for a port.
type cmDefault struct {
	Ifname   string `json:"ifname"`
	Port     int    `json:"port"`
	RoCEMode string `json:"roce_mode"`
	ToS      int    `json:"tos"`
}

// TestCMDefaults: grdma cm show and set read and change configfs's
// default_roce_mode and default_roce_tos as cma_roce_mode and
// cma_roce_tos do, leaving configfs as they found it (here: not
// mounted); what they set is what the CM then picks; grdma check cm
// passes.
func TestCMDefaults(t *testing.T) {
	addr := cmSetup(t)
	mounts := readFile("/proc/mounts")
	show := func(t *testing.T) []cmDefault {
		t.Helper()
		r := must(t, grdma(), "-j", "cm", "show", "rxe0/1")
		var defs []cmDefault
		if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		return defs
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		if now := readFile("/proc/mounts"); now != mounts {
			t.Errorf("mounts changed:\nbefore\n%s\nafter\n%s", mounts, now)
		}
	}
	if defs := show(t); len(defs) != 1 || defs[0] != (cmDefault{"rxe0", 1, "RoCE v2", 0}) {
		t.Fatalf("cm show: %+v", defs)
	}
	unchanged(t)
	if r := must(t, grdma(), "cm"); r.stdout != "cm rxe0/1 roce-mode v2 tos 0\n" {
		t.Errorf("cm:\n%s", r)
	}

	// The ToS default: what connections without a ToS of their own get.
	must(t, grdma(), "cm", "set", "rxe0/1", "tos", "104")
	t.Cleanup(func() { must(t, grdma(), "cm", "set", "rxe0/1", "tos", "0") })
	unchanged(t)
	if defs := show(t); len(defs) != 1 || defs[0].ToS != 104 {
		t.Fatalf("after cm set tos 104: %+v", defs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	choice, err := openCM(t).Choose(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if choice.Path.TrafficClass != 104 || choice.Device.Port != 1 {
		t.Errorf("the CM's choice after cm set tos 104: %+v", choice)
	}
	lb := cmLoopback(t, addr, -1)
	if c, s := lb.client.rtr.AV.TrafficClass, lb.serverRTR.AV.TrafficClass; c != 104 || s != 104 {
		t.Errorf("RTR traffic class: client %d, server %d; want 104", c, s)
	}

	// rxe has RoCE v2 GIDs only: the kernel refuses v1, and says why.
	r := run(grdma(), "cm", "set", "rxe0/1", "roce-mode", "v1")
	if r.code != 1 || !strings.Contains(r.stderr, "the port has no RoCE v1 GIDs (rxe has RoCE v2 only)") {
		t.Errorf("roce-mode v1 on rxe:\n%s", r)
	}
	must(t, grdma(), "cm", "set", "rxe0/1", "roce-mode", "v2")
	unchanged(t)

	// Bad input exits 2, a missing device or port 1, nothing changed.
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"cm", "set", "rxe0/1", "tos", "256"}, 2, `tos "256": want the ToS byte, 0 to 255`},
		{[]string{"cm", "set", "rxe0", "tos", "1"}, 2, "cm set needs a port: rxe0/PORT"},
		{[]string{"cm", "set", "rxe0/1"}, 2, "nothing to set"},
		{[]string{"cm", "set", "rxe0/1", "roce-mode", "v3"}, 2, `roce-mode "v3": want v1 or v2`},
		{[]string{"cm", "set", "rxe9/1", "tos", "1"}, 1, "rxe9"},
		{[]string{"cm", "set", "rxe0/2", "tos", "1"}, 1, "RDMA device rxe0 has no port 2 (it has 1)"},
		{[]string{"cm", "show", "rxe9"}, 1, "rxe9"},
	} {
		r := run(grdma(), c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("want exit %d with %q:\n%s", c.code, c.msg, r)
		}
	}
	if defs := show(t); len(defs) != 1 || defs[0] != (cmDefault{"rxe0", 1, "RoCE v2", 104}) {
		t.Errorf("after the bad input: %+v", defs)
	}
	unchanged(t)

	// Unprivileged: configfs's directory cannot be made.
	if r := runAs(65534, grdma(), "cm", "show"); r.code != 1 || !strings.Contains(r.stderr, "root") {
		t.Errorf("as nobody:\n%s", r)
	}

	// grdma check cm: rxe0/1 binds its address with a RoCE v2 GID; it
	// warns of rxe's completion queue limit, which libfabric's
	// verbs;ofi_rxm exceeds by default.
	var sum struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Status, Subject, Message string
		} `json:"checks"`
	}
	r = must(t, grdma(), "-j", "check", "cm")
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	if !sum.OK || len(sum.Checks) != 1 || sum.Checks[0].Status != "WARN" || sum.Checks[0].Subject != "rxe0/1" ||
		!strings.Contains(sum.Checks[0].Message, "completion queues hold at most 32767 entries (max_cqe)") {
		t.Errorf("check cm:\n%s", r)
	}
	t.Log(sum.Checks)
	unchanged(t)
}

// TestCMLibfabricRxm is issue 29's finding: libfabric's
// `fi_pingpong -e rdm -p "verbs;ofi_rxm"` fails on rxe because ofi_rxm
// opens its MSG completion queue with (128 + 128) × FI_UNIVERSE_SIZE
// (256) = 65536 entries and rxe's hold at most 32767 (max_cqe): the
// kernel refuses the CQ (EINVAL) and libfabric says "Unable to create
// verbs CQ". With FI_UNIVERSE_SIZE=127 (32512 entries) it runs.
func TestCMLibfabricRxm(t *testing.T) {
	addr := cmSetup(t)
	// The limit itself, through uverbs.
	nl, err := nldev.Dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	d, err := nl.DeviceByName("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	c, err := locator.Open(fsys, nl, d.Index, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.MaxCQE != 32767 {
		t.Errorf("rxe's max_cqe %d, want 32767", attr.MaxCQE)
	}
	if cq, err := c.CreateRxeCQ(attr.MaxCQE + 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a CQ of max_cqe+1 entries: %v, want EINVAL", err)
		if err == nil {
			cq.Destroy()
		}
	}
	cq, err := c.CreateRxeCQ(attr.MaxCQE)
	if err != nil {
		t.Fatalf("a CQ of max_cqe entries: %v", err)
	}
	cq.Destroy()

	// fi_pingpong, both ends on rxe0's address, its control connection
	// on TCP port fiPort.
	const fiPort = "47592"
	pingpong := func(t *testing.T, env ...string) (server, client result) {
		t.Helper()
		args := []string{"-e", "rdm", "-p", "verbs;ofi_rxm", "-m", "tagged", "-I", "2", "-S", "64"}
		srv := exec.Command(layout.FiPingpong, append(args, "-B", fiPort)...)
		srv.Env = append(os.Environ(), append(env, "FI_LOG_LEVEL=warn")...)
		var out, errb strings.Builder
		srv.Stdout, srv.Stderr = &out, &errb
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan struct{})
		go func() { srv.Wait(); close(ended) }()
		t.Cleanup(func() { srv.Process.Kill(); <-ended })
		port, _ := strconv.Atoi(fiPort)
		if !eventually(10*time.Second, func() bool { return listening(port) }) {
			t.Fatalf("fi_pingpong's server never listened on %s:\n%s%s", fiPort, out.String(), errb.String())
		}
		cli := append(quoteAll(append(args, "-P", fiPort)), addr.String())
		client = run(layout.Sh, "-c", strings.Join(env, " ")+" FI_LOG_LEVEL=warn exec "+layout.FiPingpong+" "+strings.Join(cli, " "))
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatalf("fi_pingpong's server did not end:\n%s%s", out.String(), errb.String())
		}
		server = result{cmd: "fi_pingpong (server) " + strings.Join(env, " "), stdout: out.String(), stderr: errb.String(), code: srv.ProcessState.ExitCode()}
		return server, client
	}
	t.Run("default", func(t *testing.T) {
		srv, cli := pingpong(t)
		if srv.code == 0 || !strings.Contains(srv.stderr, "Unable to create verbs CQ") {
			t.Errorf("want the server to fail creating its CQ:\n%s\n%s", srv, cli)
		}
	})
	t.Run("universe_127", func(t *testing.T) {
		srv, cli := pingpong(t, "FI_UNIVERSE_SIZE=127")
		switch {
		case !fiExchanged(srv.stdout, 2) || !fiExchanged(cli.stdout, 2) || cli.code != 0:
			t.Errorf("want both to pass:\n%s\n%s", srv, cli)
		// libfabric catches a fatal signal itself: it prints "fi_pingpong:N
		// terminated with signal 11 at PC=…" and a backtrace, and exits 1.
		case srv.code != 0 && !strings.Contains(srv.stderr, "terminated with signal"):
			t.Errorf("want the server to end cleanly after its exchange:\n%s\n%s", srv, cli)
		case srv.code != 0:
			// libfabric's own defect, not the CQ's size: its teardown
			// crashed after a whole exchange on 6.1 (one CI run and one
			// e2e run of 2026-11-29).
			t.Logf("the server exchanged all its messages, then libfabric crashed closing them:\n%s", srv)
		}
	})
}

// fiExchanged reports whether fi_pingpong's report shows iters messages
// sent and all acknowledged: "64  2  =2  256  0.30s ...".
func fiExchanged(stdout string, iters int) bool {
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == strconv.Itoa(iters) && f[2] == "="+strconv.Itoa(iters) {
			return true
		}
	}
	return false
}

// quoteAll quotes words for sh -c.
func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return out
}
