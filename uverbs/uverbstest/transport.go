package uverbstest

import (
	"encoding/binary"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// The reliable connected transport, message by message: the requester of
// a queue pair takes its send queue's work requests in order, sends each
// to the responder of the queue pair its address names (on this device or
// another of the fabric), waits for the answer, retrying as the queue
// pair's timeout, retry count and RNR retry count say, and completes the
// request. The responder checks a request as rxe_resp.c does and executes
// it against its memory regions and receive queue. Statuses and the
// error state follow rxe.

// request is a message on its way to a responder.
type request struct {
	from      *qp
	opcode    uverbs.WROpcode
	psn       uint32
	packets   uint32 // PSNs it uses: ceil(length/MTU), at least 1
	mtu       int    // the requester's path MTU in bytes
	payload   []byte // SEND and WRITE
	length    uint32 // READ: bytes to read
	raddr     uint64
	rkey      uint32
	imm       uint32
	solicited bool
	srcGID    [16]byte
	srcLID    uint16
}

// answer is what a responder sends back.
type answer int

const (
	ansNone      answer = iota // nothing: the request is dropped
	ansACK                     // done (with the data of a READ)
	ansRNR                     // no receive posted: retry after the timer
	ansPSN                     // PSN sequence error: retry
	ansInvReq                  // NAK invalid request: REM_INV_REQ_ERR
	ansRemAccess               // NAK remote access error: REM_ACCESS_ERR
	ansRemOp                   // NAK remote operational error: REM_OP_ERR
)

type reply struct {
	ans      answer
	psn      uint32 // the last PSN an ACK acknowledges
	data     []byte // READ
	rnrTimer uint8  // the responder's min_rnr_timer
}

// sendWQE is what the requester reads of a struct rxe_send_wqe.
type sendWQE struct {
	id       uint64
	opcode   uverbs.WROpcode
	flags    uverbs.SendFlags
	imm      uint32
	raddr    uint64
	rkey     uint32
	length   uint32
	sgl      []uverbs.SGE
	inline   []byte
	badShape bool // more SGEs than the queue pair takes
}

func readSendWQE(slot []byte, maxSGE uint32) sendWQE {
	ne := binary.NativeEndian
	w := sendWQE{
		id:     ne.Uint64(slot[sendWRID:]),
		opcode: uverbs.WROpcode(ne.Uint32(slot[sendOpcode:])),
		flags:  uverbs.SendFlags(ne.Uint32(slot[sendFlags:])),
		imm:    ne.Uint32(slot[sendImm:]),
		raddr:  ne.Uint64(slot[sendIOVA:]),
		rkey:   ne.Uint32(slot[sendRKey:]),
		length: ne.Uint32(slot[sendDMALength:]),
	}
	if w.flags&uverbs.SendInline != 0 {
		n := min(int(w.length), len(slot)-rxeSendWQESize)
		w.inline = append([]byte(nil), slot[rxeSendWQESize:rxeSendWQESize+n]...)
		return w
	}
	n := ne.Uint32(slot[sendNumSGE:])
	if n > maxSGE || rxeSendWQESize+int(n)*sgeSize > len(slot) {
		w.badShape = true
		return w
	}
	w.sgl = readSGL(slot[rxeSendWQESize:], n)
	return w
}

func readSGL(b []byte, n uint32) []uverbs.SGE {
	ne := binary.NativeEndian
	sgl := make([]uverbs.SGE, n)
	for i := range sgl {
		s := b[i*sgeSize:]
		sgl[i] = uverbs.SGE{Addr: ne.Uint64(s), Length: ne.Uint32(s[8:]), LKey: ne.Uint32(s[12:])}
	}
	return sgl
}

// kickLocked runs the requester if it is not running; q.mu is held.
func (q *qp) kickLocked() {
	if q.running || q.destroyed {
		return
	}
	q.running = true
	q.requester.Add(1)
	go q.runRequester()
}

// runRequester works off the send queue until it is empty or the queue
// pair leaves RTS; in the error state it flushes.
func (q *qp) runRequester() {
	defer q.requester.Done()
	for {
		q.mu.Lock()
		if q.destroyed || q.d.gone.Load() {
			q.running = false
			q.mu.Unlock()
			return
		}
		if q.attr.State == errS {
			q.flushLocked()
			q.running = false
			q.mu.Unlock()
			return
		}
		slot, ok := q.sq.head()
		if q.attr.State != rts || !ok {
			q.running = false
			q.mu.Unlock()
			return
		}
		if q.typ == ib.QPTypeUD {
			if q.sendUD(slot) {
				q.running = false // until a post kicks it again
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			continue
		}
		w := readSendWQE(slot, q.caps.MaxSendSGE)
		req, status := q.prepare(&w)
		if status != uverbs.WCSuccess {
			// A request the requester itself refuses (an SGE outside
			// the protection domain's regions, a malformed element)
			// puts the queue pair in the error state; rxe 6.12 then
			// completes it as flushed with the rest (6.1 says
			// LOC_QP_OP_ERR).
			q.completeSend(&w, uverbs.WCWRFlushErr)
			q.mu.Unlock()
			continue
		}
		// The PSNs are the request's from the moment it is sent.
		q.attr.SQPSN = (req.psn + req.packets) & psnMask
		wake := q.wake
		q.mu.Unlock()

		rep, status, aborted := q.transmit(req, wake)
		if aborted {
			continue // the state changed: the loop's top decides
		}
		q.mu.Lock()
		if q.destroyed || q.attr.State == reset {
			q.mu.Unlock()
			continue
		}
		if q.attr.State == errS && status == uverbs.WCSuccess {
			// Its own responder failed meanwhile (connected to itself):
			// the error state flushes this request too.
			q.mu.Unlock()
			continue
		}
		if status == uverbs.WCSuccess && w.opcode == uverbs.WRRDMARead {
			status = q.scatter(w.sgl, rep.data, uverbs.AccessLocalWrite, uverbs.WCLocProtErr)
		}
		q.completeSend(&w, status)
		q.mu.Unlock()
	}
}

// prepare checks a work request and gathers what it sends; q.mu is held.
func (q *qp) prepare(w *sendWQE) (*request, uverbs.WCStatus) {
	a := &q.attr
	mtu := a.PathMTU.Bytes()
	req := &request{from: q, opcode: w.opcode, psn: a.SQPSN, mtu: mtu, raddr: w.raddr, rkey: w.rkey, imm: w.imm,
		solicited: w.flags&uverbs.SendSolicited != 0}
	if w.badShape {
		return nil, uverbs.WCLocQPOpErr
	}
	switch w.opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm, uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		if w.inline != nil {
			req.payload = w.inline
		} else {
			data, ok := q.gather(w.sgl)
			if !ok {
				return nil, uverbs.WCLocProtErr
			}
			req.payload = data
		}
		req.length = uint32(len(req.payload))
	case uverbs.WRRDMARead:
		req.length = w.length
	default:
		return nil, uverbs.WCLocQPOpErr // atomics and the rest are not emulated
	}
	if q.typ == ib.QPTypeUC && w.opcode == uverbs.WRRDMARead {
		return nil, uverbs.WCLocQPOpErr
	}
	req.packets = max(1, (req.length+uint32(mtu)-1)/uint32(mtu))
	if p, ok := q.d.dataPort(a.PortNum); ok && a.AV.IsGlobal != 0 {
		for _, g := range p.GIDs {
			if g.Index == uint32(a.AV.SGIDIndex) {
				req.srcGID = g.GID
			}
		}
		req.srcLID = p.LID
	} else if ok {
		req.srcLID = p.LID
	}
	return req, uverbs.WCSuccess
}

// gather reads the SGEs' bytes from local memory regions of the queue
// pair's protection domain.
func (q *qp) gather(sgl []uverbs.SGE) ([]byte, bool) {
	var data []byte
	for _, s := range sgl {
		if s.Length == 0 {
			continue
		}
		m := q.d.lookupMR(s.LKey, q.pd, 0, s.Addr, uint64(s.Length), false)
		if m == nil {
			return nil, false
		}
		b, err := copyFromUser(m.user(s.Addr), int(s.Length))
		if err != nil {
			return nil, false
		}
		data = append(data, b...)
	}
	if data == nil {
		data = []byte{}
	}
	return data, true
}

// scatter writes data into local memory regions (a receive, a read
// response), which need local write access; bad says what a bad SGE
// makes the completion.
func (q *qp) scatter(sgl []uverbs.SGE, data []byte, access uverbs.Access, bad uverbs.WCStatus) uverbs.WCStatus {
	for _, s := range sgl {
		if len(data) == 0 {
			break
		}
		n := min(int(s.Length), len(data))
		if n == 0 {
			continue
		}
		m := q.d.lookupMR(s.LKey, q.pd, access, s.Addr, uint64(n), false)
		if m == nil || copyToUser(m.user(s.Addr), data[:n]) != nil {
			return bad
		}
		data = data[n:]
	}
	return uverbs.WCSuccess
}

// lookupMR finds the memory region of key (an lkey or, remote, an rkey)
// in pd that covers [addr, addr+length) with access.
func (d *Device) lookupMR(key uint32, p *pd, access uverbs.Access, addr, length uint64, remote bool) *mr {
	d.tab.RLock()
	m := d.mrs[key>>8]
	d.tab.RUnlock()
	if m == nil || m.key != key || m.pd != p || m.access&access != access {
		return nil
	}
	if remote && m.access&(uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite|uverbs.AccessRemoteAtomic) == 0 {
		return nil // no rkey
	}
	if addr < m.iova || addr+length > m.iova+m.length || addr+length < addr {
		return nil
	}
	return m
}

// user returns the process address of device address iova.
func (m *mr) user(iova uint64) uint64 { return m.addr + (iova - m.iova) }

// The local ACK timeout, 4.096 µs × 2^timeout; 0 means none (wait
// forever).
func ackTimeout(t uint8) time.Duration {
	if t == 0 {
		return 0
	}
	return time.Duration(4096<<min(t, 31)) * time.Nanosecond
}

// rnrTimes are the RNR NAK timer values (IBA table 45), in microseconds
// × 100.
var rnrTimes = [32]uint32{65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
	1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152}

func rnrDelay(timer uint8) time.Duration {
	return time.Duration(rnrTimes[timer&31]) * 10 * time.Microsecond
}

// transmit sends a request until it is answered or retries run out. It
// returns aborted when the queue pair changed state meanwhile.
func (q *qp) transmit(req *request, wake chan struct{}) (rep reply, status uverbs.WCStatus, aborted bool) {
	q.mu.Lock()
	av, port, timeout := q.attr.AV, q.attr.PortNum, ackTimeout(q.attr.Timeout)
	retries, rnrLeft := q.attr.RetryCnt, q.attr.RNRRetry
	destQPN := q.attr.DestQPN
	q.mu.Unlock()
	wait := func(d time.Duration) bool {
		if d == 0 {
			<-wake
			return false
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-wake:
			return false
		}
	}
	if q.typ == ib.QPTypeUC {
		// No acknowledgements: sent is done, arrived or not.
		q.d.fab.deliver(q, req, av, port, destQPN, 0, wake)
		return reply{ans: ansACK}, uverbs.WCSuccess, false
	}
	for attempt := 0; ; attempt++ {
		rep, delivered := q.d.fab.deliver(q, req, av, port, destQPN, attempt, wake)
		select {
		case <-wake:
			return reply{}, 0, true
		default:
		}
		// An ACK of PSNs before this request's (a duplicate's answer
		// from a responder that expects later PSNs) acknowledges
		// nothing of it: it is waited out like a loss.
		stale := rep.ans == ansACK && psnDiff(rep.psn, (req.psn+req.packets-1)&psnMask) < 0
		switch {
		case !delivered || rep.ans == ansNone || stale:
			if !wait(timeout) {
				return reply{}, 0, true
			}
			if retries == 0 {
				return reply{}, uverbs.WCRetryExcErr, false
			}
			retries--
		case rep.ans == ansPSN:
			if retries == 0 {
				return reply{}, uverbs.WCRetryExcErr, false
			}
			retries--
		case rep.ans == ansRNR:
			if rnrLeft != 7 { // 7: retry for ever
				if rnrLeft == 0 {
					return reply{}, uverbs.WCRNRRetryExcErr, false
				}
				rnrLeft--
			}
			if !wait(rnrDelay(rep.rnrTimer)) {
				return reply{}, 0, true
			}
		case rep.ans == ansACK:
			return rep, uverbs.WCSuccess, false
		default:
			return rep, map[answer]uverbs.WCStatus{ansInvReq: uverbs.WCRemInvReqErr, ansRemAccess: uverbs.WCRemAccessErr,
				ansRemOp: uverbs.WCRemOpErr}[rep.ans], false
		}
	}
}

// completeSend retires the send queue's head and, if signalled or
// failed, completes it (rxe_comp.c do_complete); a failure puts the queue
// pair in the error state. q.mu is held.
func (q *qp) completeSend(w *sendWQE, status uverbs.WCStatus) {
	q.sq.advance()
	if q.sigAll || w.flags&uverbs.SendSignaled != 0 || status != uverbs.WCSuccess {
		wc := uverbs.WC{WRID: w.id, Status: status, QPNum: q.qpn}
		if status == uverbs.WCSuccess {
			wc.Opcode = sendCompletionOpcode(w.opcode)
			wc.ByteLen = w.length
			if w.opcode == uverbs.WRSendWithImm || w.opcode == uverbs.WRRDMAWriteWithImm {
				wc.WCFlags = wcWithImm
			}
		}
		q.scq.post(wc, false)
	}
	if status != uverbs.WCSuccess {
		q.toErrorLocked()
	}
}

// Work completion flags (enum ib_wc_flags).
const (
	wcGRH     = 1
	wcWithImm = 2
)

func sendCompletionOpcode(op uverbs.WROpcode) uverbs.WCOpcode {
	switch op {
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		return uverbs.WCRDMAWrite
	case uverbs.WRRDMARead:
		return uverbs.WCRDMARead
	}
	return uverbs.WCSend
}

// toErrorLocked moves the queue pair to the error state: its receive queue
// is flushed now, its send queue by the requester.
func (q *qp) toErrorLocked() {
	q.attr.State = errS
	q.wakeLocked()
	q.flushRecvLocked()
	q.kickLocked()
}

// flushLocked completes every work request of both queues with a flush
// error.
func (q *qp) flushLocked() {
	for {
		slot, ok := q.sq.head()
		if !ok {
			break
		}
		w := readSendWQE(slot, q.caps.MaxSendSGE)
		q.sq.advance()
		q.scq.post(uverbs.WC{WRID: w.id, Status: uverbs.WCWRFlushErr, QPNum: q.qpn}, true)
	}
	q.flushRecvLocked()
}

func (q *qp) flushRecvLocked() {
	for {
		slot, ok := q.rq.head()
		if !ok {
			return
		}
		id := binary.NativeEndian.Uint64(slot[recvWRID:])
		q.rq.advance()
		q.rcq.post(uverbs.WC{WRID: id, Status: uverbs.WCWRFlushErr, QPNum: q.qpn}, true)
	}
}

// deliver carries a request to the queue pair av and destQPN name, and
// its answer back, through the fabric's impairments.
func (f *Fabric) deliver(from *qp, req *request, av uverbs.AddressVector, port uint8, destQPN uint32, attempt int,
	wake chan struct{}) (reply, bool) {
	src := from.d
	if !src.portActive(port) {
		return reply{}, false
	}
	dst, dstPort := f.route(av)
	p := Packet{From: src, To: dst, SrcQPN: from.qpn, DstQPN: destQPN, PSN: req.psn, Opcode: req.opcode,
		Length: len(req.payload), Attempt: attempt}
	if !f.pass(p, wake) || dst == nil || !dst.portActive(dstPort) {
		return reply{}, false
	}
	dst.tab.RLock()
	to := dst.qps[destQPN]
	dst.tab.RUnlock()
	if to == nil {
		return reply{}, false
	}
	rep := to.respond(req, dstPort)
	if rep.ans == ansNone {
		return rep, false
	}
	p.Response = true
	p.From, p.To, p.SrcQPN, p.DstQPN = dst, src, destQPN, from.qpn
	p.Length = len(rep.data)
	if !f.pass(p, wake) {
		return reply{}, false
	}
	return rep, true
}

// pass applies the impairment to a packet: false when it is lost.
func (f *Fabric) pass(p Packet, wake chan struct{}) bool {
	imp := f.impairment(p)
	if imp.Drop || imp.Stuck {
		return false
	}
	if imp.Delay > 0 {
		t := time.NewTimer(imp.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-wake:
			return false
		}
	}
	return true
}

// route finds the device and port an address names: by GID with a GRH,
// else by LID.
func (f *Fabric) route(av uverbs.AddressVector) (*Device, uint8) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, d := range f.devices {
		if d.gone.Load() {
			continue
		}
		d.tab.RLock()
		for i, p := range d.ports {
			if av.IsGlobal != 0 {
				for _, g := range p.GIDs {
					if g.GID == av.DGID {
						d.tab.RUnlock()
						return d, uint8(i + 1)
					}
				}
			} else if p.LID != 0 && p.LID == av.DLID {
				d.tab.RUnlock()
				return d, uint8(i + 1)
			}
		}
		d.tab.RUnlock()
	}
	return nil, 0
}

