package uverbstest_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// The queue pair state machine is ib_modify_qp_is_ok's: a transition the
// table lacks, a required attribute missing or one it does not allow is
// EINVAL, as are rxe's attribute checks.
func TestModifyQPChecks(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	qp := e.qp.QP()
	initAttr := uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: defaultLink.access}
	av := uverbs.AddressVector{DGID: e.dev.GID(1), SGIDIndex: 1, HopLimit: 64, IsGlobal: 1, PortNum: 1}
	rtr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024, DestQPN: qp.QPN, MaxDestRdAtomic: 1, AV: av}
	modify := func(a uverbs.QPAttr, mask uverbs.QPAttrMask) error { return e.c.ModifyQP(qp, &a, mask) }
	for _, tt := range []struct {
		name string
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
		want error
	}{
		{"RESET to RTR", rtr, uverbs.QPAttrsInitToRTR, unix.EINVAL},
		{"RESET to INIT without the port", initAttr, uverbs.QPAttrsResetToInit &^ uverbs.QPAttrPort, unix.EINVAL},
		{"RESET to INIT with a path MTU", initAttr, uverbs.QPAttrsResetToInit | uverbs.QPAttrPathMTU, unix.EINVAL},
		{"RESET to INIT on port 2", uverbs.QPAttr{State: ib.QPStateInit, PortNum: 2}, uverbs.QPAttrsResetToInit, unix.EINVAL},
		{"state 9", uverbs.QPAttr{State: 9}, uverbs.QPAttrState, unix.EINVAL},
		{"a mask bit beyond the standard ones", initAttr, uverbs.QPAttrsResetToInit | 1<<25, unix.EOPNOTSUPP},
		{"RESET to INIT", initAttr, uverbs.QPAttrsResetToInit, nil},
		{"INIT to RTS", uverbs.QPAttr{State: ib.QPStateRTS}, uverbs.QPAttrsRTRToRTS, unix.EINVAL},
		{"INIT to RTR without the address", rtr, uverbs.QPAttrsInitToRTR &^ uverbs.QPAttrAV, unix.EINVAL},
		{"INIT to RTR without a GRH on RoCE", func() uverbs.QPAttr { a := rtr; a.AV.IsGlobal = 0; return a }(), uverbs.QPAttrsInitToRTR, unix.EINVAL},
		{"INIT to RTR from an empty GID slot", func() uverbs.QPAttr { a := rtr; a.AV.SGIDIndex = 9; return a }(), uverbs.QPAttrsInitToRTR, unix.EINVAL},
		{"INIT to RTR on another port than INIT's", func() uverbs.QPAttr { a := rtr; a.AV.PortNum = 2; return a }(), uverbs.QPAttrsInitToRTR, unix.EINVAL},
		{"INIT to RTR beyond the port's MTU", func() uverbs.QPAttr { a := rtr; a.PathMTU = ib.MTU8192; return a }(), uverbs.QPAttrsInitToRTR, unix.EINVAL},
		{"INIT to RTR", rtr, uverbs.QPAttrsInitToRTR, nil},
		{"RTR to RTS with a timeout of 32", uverbs.QPAttr{State: ib.QPStateRTS, Timeout: 32}, uverbs.QPAttrsRTRToRTS, unix.EINVAL},
		{"RTR to RTS with an address", uverbs.QPAttr{State: ib.QPStateRTS, AV: av}, uverbs.QPAttrsRTRToRTS | uverbs.QPAttrAV, unix.EINVAL},
		{"RTR to RTS", uverbs.QPAttr{State: ib.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7}, uverbs.QPAttrsRTRToRTS, nil},
		{"RTS to RTS with a new RNR timer", uverbs.QPAttr{State: ib.QPStateRTS, MinRNRTimer: 3}, uverbs.QPAttrState | uverbs.QPAttrMinRNRTimer, nil},
		{"RTS to INIT", initAttr, uverbs.QPAttrState, unix.EINVAL},
		{"RTS to ERR", uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState, nil},
		{"ERR to RTS", uverbs.QPAttr{State: ib.QPStateRTS}, uverbs.QPAttrState, unix.EINVAL},
		{"ERR to RESET", uverbs.QPAttr{State: ib.QPStateReset}, uverbs.QPAttrState, nil},
	} {
		err := modify(tt.attr, tt.mask)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// QUERY_QP returns what was set, the current PSNs and the capacities.
func TestQueryQP(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	a, err := e.c.QueryQP(e.qp.QP(), uverbs.QPAttrAll)
	if err != nil {
		t.Fatal(err)
	}
	qp := e.qp.QP()
	if a.State != ib.QPStateRTS || a.PathMTU != ib.MTU1024 || a.DestQPN != qp.QPN || a.RQPSN != defaultLink.psn ||
		a.SQPSN != defaultLink.psn || a.AV.SGIDIndex != 1 || a.AV.DGID != e.dev.GID(1) || a.Timeout != 14 ||
		a.RetryCnt != 7 || a.RNRRetry != 3 || a.MaxRdAtomic != 1 || a.MaxDestRdAtomic != 1 || a.PortNum != 1 ||
		a.AccessFlags != defaultLink.access || a.SQSigAll != 1 || a.Cap != qp.Cap {
		t.Errorf("QueryQP = %+v", a)
	}
}

// The objects' checks: handles that name nothing, a destroy while in
// use, CQ sizes and vectors, memory registration's rules.
func TestObjectChecks(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{PinLimit: 3 * bufSize})
	e := newEnd(t, dev)
	c := e.c
	wantErrno(t, "DeallocPD of a PD in use", c.DeallocPD(e.pd), unix.EBUSY)
	wantErrno(t, "DestroyCQ of a CQ in use", c.DestroyCQ(e.cq.CQ()), unix.EBUSY)
	wantErrno(t, "DeallocPD of handle 99", c.DeallocPD(uverbs.PD{Handle: 99}), unix.EINVAL)
	wantErrno(t, "DeregMR of handle 99", c.DeregMR(uverbs.MR{Handle: 99}), unix.EINVAL)
	_, err := c.CreateRxeCQ(0)
	wantErrno(t, "a CQ of 0 entries", err, unix.EINVAL)
	_, err = c.CreateRxeCQWith(uverbs.CQInit{CQE: 8, CompVector: 1})
	wantErrno(t, "a CQ on vector 1 of 1", err, unix.EINVAL)
	_, err = c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 1 << 30}})
	wantErrno(t, "a QP beyond max_qp_wr", err, unix.EINVAL)
	_, err = c.CreateRxeQP(uverbs.QPInit{PD: uverbs.PD{Handle: 77}, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeRC})
	wantErrno(t, "a QP in no PD", err, unix.EINVAL)
	_, err = c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeXRCIni})
	wantErrno(t, "an XRC QP (not emulated)", err, unix.EINVAL)

	buf, err := uverbs.AllocBuffer(3 * bufSize)
	if err != nil {
		t.Fatal(err)
	}
	defer uverbs.FreeBuffer(buf)
	_, err = c.RegMR(e.pd, buf[:bufSize], uverbs.AccessRemoteWrite)
	wantErrno(t, "remote write without local write", err, unix.EINVAL)
	mr, err := c.RegMR(e.pd, buf[:2*bufSize], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.RKey != 0 {
		t.Errorf("rkey %#x of a region without remote access, want 0", mr.RKey)
	}
	_, err = c.RegMR(e.pd, buf[2*bufSize:], uverbs.AccessLocalWrite)
	wantErrno(t, "registering beyond the pin limit", err, unix.ENOMEM)
	if err := c.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	if r := dev.Resources(); r.Pinned != bufSize || r.MRs != 1 {
		t.Errorf("resources %+v, want one region of %d bytes", r, bufSize)
	}
}

