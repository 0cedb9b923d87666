package verbsprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/uverbs"
)

// Unreliable datagrams between hosts: ibv_ud_pingpong's exchange and loop
// on a UD Conn (TestUDPingpong), and the lookup of a responder's UD ping
// queue pair (TestUDPing, package udping) over grdma's exchange.

// udPingpongQKey is ibv_ud_pingpong's Q_Key, its own and its peer's.
const udPingpongQKey = 0x11111111

// pingpongTool names the peer tool of a pingpong test.
func pingpongTool(k TestKind) string {
	if k == TestUDPingpong {
		return "ibv_ud_pingpong"
	}
	return "ibv_rc_pingpong"
}

// isPingpong reports whether a test is one of the ibv_*_pingpong
// exchanges.
func isPingpong(k TestKind) bool { return k == TestPingpong || k == TestUDPingpong }

// udPingpongShape is ibv_ud_pingpong's: one send, 500 receives of the
// message and its GRH.
func udPingpongShape(_ *Device, t Test) Shape {
	return Shape{Type: ib.QPTypeUD, CQE: pingpongRX + 1,
		Cap:  uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: pingpongRX, MaxSendSGE: 1, MaxRecvSGE: 1},
		Part: t.Size + uverbs.GRHSize, Parts: 2, Access: uverbs.AccessLocalWrite}
}

// udSizeFits refuses a ud-pingpong size over the port's active MTU, as
// ibv_ud_pingpong does: a datagram is one packet.
func udSizeFits(d *Device, t Test) error {
	if t.Kind == TestUDPingpong && t.Size > d.port.ActiveMTU.Bytes() {
		return fmt.Errorf("size %d is larger than the port's active MTU (%d): a datagram is one packet", t.Size, d.port.ActiveMTU.Bytes())
	}
	return nil
}

// checkUD confirms with QUERY_QP what a UD queue pair's transitions set.
func (c *Conn) checkUD(attr uverbs.QPAttr) (string, error) {
	for _, x := range []struct {
		name      string
		got, want any
	}{
		{"state", attr.State, ib.QPStateRTS},
		{"qkey", attr.QKey, uint32(udPingpongQKey)},
		{"port_num", attr.PortNum, uint8(c.dev.opts.Port)},
		{"sq_psn", attr.SQPSN, c.psn},
	} {
		if x.got != x.want {
			return "", &QPMismatchError{Attribute: x.name, Got: fmt.Sprint(x.got), Want: fmt.Sprint(x.want)}
		}
	}
	return fmt.Sprintf("%s, Q_Key %#x", attr.State, attr.QKey), nil
}

// createAH makes a UD queue pair's address handle to its peer: the GRH
// from the device's GID to the peer's, or the peer's LID.
func (c *Conn) createAH() (string, error) {
	av := c.addressVector(c.path)
	attr := uverbs.AHAttr{DLID: av.DLID, IsGlobal: av.IsGlobal, PortNum: av.PortNum,
		GRH: uverbs.GlobalRoute{DGID: av.DGID, SGIDIndex: av.SGIDIndex, HopLimit: av.HopLimit}}
	var ah uverbs.AH
	var err error
	if c.dev.driverName == "rxe" {
		ah, err = c.dev.c.CreateRxeAH(*c.dev.pd, attr)
	} else {
		var out [16]byte
		ah, err = c.dev.c.CreateAH(*c.dev.pd, attr, out[:])
	}
	if err != nil {
		return "", err
	}
	c.ah = &ah
	if av.IsGlobal != 0 {
		return fmt.Sprintf("to GID %s, qpn %d", gid.GID(av.DGID), c.path.DestQPN), nil
	}
	return fmt.Sprintf("to LID %#x, qpn %d", av.DLID, c.path.DestQPN), nil
}

// udSend makes a pingpong SEND a datagram: the message after the GRH's
// room, to the peer's queue pair and Q_Key.
func (c *Conn) udSend(wr *uverbs.SendWR) {
	sge := c.mr.sge(partSource)
	sge.Addr += uverbs.GRHSize
	sge.Length -= uverbs.GRHSize
	wr.SGL = []uverbs.SGE{sge}
	wr.AH, wr.RemoteQPN, wr.RemoteQKey = c.ah, c.path.DestQPN, c.path.QKey
}

// UDLocal is the device port as package udping runs a UD ping on it: the
// context, protection domain, port, GID and active MTU. It needs rxe (the
// only data path grdma has) and a GID.
func (d *Device) UDLocal() (udping.Local, error) {
	switch {
	case d.driverName != "rxe":
		return udping.Local{}, fmt.Errorf("a UD ping needs rxe's data path; %s is driver %s", d.Name(), d.driverName)
	case d.addr.GIDIndex < 0:
		return udping.Local{}, fmt.Errorf("a UD ping needs a GID (a GRH); %s is addressed by its LID", d.Name())
	case d.pd == nil:
		return udping.Local{}, errors.New("the device is closed")
	}
	l := udping.Local{Context: d.c, PD: *d.pd, Port: uint8(d.opts.Port), GIDIndex: uint8(d.addr.GIDIndex), GID: d.addr.GID,
		MTU: d.port.ActiveMTU}
	if ex, _, err := d.c.QueryDeviceEx(); err == nil && ex.TimestampMask != 0 {
		l.Timestamps = ex.HCACoreClock
	}
	return l, nil
}