// dataPort returns a copy of port num, for the data path.
func (d *Device) dataPort(num uint8) (Port, bool) {
	d.tab.RLock()
	defer d.tab.RUnlock()
	p, ok := d.port(num)
	if !ok {
		return Port{}, false
	}
	return *p, true
}

// respond is the responder (rxe_resp.c): it checks and executes a request
// addressed to q, arriving on port.
func (q *qp) respond(req *request, port uint8) reply {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := &q.attr
	switch {
	case q.destroyed:
		return reply{}
	case a.State == errS:
		q.flushRecvLocked()
		return reply{}
	case a.State != rtr && a.State != rts && a.State != sqd:
		return reply{} // not ready to receive: dropped
	case q.typ != req.from.typ || port != a.PortNum:
		return reply{}
	}
	// The packet must come from where the queue pair is connected to.
	if a.AV.IsGlobal != 0 && req.srcGID != a.AV.DGID || a.AV.IsGlobal == 0 && req.srcLID != a.AV.DLID {
		return reply{}
	}
	if diff := psnDiff(req.psn, a.RQPSN); diff != 0 {
		if diff > 0 {
			return reply{ans: ansPSN}
		}
		// A retry of what was done: SEND and WRITE are acknowledged
		// again (with the last PSN done, rxe's duplicate_request),
		// READ read again if it is one of the recent ones.
		if req.opcode == uverbs.WRRDMARead {
			return q.readAgain(req)
		}
		return reply{ans: ansACK, psn: (q.ackPSN - 1) & psnMask}
	}
	if q.typ == ib.QPTypeUC {
		return q.respondUC(req)
	}
	return q.respondRC(req)
}