// Every command can be made to fail, once on its Nth call or always, and
// the client sees the errno in a *uverbs.CommandError.
func TestFaults(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{})
	e := newEnd(t, dev)
	dev.Inject(uverbstest.Fault{Op: uverbstest.OpModifyQP, Nth: 2, Err: unix.ENOMEM})
	qp := e.qp.QP()
	init := uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: defaultLink.access}
	if err := e.c.ModifyQP(qp, &init, uverbs.QPAttrsResetToInit); err != nil {
		t.Fatalf("first MODIFY_QP: %v", err)
	}
	err := e.c.ModifyQP(qp, &init, uverbs.QPAttrState)
	var ce *uverbs.CommandError
	if !errors.As(err, &ce) || ce.Command != "MODIFY_QP" || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("second MODIFY_QP: %v, want a MODIFY_QP error with ENOMEM", err)
	}
	if err := e.c.ModifyQP(qp, &init, uverbs.QPAttrState); err != nil {
		t.Errorf("third MODIFY_QP: %v (the fault was for the second only)", err)
	}

	dev.Inject(uverbstest.Fault{Op: uverbstest.OpRegMR, Err: unix.EFAULT})
	for range 2 {
		_, err := e.c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite)
		wantErrno(t, "REG_MR with a standing fault", err, unix.EFAULT)
	}
	dev.ClearFaults()
	if mr, err := e.c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite); err != nil {
		t.Errorf("REG_MR after ClearFaults: %v", err)
	} else {
		e.c.DeregMR(mr)
	}

	for _, tt := range []struct {
		op   uverbstest.Op
		call func() error
	}{
		{uverbstest.OpQueryDevice, func() error { _, err := e.c.QueryDevice(); return err }},
		{uverbstest.OpQueryDeviceEx, func() error { _, _, err := e.c.QueryDeviceEx(); return err }},
		{uverbstest.OpQueryPort, func() error { _, err := e.c.QueryPort(1); return err }},
		{uverbstest.OpQueryPortIoctl, func() error { _, err := e.c.QueryPortEx(uverbs.DriverIDRXE, 1); return err }},
		{uverbstest.OpQueryGIDTable, func() error { _, err := e.c.QueryGIDTable(uverbs.DriverIDRXE, 8); return err }},
		{uverbstest.OpAllocPD, func() error { _, err := e.c.AllocPD(); return err }},
		{uverbstest.OpCreateCompChannel, func() error { _, err := e.c.CreateCompChannel(); return err }},
		{uverbstest.OpCreateCQ, func() error { _, err := e.c.CreateRxeCQ(4); return err }},
		{uverbstest.OpMmap, func() error { _, err := e.c.CreateRxeCQ(4); return err }},
		{uverbstest.OpReqNotifyCQ, func() error { return e.cq.Arm(false) }},
		{uverbstest.OpCreateQP, func() error {
			_, err := e.c.CreateRxeQP(uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeRC})
			return err
		}},
		{uverbstest.OpQueryQP, func() error { _, err := e.c.QueryQP(qp, uverbs.QPAttrAll); return err }},
	} {
		dev.Inject(uverbstest.Fault{Op: tt.op, Nth: 1, Err: unix.EPERM})
		if err := tt.call(); !errors.Is(err, unix.EPERM) {
			t.Errorf("%v with a fault: %v, want EPERM", tt.op, err)
		}
	}
	if r := dev.Resources(); r.CQs != 1 || r.QPs != 1 || r.MappedQueues != 3 {
		t.Errorf("after the failed creations: %+v, want only the end's CQ and QP", r)
	}
}