// UDResponder is a responder's UD ping queue pair (udping.Responder): a
// TestUDPing hello registers its sender with it and is answered with its
// address.
type UDResponder interface {
	Address() udping.Address
	Register(udping.Address) error
}

// StepRegister is a responder's step of a UD ping lookup: the prober's
// queue pair registered with the UD ping responder.
const StepRegister = "register"

// LookupUD asks the responder at addr (host:port, `grdma probe DEV serve`)
// for the address of its UD ping queue pair, and registers local, the
// prober's (udping.Prober.Address), with it: grdma's exchange with a
// TestUDPing hello, answered by a welcome with the queue pair's number and
// Q_Key. dev is the prober's device, whose port the responder checks
// against its own. A busy responder is asked again until the timeout; one
// that refuses says why (a *RemoteFailure).
func LookupUD(ctx context.Context, dev *Device, addr string, local udping.Address, cfg ConnectConfig) (udping.Address, error) {
	test := Test{Kind: TestUDPing}
	x := &grdmaClient{peerSide: peerSide{s: newSession(RoleClient, addr, test, cfg.Timeout), peer: &PeerResult{}}, key: cfg.Key}
	x.s.dialer = cfg.Dial
	defer x.Close()
	e := dev.endpoint()
	e.QPN, e.QKey, e.PSN = local.QPN, local.QKey, 0
	hello, err := json.Marshal(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &test, Endpoint: &e})
	if err != nil {
		return udping.Address{}, err
	}
	m, err := x.helloRetrying(ctx, hello)
	if err != nil {
		return udping.Address{}, err
	}
	remote := *m.Endpoint
	if err := compatible(e, remote); err != nil {
		return udping.Address{}, err
	}
	mtu, _ := ib.MTUFromBytes(remote.ActiveMTU)
	a := udping.Address{GID: remote.GID, QPN: remote.QPN, QKey: remote.QKey, MTU: mtu, EchoDelay: remote.UDEchoDelay}
	if err := a.Validate(); err != nil {
		return udping.Address{}, &PeerError{Host: addr, Doing: "reading the UD ping address of", Err: err}
	}
	return a, nil
}

// serveUDLookup answers a TestUDPing hello: the prober's queue pair is
// registered with the UD ping responder, and the welcome names the
// responder's. The result has the register and welcome steps.
func serveUDLookup(ctx context.Context, dev *Device, arr *arrival, cfg ServeConfig) *Result {
	res := &Result{}
	dev.describe(res)
	test := arr.test
	res.Peer = &PeerResult{Role: RoleServer, Host: arr.conn.RemoteAddr().String(), Test: &test}
	rec := newRecorder(ctx, res, &dev.target)
	s := newSession(RoleServer, res.Peer.Host, test, cfg.Timeout)
	s.attachReader(ctx, arr.conn, arr.rd)
	defer s.close()
	remote := *arr.hello.Endpoint
	res.Peer.Remote = &remote
	local := dev.endpoint()
	ok := rec.step(ctx, StepRegister, func() (string, error) {
		if err := compatible(local, remote); err != nil {
			return "", err
		}
		mtu, ok := ib.MTUFromBytes(remote.ActiveMTU)
		if !ok {
			return "", fmt.Errorf("the prober's active MTU %d is not an IB MTU", remote.ActiveMTU)
		}
		a := udping.Address{GID: remote.GID, QPN: remote.QPN, QKey: remote.QKey, MTU: mtu}
		if err := cfg.UD.Register(a); err != nil {
			return "", err
		}
		return fmt.Sprintf("prober %s", a), nil
	})
	if !ok {
		s.send(wireMessage{Type: msgFailed, Step: StepRegister, Error: res.Failed().Err.Error(), Endpoint: &local, Protocol: ProtocolVersion})
		return res
	}
	rec.step(ctx, StepWelcome, func() (string, error) {
		a := cfg.UD.Address()
		local.QPN, local.QKey, local.PSN, local.UDEchoDelay = a.QPN, a.QKey, 0, a.EchoDelay
		res.QPN = a.QPN
		return fmt.Sprintf("UD ping %s, Q_Key %#x", a, a.QKey), s.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &local})
	})
	return res
}

// NewUDProber makes a UD ping prober on dev whose targets are responders
// (`grdma probe DEV serve`) named "HOST[:PORT]", asked for their UD ping
// address with LookupUD under ccfg (its Timeout, Key and Dial; the Test is
// ignored). cfg's Local and Resolve are set here; with Options.Poll it
// polls while replies are awaited (Spin).
func NewUDProber(dev *Device, cfg udping.ProberConfig, ccfg ConnectConfig) (*udping.Prober, error) {
	local, err := dev.UDLocal()
	if err != nil {
		return nil, err
	}
	cfg.Local = local
	if dev.opts.Poll && cfg.Spin == 0 {
		cfg.Spin = max(cfg.Timeout, udping.DefaultTimeout) // the busy-polling baseline (GRDMA_PROBE_POLL=1)
	}
	cfg.Resolve = func(ctx context.Context, target string, me udping.Address) (udping.Address, error) {
		addr, err := PeerAddress(target)
		if err != nil {
			return udping.Address{}, err
		}
		return LookupUD(ctx, dev, addr, me, ccfg)
	}
	return udping.NewProber(cfg)
}
