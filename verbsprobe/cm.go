package verbsprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// A probe over the RDMA Connection Manager (ConnectConfig.Via =
// TransportCM, ResponderConfig.CM, ServeCM): the peer is reached by IP
// address the way librdmacm applications reach theirs. The client
// resolves the address and the route (the CM picks the device, port,
// source GID, RoCE version and ToS), opens that device, and the queue
// pair numbers travel in the CM's REQ and REP; every transition takes the
// kernel's INIT_QP_ATTR answer, and the client's ready-to-use message
// (RTU) completes the connection. Over CM the exchange is:
//
//	REQ private data (≤ 56 bytes): cmHello, the test the client asks for
//	REP private data (≤ 196):      cmWelcome, the verdict of admission;
//	                               for tests that move data, the TCP port
//	                               and a one-time token of a control channel
//	REJ private data (≤ 148):      cmRefusal (busy, refused, with why)
//
// The connect test needs nothing more: ESTABLISHED on both sides, then
// the client's DISCONNECT. Traffic, bw and lat need the peer's memory key
// and their progress, done and verdict messages, which 56 bytes cannot
// carry: the server listens for them on a TCP port of its own for this one
// peer (on the address the CM request arrived at), named with a random
// 128-bit token in the REP; the client connects there once ESTABLISHED and
// speaks grdma's exchange (protocol.go) with the token in its hello. A
// firewall that passes only RoCE and the CM fails those tests at step
// establish, naming the port; connect needs no TCP.

// Transport is how a client reaches its peer's exchange.
type Transport int

const (
	// TransportTCP is grdma's JSON exchange over TCP (the zero value).
	TransportTCP Transport = iota
	// TransportCM is the RDMA CM, in its TCP port space.
	TransportCM
)

func (t Transport) String() string {
	if t == TransportCM {
		return "rdma_cm"
	}
	return "tcp"
}

// CMInfo is what the RDMA CM chose for a probe over it, and the time of
// each of its steps.
type CMInfo struct {
	Src, Dst netip.AddrPort
	Device   string
	Port     uint32
	// GIDIndex is the source GID's index in the port's table, -1 when
	// it could not be told.
	GIDIndex int
	GID      gid.GID
	DGID     gid.GID
	// RoCE is the source GID's type: "RoCE v2", "RoCE v1", "IB".
	RoCE         string
	PathMTU      ib.MTU
	TrafficClass uint8 // the ToS on RoCE
	HopLimit     uint8
	// ControlPort is the TCP port of the control channel, 0 for none.
	ControlPort uint16
	Steps       []CMStep
}

// CMStep is one step of the CM and its time: "resolve address",
// "resolve route", "connect" (REQ to REP), "establish" (RTU, or the
// server's wait for it), "disconnect".
type CMStep struct {
	Name     string
	Duration time.Duration
}

// CM step names.
const (
	CMStepResolveAddr  = "resolve address"
	CMStepResolveRoute = "resolve route"
	CMStepRequest      = "request"
	CMStepConnect      = "connect"
	CMStepEstablish    = "establish"
	CMStepDisconnect   = "disconnect"
)

func (ci *CMInfo) took(name string, d time.Duration) {
	ci.Steps = append(ci.Steps, CMStep{Name: name, Duration: d})
}

// Step names of a probe over the CM.
const (
	StepEstablish  = "establish"  // client: RTU (and the control channel); server: ACCEPT, ESTABLISHED
	StepDisconnect = "disconnect" // DISCONNECT and DISCONNECTED
)

// DefaultCMResolveTimeout bounds address and route resolution, as
// rping's and perftest's 2000 ms.
const DefaultCMResolveTimeout = 2 * time.Second

// CMListen is where a responder also answers probes over the RDMA CM.
type CMListen struct {
	// Addr is the address and port (the CM's TCP port space) to bind;
	// the unspecified address binds every device.
	Addr    netip.AddrPort
	Backlog int // 0: rdmacm.DefaultBacklog
	// Open opens the CM's channel; nil: locator.OpenRDMACM on the
	// Options' Sysfs, without netlink.
	Open func() (*rdmacm.Channel, error)
}