// GET_CONTEXT refused (a driver that wants data grdma does not send):
// Open reports an unsupported driver. A driver the fake does not know
// the data of opens, but cannot make queues.
func TestUnsupportedDriver(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{})
	dev.Inject(uverbstest.Fault{Op: uverbstest.OpGetContextIoctl, Nth: 1, Err: unix.EINVAL})
	dev.Inject(uverbstest.Fault{Op: uverbstest.OpGetContext, Nth: 1, Err: unix.EINVAL})
	_, err := dev.Open()
	var ud *uverbs.UnsupportedDriverError
	if !errors.As(err, &ud) || ud.Device != "rxe0" {
		t.Errorf("Open = %v, want an *UnsupportedDriverError for rxe0", err)
	}
	if r := dev.Resources(); r.Contexts != 0 {
		t.Errorf("a failed Open left %+v", r)
	}

	other := uverbstest.NewDevice(uverbstest.Config{Name: "efa0", Driver: "efa"})
	c, err := other.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Node.Driver != "efa" || other.Calls(uverbstest.OpGetContext) != 1 || other.Calls(uverbstest.OpGetContextIoctl) != 0 {
		t.Errorf("driver %q, GET_CONTEXT write %d, ioctl %d; want efa through the write command", c.Node.Driver,
			other.Calls(uverbstest.OpGetContext), other.Calls(uverbstest.OpGetContextIoctl))
	}
	if _, err := c.AllocPD(); err != nil {
		t.Errorf("AllocPD on efa: %v", err)
	}
	_, err = c.CreateRxeCQ(8)
	wantErrno(t, "an rxe CQ on efa", err, unix.EINVAL)
}

