package uverbstest

import (
	"errors"
	"sync"
	"syscall"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// qp is a queue pair: rxe's send and receive rings, its attributes, and
// the requester that works off its send queue.
type qp struct {
	d      *Device
	file   *file
	handle uint32
	qpn    uint32
	typ    ib.QPType
	pd     *pd
	scq    *cq
	rcq    *cq
	sq, rq *ring
	caps   uverbs.QPCap // what the rings hold
	sigAll bool

	mu   sync.Mutex
	attr uverbs.QPAttr // State, PSNs (the current ones), and the rest as set
	// wake is closed and replaced when the queue pair leaves the state its
	// requester works in, to end its waits.
	wake      chan struct{}
	running   bool // the requester goroutine runs
	requester sync.WaitGroup
	destroyed bool
	// The responder's memory: the PSN after the last request it did
	// (resp.ack_psn), and its recent READs.
	ackPSN uint32
	reads  []readRes
}

// The largest capacities of an rxe queue pair (rxe_param.h).
const (
	rxeMaxInline = 512 // RXE_MAX_INLINE_DATA: RXE_MAX_WQE_SIZE (720) - sizeof(struct rxe_send_wqe)
	sqSignalAll  = 1
)

func (f *file) createQP(req []byte, out response) error {
	var r createQPReq
	decode(req, &r)
	d := f.d
	if d.cfg.Driver != "rxe" {
		return syscall.EINVAL // driver data the fake does not know
	}
	// rxe takes no driver data and answers where to map both rings.
	if len(req) > 56 || out.driverLen < 2*mmapInfoSize {
		return syscall.EINVAL
	}
	typ := ib.QPType(r.QPType)
	switch {
	case typ != ib.QPTypeRC && typ != ib.QPTypeUC && typ != ib.QPTypeUD:
		return syscall.EINVAL
	case r.IsSRQ != 0:
		return syscall.EOPNOTSUPP // shared receive queues are not emulated
	}
	p, okPD := object[*pd](f, r.PDHandle)
	scq, okS := object[*cq](f, r.SendCQHandle)
	rcq, okR := object[*cq](f, r.RecvCQHandle)
	if !okPD || !okS || !okR {
		return syscall.EINVAL
	}
	a := d.attr.Base
	if r.MaxSendWR > a.MaxQPWr || r.MaxRecvWR > a.MaxQPWr || r.MaxSendSGE > a.MaxSGE || r.MaxRecvSGE > a.MaxSGE ||
		r.MaxInline > rxeMaxInline {
		return syscall.EINVAL
	}
	// rxe_qp_init_req: a send element holds the larger of the SGEs and
	// the inline data; the answer gives what the rings hold (6.12; 6.1
	// echoes the work requests asked for).
	wqe := max(r.MaxSendSGE*sgeSize, r.MaxInline)
	rq, recvWR, err := newRing(r.MaxRecvWR, rxeRecvWQESize+int(r.MaxRecvSGE)*sgeSize)
	if err != nil {
		return syscall.ENOMEM
	}
	sq, sendWR, err := newRing(r.MaxSendWR, rxeSendWQESize+int(wqe))
	if err != nil {
		rq.destroyed = true
		rq.release()
		return syscall.ENOMEM
	}
	caps := uverbs.QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: wqe / sgeSize,
		MaxRecvSGE: r.MaxRecvSGE, MaxInlineData: wqe}
	q := &qp{d: d, file: f, typ: typ, pd: p, scq: scq, rcq: rcq, sq: sq, rq: rq, caps: caps, sigAll: r.SQSigAll != 0,
		wake: make(chan struct{})}
	q.attr.PathMTU = ib.MTU256
	q.handle = f.newHandle(q)
	d.offerMmap(rq)
	d.offerMmap(sq)
	d.tab.Lock()
	for d.qps[d.nextQPN] != nil || d.nextQPN < 17 {
		d.nextQPN = (d.nextQPN + 1) & 0xffffff
	}
	q.qpn = d.nextQPN
	d.nextQPN = (d.nextQPN + 1) & 0xffffff
	d.qps[q.qpn] = q
	d.tab.Unlock()
	p.users++
	scq.users++
	if rcq != scq {
		rcq.users++
	}
	resp := createQPResp{QPHandle: q.handle, QPN: q.qpn, MaxSendWR: caps.MaxSendWR, MaxRecvWR: caps.MaxRecvWR,
		MaxSendSGE: caps.MaxSendSGE, MaxRecvSGE: caps.MaxRecvSGE, MaxInline: caps.MaxInlineData}
	driver := append(encode(&rq.info), encode(&sq.info)...)
	if err := errors.Join(out.write(&resp, true), out.driver(driver)); err != nil {
		f.dropQP(q)
		return err
	}
	return nil
}