// The hello of a client in its REQ's private data, big-endian:
//
//	0  "gRcm"    magic
//	4  version   cmHelloVersion
//	5  kind      0 connect, 1 traffic, 2 bw, 3 lat
//	6  op        0 none, 1 write, 2 send, 3 read
//	7  reserved  0
//	8  size      u32
//	12 iters     u32
//	16 duration  u64 nanoseconds
//	24 seed      u64 (the payload pattern's)
//	32 end
const (
	cmMagic        = "gRcm"
	cmHelloVersion = 1
	cmHelloLen     = 32
)

var (
	cmKinds = []TestKind{TestConnect, TestTraffic, TestBandwidth, TestLatency}
	cmOps   = []Operation{"", OpWrite, OpSend, OpRead}
)

// cmHello is what a client asks for over the CM.
type cmHello struct {
	Test Test
	Seed uint64
}

func indexOf[T comparable](list []T, v T) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

// MarshalBinary writes the hello; only the kinds cmKinds names travel.
func (h cmHello) MarshalBinary() ([]byte, error) {
	k, o := indexOf(cmKinds, h.Test.Kind), indexOf(cmOps, h.Test.Op)
	if k < 0 || o < 0 {
		return nil, fmt.Errorf("over RDMA CM a probe runs connect, traffic, bw or lat, not %s", h.Test)
	}
	if h.Test.Size < 0 || uint64(h.Test.Size) > 0xffffffff || h.Test.Iters < 0 || uint64(h.Test.Iters) > 0xffffffff || h.Test.Duration < 0 {
		return nil, fmt.Errorf("test %s: size or iters out of range", h.Test)
	}
	b := make([]byte, cmHelloLen)
	copy(b, cmMagic)
	b[4], b[5], b[6] = cmHelloVersion, byte(k), byte(o)
	binary.BigEndian.PutUint32(b[8:], uint32(h.Test.Size))
	binary.BigEndian.PutUint32(b[12:], uint32(h.Test.Iters))
	binary.BigEndian.PutUint64(b[16:], uint64(h.Test.Duration))
	binary.BigEndian.PutUint64(b[24:], h.Seed)
	return b, nil
}

// errNotGrdma means a CM request's private data is not a grdma hello:
// another application (rping, perftest) connected.
var errNotGrdma = errors.New("not a grdma probe over RDMA CM (no grdma hello in the request's private data)")

// UnmarshalBinary reads a hello from a REQ's private data (56 bytes,
// zero padded); a peer's bytes are checked, never trusted.
func (h *cmHello) UnmarshalBinary(b []byte) error {
	if len(b) < cmHelloLen || string(b[:4]) != cmMagic {
		return errNotGrdma
	}
	if b[4] != cmHelloVersion {
		return fmt.Errorf("the peer speaks grdma's CM hello version %d, this side %d: use the same grdma on both", b[4], cmHelloVersion)
	}
	if int(b[5]) >= len(cmKinds) || int(b[6]) >= len(cmOps) {
		return fmt.Errorf("a CM hello with test %d, operation %d: unknown", b[5], b[6])
	}
	d := binary.BigEndian.Uint64(b[16:])
	if d > uint64(MaxTestDuration) {
		return fmt.Errorf("duration %v: at most %v", time.Duration(min(d, 1<<62)), MaxTestDuration)
	}
	h.Test = Test{Kind: cmKinds[b[5]], Op: cmOps[b[6]], Size: int(binary.BigEndian.Uint32(b[8:])),
		Iters: int(binary.BigEndian.Uint32(b[12:])), Duration: time.Duration(d)}
	h.Seed = binary.BigEndian.Uint64(b[24:])
	return nil
}

