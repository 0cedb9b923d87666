package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// The scenarios run against the kernel in the guest (TestLive, which
// records them) and against their recordings (TestReplay). They drive the
// CM alone: the CM only carries queue pair numbers, so these use made-up
// ones and no verbs objects (e2e/guest's TestCMConnect moves real queue
// pairs).

// scenarioEnv is where a scenario runs: the rxe device's address, an
// address of a netdev without RDMA device, and its channels by name.
type scenarioEnv struct {
	addr, noRDMA netip.Addr
	open         func(t *testing.T, name string) *Channel
}

var scenarios = []struct {
	name string
	run  func(t *testing.T, env *scenarioEnv)
}{
	{"connect", func(t *testing.T, env *scenarioEnv) { scenarioConnect(t, env, 7300, -1) }},
	{"tos", func(t *testing.T, env *scenarioEnv) { scenarioConnect(t, env, 7310, 0x68) }},
	{"errors", scenarioErrors},
	{"choose", scenarioChoose},
}

// scenarioChoose: what the CM chooses for the rxe device's address.
func scenarioChoose(t *testing.T, env *scenarioEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := env.open(t, "choose").Choose(ctx, env.addr)
	if err != nil {
		t.Fatal(err)
	}
	mapped := netip.AddrFrom16(env.addr.As16())
	if ch.Addr != env.addr || ch.Device.Port != 1 || ch.Device.NodeGUID == 0 || netip.AddrFrom16(ch.SGID) != mapped ||
		ch.Path.DGID != ch.SGID || ch.Path.TrafficClass != 0 || ch.SGIDIndex == 0 {
		t.Errorf("choice %+v; want port 1, GID %s (not index 0: the link-local GID)", ch, mapped)
	}
}

// The made-up queue pair numbers.
const (
	clientQPN = 0x000123
	serverQPN = 0x000456
)

// qpAttrs is what INIT_QP_ATTR answered one side, by state.
type qpAttrs map[ib.QPState]struct {
	attr uverbs.QPAttr
	mask uverbs.QPAttrMask
}