func (f *file) destroyQP(req []byte, out response) error {
	var r destroyReq
	decode(req, &r)
	q, ok := object[*qp](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	f.dropQP(q)
	return out.write(&struct{ Events uint32 }{0}, false)
}

// dropQP stops the requester, then frees the queue pair.
func (f *file) dropQP(q *qp) {
	q.stop()
	q.mu.Lock()
	q.destroyed = true
	q.mu.Unlock()
	q.requester.Wait()
	d := f.d
	d.tab.Lock()
	delete(d.qps, q.qpn)
	d.tab.Unlock()
	delete(f.objects, q.handle)
	d.destroyRing(q.sq)
	d.destroyRing(q.rq)
	q.pd.users--
	for _, c := range []*cq{q.scq, q.rcq} {
		c.mu.Lock()
		c.users--
		c.mu.Unlock()
		if q.scq == q.rcq {
			break
		}
	}
}

// stop ends the requester's waits (the queue pair is going).
func (q *qp) stop() {
	q.mu.Lock()
	q.wakeLocked()
	q.mu.Unlock()
}

func (q *qp) wakeLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func (f *file) queryQP(req []byte, out response) error {
	var r destroyReq
	decode(req, &r)
	q, ok := object[*qp](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	q.mu.Lock()
	a := q.attr
	q.mu.Unlock()
	resp := queryQPResp{Dest: a.AV, AltDest: a.AltAV,
		MaxSendWR: q.caps.MaxSendWR, MaxRecvWR: q.caps.MaxRecvWR, MaxSendSGE: q.caps.MaxSendSGE,
		MaxRecvSGE: q.caps.MaxRecvSGE, MaxInline: q.caps.MaxInlineData,
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPN, AccessFlags: uint32(a.AccessFlags),
		PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex, State: uint8(a.State), CurState: uint8(a.CurState),
		PathMTU: uint8(a.PathMTU), PathMigState: a.PathMigState, MaxRdAtomic: a.MaxRdAtomic,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, PortNum: a.PortNum, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, AltPortNum: a.AltPortNum, AltTimeout: a.AltTimeout}
	if q.sigAll {
		resp.SQSigAll = sqSignalAll
	}
	return out.write(&resp, false)
}

// The attributes ib_modify_qp_is_ok requires and allows, per transition
// and queue pair type (drivers/infiniband/core/verbs.c qp_state_table),
// for the types the fake knows.
type transition struct {
	req, opt map[ib.QPType]uverbs.QPAttrMask
}

const (
	aState   = uverbs.QPAttrState
	aCur     = uverbs.QPAttrCurState
	aSQD     = uverbs.QPAttrEnSQDAsyncNotify
	aAccess  = uverbs.QPAttrAccessFlags
	aPKey    = uverbs.QPAttrPKeyIndex
	aPort    = uverbs.QPAttrPort
	aQKey    = uverbs.QPAttrQKey
	aAV      = uverbs.QPAttrAV
	aMTU     = uverbs.QPAttrPathMTU
	aTimeout = uverbs.QPAttrTimeout
	aRetry   = uverbs.QPAttrRetryCnt
	aRNR     = uverbs.QPAttrRNRRetry
	aRQPSN   = uverbs.QPAttrRQPSN
	aRdAtom  = uverbs.QPAttrMaxQPRdAtomic
	aAlt     = uverbs.QPAttrAltPath
	aMinRNR  = uverbs.QPAttrMinRNRTimer
	aSQPSN   = uverbs.QPAttrSQPSN
	aDestRd  = uverbs.QPAttrMaxDestRdAtomic
	aMig     = uverbs.QPAttrPathMigState
	aDestQPN = uverbs.QPAttrDestQPN
	rc, uc   = ib.QPTypeRC, ib.QPTypeUC
	ud       = ib.QPTypeUD
)

type states = [2]ib.QPState

var (
	reset, initS, rtr, rts = ib.QPStateReset, ib.QPStateInit, ib.QPStateRTR, ib.QPStateRTS
	sqd, sqe, errS         = ib.QPStateSQD, ib.QPStateSQE, ib.QPStateErr
)

type masks = map[ib.QPType]uverbs.QPAttrMask

var qpStateTable = map[states]transition{
	{reset, reset}: {},
	{reset, initS}: {req: masks{ud: aPKey | aPort | aQKey, uc: aPKey | aPort | aAccess, rc: aPKey | aPort | aAccess}},
	{initS, reset}: {},
	{initS, errS}:  {},
	{initS, initS}: {opt: masks{ud: aPKey | aPort | aQKey, uc: aPKey | aPort | aAccess, rc: aPKey | aPort | aAccess}},
	{initS, rtr}: {
		req: masks{uc: aAV | aMTU | aDestQPN | aRQPSN, rc: aAV | aMTU | aDestQPN | aRQPSN | aDestRd | aMinRNR},
		opt: masks{ud: aPKey | aQKey, uc: aAlt | aAccess | aPKey, rc: aAlt | aAccess | aPKey},
	},
	{rtr, reset}: {},
	{rtr, errS}:  {},
	{rtr, rts}: {
		req: masks{ud: aSQPSN, uc: aSQPSN, rc: aTimeout | aRetry | aRNR | aSQPSN | aRdAtom},
		opt: masks{ud: aCur | aQKey, uc: aCur | aAlt | aAccess | aMig, rc: aCur | aAlt | aAccess | aMinRNR | aMig},
	},
	{rts, reset}: {},
	{rts, errS}:  {},
	{rts, rts}:   {opt: masks{ud: aCur | aQKey, uc: aCur | aAccess | aAlt | aMig, rc: aCur | aAccess | aAlt | aMig | aMinRNR}},
	{rts, sqd}:   {opt: masks{ud: aSQD, uc: aSQD, rc: aSQD}},
	{sqd, reset}: {},
	{sqd, errS}:  {},
	{sqd, rts}:   {opt: masks{ud: aCur | aQKey, uc: aCur | aAlt | aAccess | aMig, rc: aCur | aAlt | aAccess | aMinRNR | aMig}},
	{sqd, sqd}: {opt: masks{ud: aPKey | aQKey, uc: aAV | aAlt | aAccess | aPKey | aMig,
		rc: aPort | aAV | aTimeout | aRetry | aRNR | aRdAtom | aDestRd | aAlt | aAccess | aPKey | aMinRNR | aMig}},
	{sqe, reset}:  {},
	{sqe, errS}:   {},
	{sqe, rts}:    {opt: masks{ud: aCur | aQKey, uc: aCur | aAccess}},
	{errS, reset}: {},
	{errS, errS}:  {},
}

// modifyQPIsOK is ib_modify_qp_is_ok.
func modifyQPIsOK(cur, next ib.QPState, typ ib.QPType, mask uverbs.QPAttrMask) bool {
	if mask&aCur != 0 && cur != rtr && cur != rts && cur != sqd && cur != sqe {
		return false
	}
	t, ok := qpStateTable[states{cur, next}]
	if !ok {
		return false
	}
	req, opt := t.req[typ], t.opt[typ]
	return mask&req == req && mask&^(req|opt|aState) == 0
}

func (f *file) modifyQP(req []byte, _ response) error {
	var r modifyQPReq
	decode(req, &r)
	q, ok := object[*qp](f, r.QPHandle)
	if !ok {
		return syscall.EINVAL
	}
	mask := uverbs.QPAttrMask(r.AttrMask)
	if mask&^uverbs.QPAttrAll != 0 {
		return syscall.EOPNOTSUPP
	}
	d := f.d
	q.mu.Lock()
	defer q.mu.Unlock()
	// uverbs_cmd.c modify_qp: ports and states in range, the address's
	// port the queue pair's.
	if mask&aPort != 0 {
		if _, ok := d.port(r.PortNum); !ok {
			return syscall.EINVAL
		}
	}
	if (mask&aCur != 0 && ib.QPState(r.CurState) > errS) || (mask&aState != 0 && ib.QPState(r.State) > errS) {
		return syscall.EINVAL
	}
	if mask&aAV != 0 {
		if _, ok := d.port(r.Dest.PortNum); !ok {
			return syscall.EINVAL
		}
		if mask&aState != 0 && ib.QPState(r.State) == rtr && mask&aPort == 0 && q.attr.PortNum != r.Dest.PortNum {
			return syscall.EINVAL
		}
		if err := d.checkAV(r.Dest); err != nil {
			return err
		}
	}
	if mask&aAlt != 0 {
		return syscall.EINVAL // alternate paths are for InfiniBand, and not emulated
	}
	// rxe_qp_chk_attr.
	cur := q.attr.State
	if mask&aCur != 0 {
		cur = ib.QPState(r.CurState)
	}
	next := cur
	if mask&aState != 0 {
		next = ib.QPState(r.State)
	}
	port := q.attr.PortNum
	if mask&aPort != 0 {
		port = r.PortNum
	}
	p, _ := d.port(max(port, 1))
	switch {
	case !modifyQPIsOK(cur, next, q.typ, mask):
		return syscall.EINVAL
	case mask&aMTU != 0 && (ib.MTU(r.PathMTU) > p.MaxMTU || r.PathMTU == 0):
		return syscall.EINVAL
	case mask&aRdAtom != 0 && uint32(r.MaxRdAtomic) > d.attr.Base.MaxQPRdAtom:
		return syscall.EINVAL
	case mask&aDestRd != 0 && uint32(r.MaxDestRdAtomic) > d.attr.Base.MaxQPInitRdAtom:
		return syscall.EINVAL
	case mask&aTimeout != 0 && r.Timeout > 31:
		return syscall.EINVAL
	}
	q.apply(&r, mask)
	return nil
}

// checkAV checks an address as the core and rxe do: on RoCE it must carry
// a GRH whose source GID is a RoCE v2 entry of the port.
func (d *Device) checkAV(av uverbs.AddressVector) error {
	p, _ := d.port(av.PortNum)
	if av.IsGlobal == 0 {
		if p.LinkLayer == ib.LinkLayerEthernet {
			return syscall.EINVAL
		}
		return nil
	}
	for _, g := range p.GIDs {
		if g.Index == uint32(av.SGIDIndex) {
			if p.LinkLayer == ib.LinkLayerEthernet && g.Type != uverbs.GIDTypeRoCEv2 {
				return syscall.EINVAL // rxe_av_chk_attr: RoCE v2 only
			}
			return nil
		}
	}
	return syscall.EINVAL
}

// apply sets the attributes (rxe_qp_from_attr); q.mu is held.
func (q *qp) apply(r *modifyQPReq, mask uverbs.QPAttrMask) {
	a := &q.attr
	pow2 := func(n uint8) uint8 {
		if n == 0 {
			return 0
		}
		p := uint8(1)
		for p < n && p < 128 {
			p <<= 1
		}
		return p
	}
	if mask&aRdAtom != 0 {
		a.MaxRdAtomic = pow2(r.MaxRdAtomic)
	}
	if mask&aDestRd != 0 {
		a.MaxDestRdAtomic = pow2(r.MaxDestRdAtomic)
	}
	if mask&aCur != 0 {
		a.CurState = ib.QPState(r.State)
	}
	if mask&aSQD != 0 {
		a.EnSQDAsyncNotify = r.EnSQDAsyncNotify
	}
	if mask&aAccess != 0 {
		a.AccessFlags = uverbs.Access(r.AccessFlags)
	}
	if mask&aPKey != 0 {
		a.PKeyIndex = r.PKeyIndex
	}
	if mask&aPort != 0 {
		a.PortNum = r.PortNum
	}
	if mask&aQKey != 0 {
		a.QKey = r.QKey
	}
	if mask&aAV != 0 {
		a.AV = r.Dest
	}
	if mask&aMTU != 0 {
		a.PathMTU = ib.MTU(r.PathMTU)
	}
	if mask&aTimeout != 0 {
		a.Timeout = r.Timeout
	}
	if mask&aRetry != 0 {
		a.RetryCnt = r.RetryCnt
	}
	if mask&aRNR != 0 {
		a.RNRRetry = r.RNRRetry
	}
	if mask&aRQPSN != 0 {
		a.RQPSN = r.RQPSN & psnMask
	}
	if mask&aMinRNR != 0 {
		a.MinRNRTimer = r.MinRNRTimer
	}
	if mask&aSQPSN != 0 {
		a.SQPSN = r.SQPSN & psnMask
	}
	if mask&aMig != 0 {
		a.PathMigState = r.PathMigState
	}
	if mask&aDestQPN != 0 {
		a.DestQPN = r.DestQPN
	}
	if mask&aState == 0 {
		return
	}
	prev := a.State
	a.State = ib.QPState(r.State)
	switch a.State {
	case reset:
		// Work requests are dropped without completions.
		q.wakeLocked()
		q.sq.reset()
		q.rq.reset()
		q.ackPSN, q.reads = 0, nil
	case errS:
		if prev != errS {
			q.toErrorLocked()
		}
	case rts:
		if prev == sqd {
			q.kickLocked()
		}
	case sqd:
		q.wakeLocked()
	}
}

const psnMask = 0xffffff

func (f *file) postSend(req []byte, out response) error {
	var r postSendReq
	decode(req, &r)
	q, ok := object[*qp](f, r.QPHandle)
	if !ok {
		return syscall.EINVAL
	}
	// Newer kernels check the size of the work requests even when none
	// follows (the doorbell).
	if r.WQESize < 56 {
		return syscall.EINVAL
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	// rxe_post_send: not before RTS; a queue pair in error flushes.
	if q.attr.State < rts {
		return syscall.EINVAL
	}
	q.kickLocked()
	return out.write(&struct{ BadWR uint32 }{0}, false)
}