// The server's answer in its REP's private data:
//
//	0  "gRcm", 4 version, 5 0 (admitted), 6 control port u16,
//	8  token [16]byte (zero without a control channel)
//
// and in a REJ's: "gRcm", version, 1 busy or 2 refused, then the reason
// (UTF-8, at most cmReasonMax bytes).
const (
	cmAdmitted   = 0
	cmBusy       = 1
	cmRefused    = 2
	cmWelcomeLen = 24
	cmReasonMax  = rdmacm.MaxRejectPrivateData - 6
)

type cmWelcome struct {
	Port  uint16
	Token [16]byte
}

func (w cmWelcome) MarshalBinary() ([]byte, error) {
	b := make([]byte, cmWelcomeLen)
	copy(b, cmMagic)
	b[4], b[5] = cmHelloVersion, cmAdmitted
	binary.BigEndian.PutUint16(b[6:], w.Port)
	copy(b[8:], w.Token[:])
	return b, nil
}

func (w *cmWelcome) UnmarshalBinary(b []byte) error {
	if len(b) < cmWelcomeLen || string(b[:4]) != cmMagic || b[5] != cmAdmitted {
		return errors.New("the peer accepted without a grdma welcome: not a grdma probe listener (rping, perftest?)")
	}
	w.Port = binary.BigEndian.Uint16(b[6:])
	copy(w.Token[:], b[8:24])
	return nil
}

// refusalData is a REJ's private data saying why.
func refusalData(busy bool, reason string) []byte {
	code := byte(cmRefused)
	if busy {
		code = cmBusy
	}
	if len(reason) > cmReasonMax {
		reason = reason[:cmReasonMax]
	}
	return append([]byte{'g', 'R', 'c', 'm', cmHelloVersion, code}, reason...)
}

// parseRefusal reads a REJ's private data: whether it is grdma's, busy,
// and its reason (a peer's text: checked for what it may print).
func parseRefusal(b []byte) (ok, busy bool, reason string) {
	if len(b) < 6 || string(b[:4]) != cmMagic || (b[5] != cmBusy && b[5] != cmRefused) {
		return false, false, ""
	}
	r := strings.TrimRight(string(b[6:]), "\x00")
	var clean strings.Builder
	for _, c := range r {
		if c < 0x20 || c == 0x7f || c == 0xfffd {
			c = '?'
		}
		clean.WriteRune(c)
	}
	return true, b[5] == cmBusy, clean.String()
}

// cmChannel is an open CM (the kernel's, or in tests rdmacmtest's) and
// the names of the devices it binds IDs to.
type cmChannel struct {
	rdmacm.CM
	// deviceName names the device port the CM bound an ID to.
	deviceName func(p rdmacm.DevicePort) (string, error)
}

func (c *cmChannel) newConn() (rdmacm.Conn, error) { return c.CreateConn(rdmacm.PortSpaceTCP) }

// openCM opens the channel open gives, or the kernel's below fsys; sysfs
// names its devices.
func openCM(open func() (*rdmacm.Channel, error), fsys sysfs.FS) (*cmChannel, error) {
	if open == nil {
		open = func() (*rdmacm.Channel, error) { return locator.OpenRDMACM(fsys, nil) }
	}
	ch, err := open()
	if err != nil {
		return nil, err
	}
	return &cmChannel{CM: ch, deviceName: func(p rdmacm.DevicePort) (string, error) { return locator.CMDevice(fsys, p) }}, nil
}

