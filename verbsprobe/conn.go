package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// Conn is one reliable connected queue pair on a Device, with its
// completion queue and memory region: one per peer. Its steps (create,
// INIT, RTR, RTS, QUERY_QP, teardown) run in one goroutine; other Conns
// of the Device run beside it.
type Conn struct {
	dev   *Device
	shape Shape
	cq    probeCQ
	// channel is where cq's completion events go; nil: polled.
	channel *uverbs.CompChannel
	qp      probeQP
	mr      *memoryRegion
	// ah is a UD queue pair's address handle to its peer.
	ah *uverbs.AH
	// psn is the first packet sequence number, random (24 bits).
	psn uint32
	// path is where the queue pair connects (RTR); rtr and rts what its
	// transitions set, which QUERY_QP must confirm.
	path     Path
	rtr, rts uverbs.QPAttr
}

// Shape sizes a Conn for its test: its queues, its memory region and
// what the peer may do with them.
type Shape struct {
	// Type is the queue pair's: RC unless set (UD for ud-pingpong).
	Type ib.QPType
	CQE  uint32
	Cap  uverbs.QPCap
	// The memory region: Parts parts of Part bytes; none when Parts is 0.
	Part, Parts int
	Access      uverbs.Access
	// RdAtomic is how many RDMA READs the queue pair keeps outstanding,
	// and takes from its peer.
	RdAtomic uint8
}

// Path is where a queue pair connects and how: what its RTR and RTS
// transitions take.
type Path struct {
	DestQPN uint32
	DestPSN uint32 // the peer's first send PSN: this side's receive PSN
	DGID    gid.GID
	DLID    uint16
	MTU     ib.MTU
	// RdAtomic is the RDMA READs outstanding each way.
	RdAtomic uint8
	RNRRetry uint8
	// QKey is a UD queue pair's Q_Key, its own and the peer's.
	QKey uint32
}

// ud reports whether the Conn's queue pair is a UD one.
func (c *Conn) ud() bool { return c.shape.Type == ib.QPTypeUD }

// QPAttrSource is an Exchange that gives a queue pair's transitions their
// attributes itself: RDMA CM's are the kernel's INIT_QP_ATTR answers.
// QPAttr gets what grdma would set and returns what to set.
type QPAttrSource interface {
	QPAttr(ctx context.Context, c *Conn, attr uverbs.QPAttr, mask uverbs.QPAttrMask) (uverbs.QPAttr, uverbs.QPAttrMask, error)
}

// The queue pair's shape: small, one SGE, every send signalled.
const (
	queueDepth   = 16
	cqEntries    = 2 * queueDepth
	hopLimit     = 64
	minRNRTimer  = 12 // 0.64 ms
	ackTimeout   = 14 // 4.096 µs × 2^14 = 67 ms
	retryCount   = 7
	rnrRetry     = 3 // not 7 (infinite): a missing receive surfaces as an error
	rdAtomicSize = 1 // one outstanding RDMA READ each way
)

// newConn returns a Conn of shape on d; nothing is made yet.
func (d *Device) newConn(shape Shape) *Conn {
	return &Conn{dev: d, shape: shape, psn: rand.Uint32() & 0xffffff}
}

// Device is the device the Conn is on.
func (c *Conn) Device() *Device { return c.dev }

// QPN is the queue pair's number, 0 before it exists.
func (c *Conn) QPN() uint32 {
	if c.qp == nil {
		return 0
	}
	return c.qp.QP().QPN
}

// PSN is the queue pair's first send packet sequence number.
func (c *Conn) PSN() uint32 { return c.psn }

// Endpoint is what the peer needs to connect to this Conn and what an
// operator needs to see: the device port, its address, the queue pair
// and the memory region.
func (c *Conn) Endpoint() Endpoint {
	d := c.dev
	e := Endpoint{Ifname: d.opts.Device, Port: d.opts.Port, Driver: d.driverName, LinkLayer: d.port.LinkLayer,
		GIDIndex: d.addr.GIDIndex, GID: d.addr.GID, LID: d.port.LID, PSN: c.psn, ActiveMTU: d.port.ActiveMTU.Bytes(),
		RdAtomic: c.shape.RdAtomic, QPN: c.QPN()}
	if d.addr.GIDIndex >= 0 {
		e.GIDType = d.addr.GIDType.String()
	}
	if c.mr != nil {
		e.Addr, e.RKey, e.Part = c.mr.mr.Addr, c.mr.mr.RKey, c.mr.part
	}
	return e
}

// selfPath connects the queue pair to itself: its send and receive PSNs
// are equal.
func (c *Conn) selfPath() Path {
	return Path{DestQPN: c.QPN(), DestPSN: c.psn, DGID: c.dev.addr.GID, DLID: c.dev.addr.LID,
		MTU: c.dev.port.ActiveMTU, RdAtomic: rdAtomicSize, RNRRetry: rnrRetry}
}