// psnDiff compares 24-bit PSNs: <0 when a is before b.
func psnDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// readRes is a READ the responder did, which it answers again when the
// requester retries it (struct resp_res).
type readRes struct {
	first, last uint32
	rkey        uint32
	addr        uint64
	length      uint32
}

func (q *qp) readAgain(req *request) reply {
	for _, r := range q.reads {
		if psnDiff(req.psn, r.first) >= 0 && psnDiff(req.psn, r.last) <= 0 && req.rkey == r.rkey &&
			req.raddr >= r.addr && req.raddr+uint64(req.length) <= r.addr+uint64(r.length) {
			m := q.d.lookupMR(req.rkey, q.pd, uverbs.AccessRemoteRead, req.raddr, uint64(req.length), true)
			if req.length > 0 && m == nil {
				return reply{}
			}
			rep := q.readData(m, req)
			rep.psn = r.last
			return rep
		}
	}
	return reply{} // no such resource: class D, dropped
}

func (q *qp) readData(m *mr, req *request) reply {
	if req.length == 0 {
		return reply{ans: ansACK, data: []byte{}}
	}
	data, err := copyFromUser(m.user(req.raddr), int(req.length))
	if err != nil {
		return reply{ans: ansRemAccess}
	}
	return reply{ans: ansACK, data: data}
}