// cmGIDIndex is the index of the CM's source GID in the port's table: the
// entry of that GID whose type the port's default RoCE mode says where
// both RoCE versions have it; -1 when not found.
func cmGIDIndex(fsys sysfs.FS, dev string, port uint32, sgid gid.GID) (int, gid.Type) {
	entries, err := gid.ReadTable(fsys, dev, port)
	if err != nil {
		return -1, 0
	}
	var found []gid.Entry
	for _, e := range entries {
		if e.GID == sgid {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return -1, 0
	}
	if len(found) > 1 {
		if def, err := cmconfig.Shown(fsys, dev, port); err == nil {
			for _, e := range found {
				if e.Type == def.RoCEMode {
					return e.Index, e.Type
				}
			}
		}
		for _, e := range found {
			if e.Type == gid.TypeRoCEv2 {
				return e.Index, e.Type
			}
		}
	}
	return found[0].Index, found[0].Type
}

// cmSide is what both of the CM's exchanges keep.
type cmSide struct {
	peerSide
	ch   *cmChannel
	id   rdmacm.Conn
	info *CMInfo
	// control: the test moves data and talks over a control channel.
	control bool
	ownsCh  bool
}

func (x *cmSide) link() *session {
	if x.control {
		return x.s
	}
	return nil
}

// QPAttr gives each transition the kernel's INIT_QP_ATTR answer; the
// RDMA READs outstanding are this side's choice (as librdmacm's).
func (x *cmSide) QPAttr(_ context.Context, c *Conn, attr uverbs.QPAttr, _ uverbs.QPAttrMask) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	k, mask, err := x.id.InitQPAttr(attr.State)
	if err != nil {
		return attr, 0, fmt.Errorf("INIT_QP_ATTR %s: %w", attr.State, err)
	}
	switch attr.State {
	case ib.QPStateRTR:
		if mask&uverbs.QPAttrMaxDestRdAtomic != 0 {
			k.MaxDestRdAtomic = max(min(k.MaxDestRdAtomic, c.shape.RdAtomic), 1)
		}
		if mask&uverbs.QPAttrMinRNRTimer != 0 && k.MinRNRTimer == 0 {
			// The CM's 0 is 655 ms: a SEND that finds no receive would
			// stall a test that long. 0.64 ms, as perftest sets it.
			k.MinRNRTimer = minRNRTimer
		}
		if x.info != nil {
			x.info.PathMTU = k.PathMTU
			x.info.HopLimit = k.AV.HopLimit
			x.info.TrafficClass = k.AV.TrafficClass
			if k.AV.IsGlobal != 0 {
				// The GID the kernel put in the address vector: its type
				// is the RoCE version the connection uses.
				x.info.GIDIndex = int(k.AV.SGIDIndex)
				if o := c.dev.opts; o.Open == nil {
					if entries, err := gid.ReadTable(o.Sysfs, o.Device, o.Port); err == nil {
						for _, e := range entries {
							if e.Index == x.info.GIDIndex {
								x.info.RoCE = e.Type.String()
							}
						}
					}
				}
			}
		}
		if x.peer != nil {
			x.peer.PathMTU = k.PathMTU
		}
	case ib.QPStateRTS:
		if mask&uverbs.QPAttrMaxQPRdAtomic != 0 {
			k.MaxRdAtomic = max(min(k.MaxRdAtomic, c.shape.RdAtomic), 1)
		}
		c.psn = k.SQPSN
	}
	return k, mask, nil
}

// reinit moves the queue pair INIT→INIT with the CM's answer now that
// the connection's access rights are known (librdmacm's
// ucma_modify_qp_rtr does the same).
func (x *cmSide) reinit(c *Conn) error {
	k, mask, err := x.id.InitQPAttr(ib.QPStateInit)
	if err != nil {
		return fmt.Errorf("INIT_QP_ATTR INIT: %w", err)
	}
	return c.dev.c.ModifyQP(c.qp.QP(), &k, mask)
}

// disconnect ends the connection: DISCONNECT, then DISCONNECTED within
// the timeout.
func (x *cmSide) disconnect(ctx context.Context, first bool) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, x.s.timeout)
	defer cancel()
	if first {
		if err := x.id.Disconnect(); err != nil {
			return err
		}
	}
	err := x.id.WaitDisconnected(ctx)
	if !first && err == nil {
		x.id.Disconnect() // the DREP
	}
	x.info.took(CMStepDisconnect, time.Since(start))
	return err
}

func (x *cmSide) Close() error {
	x.peerSide.Close()
	if x.id != nil {
		x.id.Destroy()
	}
	if x.ownsCh && x.ch != nil {
		x.ch.Close()
	}
	return nil
}