// createCQ makes the completion queue with a completion channel, which
// waits for completions without polling (Options.Poll: none).
func (c *Conn) createCQ() (string, error) {
	init := uverbs.CQInit{CQE: c.shape.CQE}
	if !c.dev.opts.Poll && c.dev.driver.events {
		ch, err := c.dev.c.CreateCompChannel()
		if err != nil {
			return "", err
		}
		c.channel, init.Channel = ch, ch
	}
	var err error
	if c.cq, err = c.dev.driver.createCQ(c.dev.c, init); err != nil {
		return "", err
	}
	return fmt.Sprintf("cq %d, %d entries", c.cq.CQ().Handle, c.cq.CQ().CQE), nil
}

func (c *Conn) createQP() (string, error) {
	cq := c.cq.CQ()
	typ := ib.QPTypeRC
	if c.ud() {
		typ = ib.QPTypeUD
	}
	init := uverbs.QPInit{PD: *c.dev.pd, SendCQ: cq, RecvCQ: cq, Type: typ, SignalAll: true, Cap: c.shape.Cap}
	var err error
	if c.qp, err = c.dev.driver.createQP(c.dev.c, init); err != nil {
		return "", err
	}
	qp := c.qp.QP()
	return fmt.Sprintf("%s qpn %d, %d send and %d receive requests", typ, qp.QPN, qp.Cap.MaxSendWR, qp.Cap.MaxRecvWR), nil
}

// regMR registers the memory region of the shape: anonymous memory
// outside the Go heap.
func (c *Conn) regMR() (string, error) {
	buf, err := uverbs.AllocBuffer(c.shape.Part * c.shape.Parts)
	if err != nil {
		return "", err
	}
	mr, err := c.dev.c.RegMR(*c.dev.pd, buf, c.shape.Access)
	if err != nil {
		return "", errors.Join(err, uverbs.FreeBuffer(buf))
	}
	c.mr = &memoryRegion{buf: buf, mr: mr, part: c.shape.Part}
	return fmt.Sprintf("%d bytes, lkey %#x, rkey %#x", len(buf), mr.LKey, mr.RKey), nil
}

// pinned is the memory the Conn registered.
func (c *Conn) pinned() int {
	if c.mr == nil {
		return 0
	}
	return len(c.mr.buf)
}

// modify runs a transition with the attributes src gives, if any.
func (c *Conn) modify(ctx context.Context, src QPAttrSource, attr uverbs.QPAttr, mask uverbs.QPAttrMask) (uverbs.QPAttr, error) {
	if src != nil {
		var err error
		if attr, mask, err = src.QPAttr(ctx, c, attr, mask); err != nil {
			return attr, err
		}
	}
	return attr, c.dev.c.ModifyQP(c.qp.QP(), &attr, mask)
}

func (c *Conn) toInit(ctx context.Context, src QPAttrSource) (string, error) {
	if c.ud() {
		attr := uverbs.QPAttr{State: ib.QPStateInit, PKeyIndex: 0, PortNum: uint8(c.dev.opts.Port), QKey: udPingpongQKey}
		_, err := c.modify(ctx, src, attr, uverbs.QPAttrsResetToInitUD)
		return fmt.Sprintf("Q_Key %#x", udPingpongQKey), err
	}
	attr := uverbs.QPAttr{State: ib.QPStateInit, PKeyIndex: 0, PortNum: uint8(c.dev.opts.Port), AccessFlags: c.shape.Access}
	_, err := c.modify(ctx, src, attr, uverbs.QPAttrsResetToInit)
	return "", err
}

// addressVector addresses the queue pair's destination: a GID (with a
// GRH) and LID. Its source GID is the device's chosen GID.
func (c *Conn) addressVector(to Path) uverbs.AddressVector {
	av := uverbs.AddressVector{PortNum: uint8(c.dev.opts.Port), DLID: to.DLID}
	if i := c.dev.addr.GIDIndex; i >= 0 {
		av.IsGlobal, av.DGID, av.SGIDIndex, av.HopLimit = 1, to.DGID, uint8(i), hopLimit
	}
	return av
}

// toRTR connects the queue pair to path.
func (c *Conn) toRTR(ctx context.Context, to Path, src QPAttrSource) (string, error) {
	c.path = to
	if c.ud() {
		attr, err := c.modify(ctx, src, uverbs.QPAttr{State: ib.QPStateRTR}, uverbs.QPAttrsInitToRTRUD)
		c.rtr = attr
		return "", err
	}
	attr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: to.MTU, DestQPN: to.DestQPN, RQPSN: to.DestPSN,
		MaxDestRdAtomic: to.RdAtomic, MinRNRTimer: minRNRTimer, AV: c.addressVector(to)}
	attr, err := c.modify(ctx, src, attr, uverbs.QPAttrsInitToRTR)
	if err != nil {
		return "", err
	}
	c.rtr = attr
	return fmt.Sprintf("to qpn %d, path MTU %s", attr.DestQPN, attr.PathMTU), nil
}