// hasRecv is true for the requests that consume a receive.
func hasRecv(op uverbs.WROpcode) bool {
	return op == uverbs.WRSend || op == uverbs.WRSendWithImm || op == uverbs.WRRDMAWriteWithImm
}

func (q *qp) respondRC(req *request) reply {
	a := &q.attr
	// check_op_valid: the queue pair's access rights.
	switch {
	case req.opcode == uverbs.WRRDMARead && a.AccessFlags&uverbs.AccessRemoteRead == 0,
		(req.opcode == uverbs.WRRDMAWrite || req.opcode == uverbs.WRRDMAWriteWithImm) && a.AccessFlags&uverbs.AccessRemoteWrite == 0:
		return q.classC(ansInvReq, 0, nil)
	}
	// check_resource: a receive for SEND and WRITE with immediate;
	// responder resources for READ.
	var recv []byte
	if hasRecv(req.opcode) {
		slot, ok := q.rq.head()
		if !ok {
			return reply{ans: ansRNR, rnrTimer: a.MinRNRTimer}
		}
		recv = slot
	}
	if req.opcode == uverbs.WRRDMARead && a.MaxDestRdAtomic == 0 {
		return q.classC(ansInvReq, uverbs.WCRemInvReqErr, recv)
	}
	// check_length: the requester cuts a message into packets of its
	// MTU, which this side checks against its own.
	if mtu := a.PathMTU.Bytes(); req.opcode != uverbs.WRRDMARead &&
		((req.length <= uint32(req.mtu) && req.length > uint32(mtu)) || (req.length > uint32(req.mtu) && req.mtu != mtu)) {
		return q.classC(ansInvReq, uverbs.WCRemInvReqErr, recv)
	}
	// check_rkey.
	var m *mr
	if req.opcode != uverbs.WRSend && req.opcode != uverbs.WRSendWithImm && req.length > 0 {
		access := uverbs.AccessRemoteWrite
		if req.opcode == uverbs.WRRDMARead {
			access = uverbs.AccessRemoteRead
		}
		if m = q.d.lookupMR(req.rkey, q.pd, access, req.raddr, uint64(req.length), true); m == nil {
			return q.classC(ansRemAccess, uverbs.WCRemAccessErr, recv)
		}
	}
	// execute.
	var rep reply
	switch req.opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm:
		if status := q.receive(recv, req.payload); status != uverbs.WCSuccess {
			return q.classC(ansRemOp, status, recv)
		}
		rep = reply{ans: ansACK}
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		if m != nil && copyToUser(m.user(req.raddr), req.payload) != nil {
			return q.classC(ansRemAccess, uverbs.WCRemAccessErr, recv)
		}
		rep = reply{ans: ansACK}
	case uverbs.WRRDMARead:
		if rep = q.readData(m, req); rep.ans != ansACK {
			return q.classC(rep.ans, 0, nil)
		}
	}
	last := (req.psn + req.packets - 1) & psnMask
	a.RQPSN = (last + 1) & psnMask
	q.ackPSN = a.RQPSN
	rep.psn = last
	if req.opcode == uverbs.WRRDMARead {
		q.reads = append(q.reads, readRes{first: req.psn, last: last, rkey: req.rkey, addr: req.raddr, length: req.length})
		if n := max(int(a.MaxDestRdAtomic), 1); len(q.reads) > n {
			q.reads = q.reads[len(q.reads)-n:]
		}
	}
	if recv != nil {
		wc := uverbs.WC{WRID: binary.NativeEndian.Uint64(recv[recvWRID:]), Status: uverbs.WCSuccess, Opcode: uverbs.WCRecv,
			ByteLen: req.length, QPNum: q.qpn, WCFlags: wcGRH, PortNum: a.PortNum}
		if req.opcode == uverbs.WRRDMAWriteWithImm {
			wc.Opcode = uverbs.WCOpcode(129) // IB_WC_RECV_RDMA_WITH_IMM
		}
		if req.opcode == uverbs.WRSendWithImm || req.opcode == uverbs.WRRDMAWriteWithImm {
			wc.WCFlags |= wcWithImm
			wc.Ex = req.imm
		}
		q.rq.advance()
		if !q.rcq.post(wc, req.solicited) {
			q.toErrorLocked() // CQ overflow: class G
			return reply{}
		}
	}
	return rep
}