// The device vanishes under a running program: commands fail with EIO, a
// waiter on a completion channel is woken with EIO, the peer's sends are
// lost; Close still releases everything.
func TestDeviceRemoved(t *testing.T) {
	l := defaultLink
	l.timeout, l.retry = 1, 1
	a, b, _ := pair(t, l)
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error)
	go func() { waited <- b.cq.WaitEvent(context.Background()) }()
	b.dev.Remove()
	select {
	case err := <-waited:
		wantErrno(t, "a waiter when the device went", err, unix.EIO)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	_, err := b.c.QueryPort(1)
	wantErrno(t, "QUERY_PORT on a removed device", err, unix.EIO)
	a.post(uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wantWC(t, a.wait(1)[0], 1, uverbs.WCRetryExcErr, 0, 0)
	if _, err := b.dev.Open(); !errors.Is(err, unix.ENODEV) {
		t.Errorf("Open of a removed device: %v, want ENODEV", err)
	}
	// b's teardown (t.Cleanup) fails its commands; closing works.
	b.qp.Destroy()
	b.cq.Destroy()
	b.ch.Close()
	if err := b.c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	b.c = nil
	if r := b.dev.Resources(); r != (uverbstest.Resources{}) {
		t.Errorf("left after Close: %+v", r)
	}
}

// The queries: QUERY_DEVICE and its extended form (the recorded rxe), the
// port in both forms, the GID table, GET_CONTEXT through the ioctl.
func TestQueries(t *testing.T) {
	ibPort := uverbstest.Port{LinkLayer: ib.LinkLayerInfiniBand, LID: 7, ActiveMTU: ib.MTU4096}
	dev := uverbstest.NewDevice(uverbstest.Config{Name: "rxe3", IPv4: netip.MustParseAddr("192.0.2.9"),
		Ports: []uverbstest.Port{{}, ibPort}, CompVectors: 2})
	c, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.NumCompVectors != 2 || dev.Calls(uverbstest.OpGetContextIoctl) != 1 || dev.Calls(uverbstest.OpGetContext) != 0 {
		t.Errorf("%d vectors, GET_CONTEXT ioctl %d write %d; want 2 through the ioctl", c.NumCompVectors,
			dev.Calls(uverbstest.OpGetContextIoctl), dev.Calls(uverbstest.OpGetContext))
	}
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	ex, _, err := c.QueryDeviceEx()
	if err != nil {
		t.Fatal(err)
	}
	if attr.VendorID != 0xffffff || attr.PhysPortCnt != 2 || ex.Base != attr || ex.ResponseLength == 0 {
		t.Errorf("QUERY_DEVICE %+v, extended %+v", attr, ex)
	}
	p1, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.QueryPortEx(uverbs.DriverIDRXE, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p1.State != 4 || p1.LinkLayer != ib.LinkLayerEthernet || p1.ActiveMTU != ib.MTU1024 || p1.GIDTblLen == 0 ||
		p2.LinkLayer != ib.LinkLayerInfiniBand || p2.LID != 7 || p2.ActiveMTU != ib.MTU4096 || p2.Flags != 0 {
		t.Errorf("port 1 %+v\nport 2 %+v", p1, p2)
	}
	_, err = c.QueryPort(3)
	wantErrno(t, "QUERY_PORT 3 of 2", err, unix.EINVAL)
	gids, err := c.QueryGIDTable(uverbs.DriverIDRXE, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(gids) != 3 || gids[1].GID != netip.MustParseAddr("::ffff:192.0.2.9").As16() || gids[1].Type != uverbs.GIDTypeRoCEv2 ||
		gids[2].Port != 2 || gids[2].Type != uverbs.GIDTypeIB {
		t.Errorf("GID table %+v", gids)
	}
	_, err = c.QueryGIDTable(uverbs.DriverIDRXE, 2)
	wantErrno(t, "a GID table without room", err, unix.EINVAL)
	_, err = c.QueryPortEx(uverbs.DriverIDMLX5, 1)
	wantErrno(t, "an ioctl naming another driver", err, unix.EINVAL)
	err = c.ProbeDMABufImport(uverbs.DriverIDRXE)
	wantErrno(t, "a dma-buf registration on rxe", err, unix.EOPNOTSUPP)
}

// A QP on an InfiniBand port is addressed by LID, without a GRH.
func TestInfiniBandByLID(t *testing.T) {
	fab := uverbstest.NewFabric()
	port := func(lid uint16) []uverbstest.Port {
		return []uverbstest.Port{{LinkLayer: ib.LinkLayerInfiniBand, LID: lid}}
	}
	a, b := newEnd(t, fab.NewDevice(uverbstest.Config{Ports: port(1)})), newEnd(t, fab.NewDevice(uverbstest.Config{Ports: port(2)}))
	for _, s := range []struct {
		e    *end
		peer *end
		lid  uint16
	}{{a, b, 2}, {b, a, 1}} {
		qp := s.e.qp.QP()
		if err := s.e.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: defaultLink.access},
			uverbs.QPAttrsResetToInit); err != nil {
			t.Fatal(err)
		}
		rtr := uverbs.QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU2048, DestQPN: s.peer.qp.QP().QPN, RQPSN: 1,
			MaxDestRdAtomic: 1, MinRNRTimer: 1, AV: uverbs.AddressVector{DLID: s.lid, PortNum: 1}}
		if err := s.e.c.ModifyQP(qp, &rtr, uverbs.QPAttrsInitToRTR); err != nil {
			t.Fatal(err)
		}
		if err := s.e.c.ModifyQP(qp, &uverbs.QPAttr{State: ib.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 1,
			MaxRdAtomic: 1}, uverbs.QPAttrsRTRToRTS); err != nil {
			t.Fatal(err)
		}
	}
	b.recv(1, 0, 64)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 64)}})
	wantWC(t, b.wait(1)[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 64)
}