// cmClient is the active side of a probe over the CM.
type cmClient struct {
	cmSide
	dst     netip.AddrPort
	open    func() (*cmChannel, error)
	tos     *uint8 // nil: the port's default
	welcome cmWelcome
}

func (x *cmClient) Steps() ExchangeSteps {
	fin := StepDisconnect
	if x.control {
		fin = StepFinish
	}
	return ExchangeSteps{Trade: StepConnect, Ready: StepEstablish, Finish: fin}
}

// ChooseDevice resolves the peer's address and the route to it: the
// device port and source GID the CM chose.
func (x *cmClient) ChooseDevice(ctx context.Context, opts Options) (Options, string, error) {
	ch, err := x.open()
	if err != nil {
		return opts, "", err
	}
	x.ch, x.ownsCh = ch, true
	if x.id, err = ch.newConn(); err != nil {
		return opts, "", err
	}
	timeout := min(x.s.timeout, DefaultCMResolveTimeout)
	start := time.Now()
	if err := x.id.ResolveAddr(ctx, netip.AddrPort{}, x.dst, timeout); err != nil {
		return opts, "", err
	}
	x.info.took(CMStepResolveAddr, time.Since(start))
	if x.tos != nil {
		if err := x.id.SetTOS(*x.tos); err != nil {
			return opts, "", err
		}
	}
	start = time.Now()
	if err := x.id.ResolveRoute(ctx, timeout); err != nil {
		return opts, "", err
	}
	x.info.took(CMStepResolveRoute, time.Since(start))
	addr, err := x.id.QueryAddr()
	if err != nil {
		return opts, "", err
	}
	route, err := x.id.QueryRoute()
	if err != nil {
		return opts, "", err
	}
	name, err := x.ch.deviceName(addr.Device)
	if err != nil {
		return opts, "", err
	}
	port := uint32(addr.Device.Port)
	if opts.Device != "" && (opts.Device != name || (opts.Port != 0 && opts.Port != port)) {
		return opts, "", fmt.Errorf("the CM reaches %s from %s/%d, not %s: leave DEV out, or give an address %s reaches",
			x.dst.Addr(), name, port, (&Options{Device: opts.Device, Port: max(opts.Port, 1)}).name(), opts.Device)
	}
	x.fillInfo(addr, route, name, port, opts)
	opts.Device, opts.Port = name, port
	if x.info.GIDIndex >= 0 {
		opts.GIDIndex = x.info.GIDIndex
	}
	return opts, x.info.describe(), nil
}

func (o *Options) name() string { return fmt.Sprintf("%s/%d", o.Device, o.Port) }

func (x *cmClient) fillInfo(addr rdmacm.Addr, route rdmacm.Route, name string, port uint32, opts Options) {
	x.info.fill(addr, route, name, port, opts)
}

// Fill records what the CM chose for a connection: the addresses (QUERY
// ADDR), the device port (its name, as the caller found it), the path
// (QUERY ROUTE: source and destination GID, ToS, hop limit, MTU) and the
// source GID's index and RoCE version in the port's table under fsys.
func (ci *CMInfo) Fill(addr rdmacm.Addr, route rdmacm.Route, device string, port uint32, fsys sysfs.FS) {
	ci.fill(addr, route, device, port, Options{Sysfs: fsys})
}

// fill is Fill with the probe's options: a fake device (Options.Open) has
// no table in sysfs.
func (ci *CMInfo) fill(addr rdmacm.Addr, route rdmacm.Route, name string, port uint32, opts Options) {
	ci.Src, ci.Dst, ci.Device, ci.Port, ci.GIDIndex = addr.Src, addr.Dst, name, port, -1
	if len(route.Paths) > 0 {
		p := route.Paths[0]
		ci.GID, ci.DGID = gid.GID(p.SGID), gid.GID(p.DGID)
		ci.TrafficClass, ci.HopLimit, ci.PathMTU = p.TrafficClass, p.HopLimit, p.MTU
	}
	if opts.Open == nil && !ci.GID.IsZero() {
		idx, typ := cmGIDIndex(opts.Sysfs, name, port, ci.GID)
		ci.GIDIndex = idx
		if idx >= 0 {
			ci.RoCE = typ.String()
		}
	}
}