func (c *Conn) toRTS(ctx context.Context, src QPAttrSource) (string, error) {
	if c.ud() {
		attr, err := c.modify(ctx, src, uverbs.QPAttr{State: ib.QPStateRTS, SQPSN: c.psn}, uverbs.QPAttrsRTRToRTSUD)
		c.rts = attr
		return "", err
	}
	attr := uverbs.QPAttr{State: ib.QPStateRTS, Timeout: ackTimeout, RetryCnt: retryCount, RNRRetry: c.path.RNRRetry,
		SQPSN: c.psn, MaxRdAtomic: c.path.RdAtomic}
	attr, err := c.modify(ctx, src, attr, uverbs.QPAttrsRTRToRTS)
	c.rts = attr
	return "", err
}

// QPMismatchError means QUERY_QP disagrees with what the probe set.
type QPMismatchError struct {
	Attribute string
	Got, Want string
}

func (e *QPMismatchError) Error() string {
	return fmt.Sprintf("QUERY_QP: %s is %s, want %s", e.Attribute, e.Got, e.Want)
}

// queryQP confirms with QUERY_QP that the queue pair is in RTS, connected
// as RTR and RTS set it.
func (c *Conn) queryQP() (string, error) {
	attr, err := c.dev.c.QueryQP(c.qp.QP(), uverbs.QPAttrAll)
	if err != nil {
		return "", err
	}
	if c.ud() {
		return c.checkUD(attr)
	}
	want := c.rtr.AV
	for _, x := range []struct {
		name      string
		got, want any
	}{
		{"state", attr.State, ib.QPStateRTS},
		{"dest_qp_num", attr.DestQPN, c.rtr.DestQPN},
		{"path_mtu", attr.PathMTU, c.rtr.PathMTU},
		{"sq_psn", attr.SQPSN, c.rts.SQPSN},
		{"port_num", attr.AV.PortNum, want.PortNum},
		{"is_global", attr.AV.IsGlobal, want.IsGlobal},
		{"sgid_index", attr.AV.SGIDIndex, want.SGIDIndex},
		{"dgid", gid.GID(attr.AV.DGID), gid.GID(want.DGID)},
	} {
		if x.got != x.want {
			return "", &QPMismatchError{Attribute: x.name, Got: fmt.Sprint(x.got), Want: fmt.Sprint(x.want)}
		}
	}
	return fmt.Sprintf("%s, connected to qpn %d", attr.State, attr.DestQPN), nil
}

// close destroys what exists, queue pair first (the others cannot go
// while it uses them), each as a step.
func (c *Conn) close(rec *recorder) {
	ctx := context.Background()
	if c.qp != nil {
		rec.step(ctx, StepDestroyQP, func() (string, error) { return "", c.qp.Destroy() })
		c.qp = nil
	}
	if c.ah != nil {
		rec.step(ctx, StepDestroyAH, func() (string, error) { return "", c.dev.c.DestroyAH(*c.ah) })
		c.ah = nil
	}
	if c.cq != nil {
		rec.step(ctx, StepDestroyCQ, func() (string, error) { return "", c.cq.Destroy() })
		c.cq = nil
	}
	if c.channel != nil {
		c.channel.Close() // its queue is gone; the context's close would do it too
		c.channel = nil
	}
	if c.mr != nil {
		rec.step(ctx, StepDeregMR, func() (string, error) { return "", c.mr.release(c.dev.c) })
		c.mr = nil
	}
}

// memoryRegion is a registered buffer: anonymous memory outside the Go
// heap.
type memoryRegion struct {
	buf  []byte
	mr   uverbs.MR
	part int // the bytes of each part
}

func (m *memoryRegion) region(i int) []byte {
	return m.buf[i*m.part : (i+1)*m.part]
}

func (m *memoryRegion) sge(i int) uverbs.SGE {
	return uverbs.SGE{Addr: m.mr.Addr + uint64(i*m.part), Length: uint32(m.part), LKey: m.mr.LKey}
}

// release deregisters the region, then unmaps it; it stays mapped when
// DEREG_MR fails, as the device may still use it.
func (m *memoryRegion) release(c *uverbs.Context) error {
	if err := c.DeregMR(m.mr); err != nil {
		return err
	}
	return uverbs.FreeBuffer(m.buf)
}