// Closing a context without destroying anything releases everything, as
// closing the device does: objects, mapped queues once unmapped, and
// descriptors.
func TestCloseReleasesEverything(t *testing.T) {
	fds := openFDs(t)
	dev := uverbstest.NewDevice(uverbstest.Config{})
	e := newEnd(t, dev)
	e.connect(e, defaultLink)
	e.recv(1, 0, 8)
	if r := dev.Resources(); r.Contexts != 1 || r.PDs != 1 || r.MRs != 1 || r.CQs != 1 || r.QPs != 1 || r.Channels != 1 ||
		r.MappedQueues != 3 || r.Pinned != bufSize {
		t.Errorf("resources %+v", r)
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	e.c = nil
	// The process still maps the queues (uverbs unmaps them in Destroy,
	// which did not run): they stay until unmapped, like the kernel's.
	if r := dev.Resources(); r.Contexts != 0 || r.QPs != 0 || r.Pinned != 0 || r.MappedQueues != 3 {
		t.Errorf("after Close: %+v", r)
	}
	e.ch.Close()
	e.qp.Destroy()
	e.cq.Destroy()
	if r := dev.Resources(); r != (uverbstest.Resources{}) {
		t.Errorf("after unmapping: %+v", r)
	}
	uverbs.FreeBuffer(e.buf)
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open, %d before", n, fds)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}