// describe is the CM's choice in one line.
func (ci *CMInfo) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s via %s/%d", ci.Dst, ci.Device, ci.Port)
	if ci.GIDIndex >= 0 {
		fmt.Fprintf(&b, " GID %d", ci.GIDIndex)
	}
	if !ci.GID.IsZero() {
		fmt.Fprintf(&b, " %s", ci.GID)
	}
	if ci.RoCE != "" {
		fmt.Fprintf(&b, " (%s)", ci.RoCE)
	}
	fmt.Fprintf(&b, ", ToS %d, hop limit %d, path MTU %s", ci.TrafficClass, ci.HopLimit, ci.PathMTU)
	for _, s := range ci.Steps {
		fmt.Fprintf(&b, "; %s %v", s.Name, s.Duration.Round(time.Microsecond))
	}
	return b.String()
}

func (x *cmClient) Begin(ctx context.Context, _ *Device) (context.Context, string, error) {
	return ctx, "", nil
}

// Trade sends the REQ (the queue pair number, the hello) and takes the
// REP: the peer's queue pair; the queue pair then takes the connection's
// access rights (INIT→INIT).
func (x *cmClient) Trade(ctx context.Context, c *Conn) (Path, string, error) {
	hello, err := cmHello{Test: x.s.test, Seed: x.s.seed}.MarshalBinary()
	if err != nil {
		return Path{}, "", err
	}
	rd := c.shape.RdAtomic
	start := time.Now()
	deadline := start.Add(x.s.timeout)
	var peer rdmacm.ConnParam
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		peer, err = x.id.Connect(cctx, rdmacm.ConnParam{QPNum: c.QPN(), ResponderResources: rd, InitiatorDepth: rd,
			RetryCount: retryCount, RNRRetryCount: 7, PrivateData: hello})
		cancel()
		if err == nil {
			break
		}
		err = x.connectError(err)
		if !IsBusy(err) || time.Now().Add(wait).After(deadline) {
			return Path{}, "", err
		}
		// A busy responder: ask again, on a new ID (one ID, one request).
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return Path{}, "", fmt.Errorf("interrupted waiting for %s: %w", x.s.host, ctx.Err())
		}
		if err := x.renew(ctx); err != nil {
			return Path{}, "", err
		}
	}
	x.info.took(CMStepConnect, time.Since(start))
	var w cmWelcome
	if err := w.UnmarshalBinary(peer.PrivateData); err != nil {
		return Path{}, "", &PeerError{Host: x.s.host, Doing: "connecting over RDMA CM to", Err: err}
	}
	if x.control && w.Port == 0 {
		return Path{}, "", &PeerError{Host: x.s.host, Doing: "connecting over RDMA CM to", Err: errors.New("the peer offered no control channel for the test")}
	}
	x.welcome = w
	if err := x.reinit(c); err != nil {
		return Path{}, "", err
	}
	x.info.ControlPort = w.Port
	remote := Endpoint{QPN: peer.QPNum, GID: x.info.DGID, GIDIndex: -1}
	x.peer.Remote = &remote
	return Path{DestQPN: peer.QPNum, DGID: x.info.DGID, MTU: x.info.PathMTU, RdAtomic: rd, RNRRetry: 7},
		fmt.Sprintf("peer %s: qpn %d, %v", x.s.host, peer.QPNum, time.Since(start).Round(time.Microsecond)), nil
}

// renew replaces the ID of a refused request with a new one, resolved
// again.
func (x *cmClient) renew(ctx context.Context) error {
	x.id.Destroy()
	id, err := x.ch.newConn()
	if err != nil {
		return err
	}
	x.id = id
	timeout := min(x.s.timeout, DefaultCMResolveTimeout)
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, x.dst, timeout); err != nil {
		return err
	}
	if x.tos != nil {
		if err := id.SetTOS(*x.tos); err != nil {
			return err
		}
	}
	return id.ResolveRoute(ctx, timeout)
}