func initQPAttrs(id *ID, states ...ib.QPState) (qpAttrs, error) {
	out := qpAttrs{}
	for _, s := range states {
		attr, mask, err := id.InitQPAttr(s)
		if err != nil {
			return nil, fmt.Errorf("INIT_QP_ATTR %v: %w", s, err)
		}
		out[s] = struct {
			attr uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{attr, mask}
	}
	return out, nil
}

// scenarioConnect connects a client to a wildcard listener on port, both
// on the rxe device, the client with ToS tos when not negative, and
// disconnects; then checks what the CM answered on each side.
func scenarioConnect(t *testing.T, env *scenarioEnv, port uint16, tos int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	server, client := env.open(t, "server"), env.open(t, "client")

	listener, err := server.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Destroy()
	if err := listener.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), port)); err != nil {
		t.Fatal(err)
	}
	if err := listener.Listen(1); err != nil {
		t.Fatal(err)
	}
	if a, err := listener.QueryAddr(); err != nil || a.HasDevice() || a.Src.Port() != port {
		t.Errorf("wildcard listener: %+v, %v; want port %d and no device", a, err, port)
	}
	type served struct {
		req   *Request
		attrs qpAttrs
		err   error
	}
	done := make(chan served, 1)
	go func() {
		var s served
		defer func() { done <- s }()
		if s.req, s.err = listener.GetRequest(ctx); s.err != nil {
			return
		}
		id := s.req.ID
		defer id.Destroy()
		resources, depth := min(s.req.Peer.ResponderResources, 1), min(s.req.Peer.InitiatorDepth, 1)
		if s.attrs, s.err = initQPAttrs(id, ib.QPStateInit, ib.QPStateRTR, ib.QPStateRTS); s.err != nil {
			return
		}
		if s.err = id.Accept(ConnParam{QPNum: serverQPN, ResponderResources: resources, InitiatorDepth: depth, RNRRetryCount: 7,
			PrivateData: []byte("server")}); s.err != nil {
			return
		}
		if s.err = id.WaitEstablished(ctx); s.err != nil {
			return
		}
		if s.err = id.WaitDisconnected(ctx); s.err != nil {
			return
		}
		s.err = id.Disconnect()
	}()

	id, err := client.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Destroy()
	dst := netip.AddrPortFrom(env.addr, port)
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	addr, err := id.QueryAddr()
	if err != nil {
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
	route, err := id.QueryRoute()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := id.QueryPath()
	if err != nil {
		t.Fatal(err)
	}
	sgid, dgid, err := id.QueryGID()
	if err != nil {
		t.Fatal(err)
	}
	before, err := initQPAttrs(id, ib.QPStateInit)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := id.Connect(ctx, ConnParam{QPNum: clientQPN, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
		PrivateData: []byte("client")})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := initQPAttrs(id, ib.QPStateInit, ib.QPStateRTR, ib.QPStateRTS)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	// The client ends it; the passive side answers its DREQ.
	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := id.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatalf("passive side: %v", s.err)
	}

	// Where the CM bound the client: the rxe device's port 1, its
	// address both ways, the IPv4-mapped GIDs.
	if !addr.HasDevice() || addr.Device.Port != 1 || addr.Device.Index == NoDeviceIndex || addr.Src.Addr() != env.addr || addr.Dst != dst {
		t.Errorf("QUERY ADDR %+v; want port 1 of a device, %s both ways", addr, env.addr)
	}
	mapped := netip.AddrFrom16(env.addr.As16())
	if netip.AddrFrom16(sgid) != mapped || netip.AddrFrom16(dgid) != mapped {
		t.Errorf("QUERY GID %s → %s, want %s both", netip.AddrFrom16(sgid), netip.AddrFrom16(dgid), mapped)
	}
	if route.Device != addr.Device || len(route.Paths) != 1 || len(paths) != 1 {
		t.Fatalf("QUERY_ROUTE %+v, QUERY PATH %d paths", route, len(paths))
	}
	p := route.Paths[0]
	wantTC := uint8(0)
	if tos >= 0 {
		wantTC = uint8(tos)
	}
	if p.SGID != sgid || p.DGID != dgid || p.TrafficClass != wantTC || p.HopLimit == 0 || p.MTU != ib.MTU1024 || p.PKey != 0xffff {
		t.Errorf("path %+v; want the GIDs, traffic class %#x, a hop limit, MTU 1024 (netdev MTU 1500), P_Key 0xffff", p, wantTC)
	}
	q := paths[0].Path
	q.SLID, q.DLID, q.RawTraffic = p.SLID, p.DLID, p.RawTraffic // on RoCE bytes of a MAC (QueryPath)
	if q != p || paths[0].Flags&PathPrimary == 0 {
		t.Errorf("QUERY PATH (packed) %+v flags %#x\nQUERY_ROUTE          %+v", q, paths[0].Flags, p)
	}
	// What the peer said, as each side saw it.
	if peer.QPNum != serverQPN || string(peer.PrivateData[:6]) != "server" || len(peer.PrivateData) != MaxAcceptPrivateData {
		t.Errorf("connect response %+v", peer)
	}
	if r := s.req; r.Peer.QPNum != clientQPN || r.Peer.RetryCount != 7 || r.Peer.ResponderResources != 1 ||
		string(r.Peer.PrivateData[:6]) != "client" || len(r.Peer.PrivateData) != MaxConnectPrivateData ||
		r.Addr.Device != addr.Device || r.Addr.Src != dst {
		t.Errorf("request %+v", r)
	}
	// Before the connection INIT_QP_ATTR gives the INIT basics; after it
	// each state's attributes, the remote QPN and PSNs crossed over.
	if m := before[ib.QPStateInit].mask; m != uverbs.QPAttrsResetToInit {
		t.Errorf("INIT mask before connecting %v, want %v", m, uverbs.QPAttrsResetToInit)
	}
	for side, a := range map[string]qpAttrs{"client": attrs, "server": s.attrs} {
		if m := a[ib.QPStateRTR].mask; m != uverbs.QPAttrsInitToRTR {
			t.Errorf("%s RTR mask %v, want %v", side, m, uverbs.QPAttrsInitToRTR)
		}
		if m := a[ib.QPStateRTS].mask; m != uverbs.QPAttrsRTRToRTS {
			t.Errorf("%s RTS mask %v, want %v", side, m, uverbs.QPAttrsRTRToRTS)
		}
		init := a[ib.QPStateInit].attr
		if init.PortNum != 1 || init.AccessFlags&uverbs.AccessRemoteWrite == 0 || init.AccessFlags&uverbs.AccessRemoteRead == 0 {
			t.Errorf("%s INIT %+v; want port 1, remote write and read", side, init)
		}
		rtr := a[ib.QPStateRTR].attr
		if av := rtr.AV; av.IsGlobal != 1 || av.TrafficClass != wantTC || av.DGID != dgid || av.PortNum != 1 || rtr.PathMTU != ib.MTU1024 {
			t.Errorf("%s RTR %+v", side, rtr)
		}
	}
	crt, srt := attrs[ib.QPStateRTR].attr, s.attrs[ib.QPStateRTR].attr
	cts, sts := attrs[ib.QPStateRTS].attr, s.attrs[ib.QPStateRTS].attr
	if crt.DestQPN != serverQPN || srt.DestQPN != clientQPN || crt.RQPSN != sts.SQPSN || srt.RQPSN != cts.SQPSN {
		t.Errorf("QPNs and PSNs do not cross: client RTR %+v RTS %+v, server RTR %+v RTS %+v", crt, cts, srt, sts)
	}
	if cts.RetryCnt != 7 || sts.RetryCnt != 7 || cts.RNRRetry != 7 || sts.RNRRetry != 7 {
		t.Errorf("retries: client %d/%d, server %d/%d; want 7", cts.RetryCnt, cts.RNRRetry, sts.RetryCnt, sts.RNRRetry)
	}
}