// respondUC executes an unreliable connected request: no answers, errors
// drop the message.
func (q *qp) respondUC(req *request) reply {
	a := &q.attr
	a.RQPSN = (req.psn + req.packets) & psnMask
	switch req.opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm:
		slot, ok := q.rq.head()
		if !ok || q.receive(slot, req.payload) != uverbs.WCSuccess {
			return reply{ans: ansACK}
		}
		wc := uverbs.WC{WRID: binary.NativeEndian.Uint64(slot[recvWRID:]), Opcode: uverbs.WCRecv, ByteLen: req.length,
			QPNum: q.qpn, WCFlags: wcGRH, PortNum: a.PortNum}
		if req.opcode == uverbs.WRSendWithImm {
			wc.WCFlags |= wcWithImm
			wc.Ex = req.imm
		}
		q.rq.advance()
		q.rcq.post(wc, req.solicited)
	case uverbs.WRRDMAWrite:
		if m := q.d.lookupMR(req.rkey, q.pd, uverbs.AccessRemoteWrite, req.raddr, uint64(req.length), true); m != nil {
			copyToUser(m.user(req.raddr), req.payload)
		}
	}
	return reply{ans: ansACK} // the requester completes UC sends without waiting
}

// receive scatters a SEND's payload into the receive at the queue's head.
// A payload larger than the receive's buffers, or an SGE that names no
// local memory region with local write access, is a malformed request to
// rxe: LOC_QP_OP_ERR here, REM_OP_ERR at the requester.
func (q *qp) receive(slot []byte, payload []byte) uverbs.WCStatus {
	ne := binary.NativeEndian
	n := ne.Uint32(slot[recvNumSGE:])
	if n > q.caps.MaxRecvSGE || rxeRecvWQESize+int(n)*sgeSize > len(slot) {
		return uverbs.WCLocQPOpErr
	}
	sgl := readSGL(slot[rxeRecvWQESize:], n)
	var room uint64
	for _, s := range sgl {
		room += uint64(s.Length)
	}
	if uint64(len(payload)) > room {
		return uverbs.WCLocQPOpErr
	}
	return q.scatter(sgl, payload, uverbs.AccessLocalWrite, uverbs.WCLocQPOpErr)
}

// classC answers a request with a NAK and puts the queue pair in the
// error state; a receive the request consumed completes with status.
func (q *qp) classC(ans answer, status uverbs.WCStatus, recv []byte) reply {
	if recv != nil {
		q.rq.advance()
		q.rcq.post(uverbs.WC{WRID: binary.NativeEndian.Uint64(recv[recvWRID:]), Status: status, QPNum: q.qpn}, true)
	}
	q.toErrorLocked()
	return reply{ans: ans}
}