// connectError makes a refusal in grdma's private data a busy or refused
// error; other CM errors stay as they are (*rdmacm.Error).
func (x *cmClient) connectError(err error) error {
	var ce *rdmacm.Error
	if !errors.As(err, &ce) || ce.Event != rdmacm.EventRejected {
		return err
	}
	ok, busy, reason := parseRefusal(ce.Private)
	switch {
	case !ok:
		return err
	case busy:
		return &PeerError{Host: x.s.host, Doing: "connecting over RDMA CM to", Err: &busyError{fmt.Errorf("%s (%w)", reason, err)}}
	}
	return &PeerError{Host: x.s.host, Doing: "connecting over RDMA CM to", Err: fmt.Errorf("refused: %s (%w)", reason, err)}
}

// Ready sends the RTU; a test that moves data then opens its control
// channel and learns the peer's memory.
func (x *cmClient) Ready(ctx context.Context, c *Conn) (string, error) {
	start := time.Now()
	if err := x.id.Establish(); err != nil {
		return "", err
	}
	x.info.took(CMStepEstablish, time.Since(start))
	if !x.control {
		return "established", nil
	}
	ctl := netip.AddrPortFrom(x.dst.Addr(), x.welcome.Port).String()
	s := x.s
	host := s.host
	s.host = ctl
	err := s.dial(ctx)
	s.host = host
	if err != nil {
		return "", fmt.Errorf("the test's control channel (TCP %s, offered in the CM reply): %w", ctl, err)
	}
	local := c.Endpoint()
	if err := s.send(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &s.test, Seed: s.seed, Endpoint: &local, Token: x.welcome.Token[:]}); err != nil {
		return "", err
	}
	m, err := s.expect(msgWelcome, "waiting for the memory of")
	if err != nil {
		return "", err
	}
	if m.Endpoint == nil {
		return "", s.peerError("waiting for the memory of", errors.New("a welcome without an endpoint"))
	}
	s.remote = *m.Endpoint
	x.peer.Remote = m.Endpoint
	return fmt.Sprintf("established; control channel TCP %s", ctl), nil
}

// Finish takes the server's verdict over the control channel, then
// disconnects.
func (x *cmClient) Finish(ctx context.Context, res *Result) (string, error) {
	detail := ""
	if x.control {
		d, err := (&grdmaClient{peerSide: x.peerSide}).Finish(ctx, res)
		if err != nil {
			return "", err
		}
		detail = d
	}
	if err := x.disconnect(ctx, true); err != nil {
		return detail, err
	}
	return joinLines(detail, "disconnected"), nil
}

// ConnectCM is ConnectWith over the RDMA CM (cfg.Via = TransportCM): the
// client of a probe over the CM to addr ("IP:PORT", an IP address: the
// CM resolves no names), from the device the route resolves to when
// opts.Device is empty.
func connectCM(ctx context.Context, opts Options, addr string, cfg ConnectConfig, test Test, res *Result) *Result {
	side := peerSide{s: newSession(RoleClient, addr, test, cfg.Timeout), peer: res.Peer}
	side.s.dialer = cfg.Dial
	ap, err := netip.ParseAddrPort(addr)
	if err == nil && !ap.Addr().IsValid() {
		err = errors.New("no address")
	}
	if err != nil {
		newRecorder(ctx, res, nil).record(StepResolve, 0, "", fmt.Errorf("peer %q: the RDMA CM connects to an IP address and port: %w", addr, err))
		return res
	}
	info := &CMInfo{GIDIndex: -1}
	res.Peer.CM = info
	x := &cmClient{cmSide: cmSide{peerSide: side, info: info, control: test.Kind != TestConnect}, dst: ap, tos: cfg.CMToS}
	x.open = cfg.cmOpen
	if x.open == nil {
		x.open = func() (*cmChannel, error) { return openCM(cfg.CMOpen, opts.Sysfs) }
	}
	return probe(ctx, opts, x, res)
}