// scenarioErrors: what each failure looks like, an ID and a channel each.
func scenarioErrors(t *testing.T, env *scenarioEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newID := func(t *testing.T, c *Channel) *ID {
		id, err := c.CreateID(PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { id.Destroy() })
		return id
	}
	connect := func(t *testing.T, c *Channel, port uint16) error {
		id := newID(t, c)
		if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(env.addr, port), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveRoute(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err := id.Connect(ctx, ConnParam{QPNum: clientQPN, RetryCount: 7, RNRRetryCount: 7})
		return err
	}
	t.Run("rejected_nothing_listens", func(t *testing.T) {
		err := connect(t, env.open(t, "rejected8"), 7320)
		var e *Error
		if !errors.As(err, &e) || e.Event != EventRejected || RejectReason(e.Status) != RejectInvalidServiceID || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("error %v; want REJECTED, reason 8", err)
		}
		want := fmt.Sprintf("connect %s:7320: RDMA_CM_EVENT_REJECTED (invalid service ID): nothing listens on port 7320 at %s (RDMA CM)", env.addr, env.addr)
		if err.Error() != want {
			t.Errorf("error\n%v\nwant\n%s", err, want)
		}
	})
	t.Run("rejected_by_peer", func(t *testing.T) {
		listener := newID(t, env.open(t, "refuser"))
		if err := listener.Bind(netip.AddrPortFrom(env.addr, 7321)); err != nil {
			t.Fatal(err)
		}
		if err := listener.Listen(1); err != nil {
			t.Fatal(err)
		}
		refused := make(chan error, 1)
		go func() {
			req, err := listener.GetRequest(ctx)
			if err == nil {
				err = errors.Join(req.ID.Reject(RejectConsumer, []byte("no")), req.ID.Destroy())
			}
			refused <- err
		}()
		err := connect(t, env.open(t, "refused"), 7321)
		if rerr := <-refused; rerr != nil {
			t.Fatal(rerr)
		}
		var e *Error
		if !errors.As(err, &e) || e.Event != EventRejected || RejectReason(e.Status) != RejectConsumer {
			t.Fatalf("error %v; want REJECTED, reason 28", err)
		}
		if e.TOS != 0 || e.Device.Port != 1 {
			t.Errorf("the error does not know the route: %+v", e)
		}
	})
	t.Run("addr_error_no_rdma_device", func(t *testing.T) {
		id := newID(t, env.open(t, "nodevice"))
		dst := netip.AddrPortFrom(env.noRDMA, 7322)
		err := id.ResolveAddr(ctx, netip.AddrPort{}, dst, 2*time.Second)
		var e *Error
		if !errors.As(err, &e) || e.Event != EventAddrError || !errors.Is(err, syscall.ENODEV) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error %v; want ADDR_ERROR, ENODEV", err)
		}
		if e.Egress == "" {
			t.Errorf("no egress netdev: %v", err)
		}
		want := fmt.Sprintf("resolve address %s: RDMA_CM_EVENT_ADDR_ERROR (no such device): the route to %s leaves through netdev %s, which has no RDMA device with a GID for %s of its port's default RoCE mode: create one there (grdma link add NAME type rxe netdev %s) or use an address of an RDMA netdev",
			dst, env.noRDMA, e.Egress, env.noRDMA, e.Egress)
		if err.Error() != want {
			t.Errorf("error\n%v\nwant\n%s", err, want)
		}
		err = newID(t, env.open(t, "nodevice-bind")).Bind(netip.AddrPortFrom(env.noRDMA, 7322))
		if !errors.Is(err, syscall.ENODEV) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("bind: %v; want ENODEV", err)
		}
	})
	t.Run("route_before_address", func(t *testing.T) {
		err := newID(t, env.open(t, "misuse")).ResolveRoute(ctx, time.Second)
		if !errors.Is(err, syscall.EINVAL) || err.Error() != "rdma_cm RESOLVE_ROUTE: invalid argument: the ID's address is not resolved (ResolveAddr first, once)" {
			t.Fatalf("error %v; want EINVAL explained", err)
		}
	})
	t.Run("port_taken", func(t *testing.T) {
		c := env.open(t, "taken")
		a, b := newID(t, c), newID(t, c)
		if err := a.Bind(netip.AddrPortFrom(env.addr, 7323)); err != nil {
			t.Fatal(err)
		}
		if err := a.Listen(1); err != nil {
			t.Fatal(err)
		}
		if err := b.Bind(netip.AddrPortFrom(env.addr, 7323)); !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("error %v; want EADDRINUSE", err)
		}
	})
}
