package uverbstest

import (
	"encoding/binary"
	"syscall"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// Unreliable datagrams: address handles (CREATE_AH with rxe's AH number),
// UD queue pairs whose send work requests name an AH number or carry the
// whole address vector (struct rxe_av, as kernels before 5.10 take it),
// and delivery by destination GID, queue pair number and Q_Key (as sent:
// rxe does not replace one with its high bit set), without
// acknowledgement: a datagram that finds no queue pair, a wrong Q_Key or
// no receive is dropped, and its send completes all the same; one larger
// than the receive is dropped too (6.12), or fails the receive and the
// queue pair (6.1; Config.ShortReceiveFails). The receiver gets the network header in the first 40 bytes
// of its buffer: the IPv4 header in the last 20 (union
// rdma_network_hdr) for IPv4-mapped GIDs, else an IPv6 header.

// ah is an address handle.
type ah struct {
	handle uint32
	pd     *pd
	attr   ahAttr
	num    uint32 // rxe's AH number, 0 for a client that took none
}

func (f *file) createAH(req []byte, out response) error {
	var r createAHReq
	decode(req, &r)
	d := f.d
	p, ok := object[*pd](f, r.PDHandle)
	if !ok {
		return syscall.EINVAL
	}
	port, ok := d.port(r.Attr.PortNum)
	if !ok {
		return syscall.EINVAL
	}
	// rdma_check_ah_attr and rxe_av_chk_attr: RoCE needs a GRH whose
	// source is a RoCE v2 GID of the port.
	if r.Attr.IsGlobal == 0 {
		if port.LinkLayer == ib.LinkLayerEthernet {
			return syscall.EINVAL
		}
	} else if g, ok := portGID(port, r.Attr.SGIDIndex); !ok {
		return syscall.ENODATA // rdma_get_gid_attr: no such entry
	} else if port.LinkLayer == ib.LinkLayerEthernet && g.Type != uverbs.GIDTypeRoCEv2 {
		return syscall.EINVAL
	}
	a := &ah{pd: p, attr: r.Attr}
	d.tab.Lock()
	for d.ahs[d.nextAH] != nil || d.nextAH == 0 {
		d.nextAH = (d.nextAH + 1) & 0xffffff
	}
	a.num = d.nextAH
	d.nextAH = (d.nextAH + 1) & 0xffffff
	d.ahs[a.num] = a
	d.tab.Unlock()
	a.handle = f.newHandle(a)
	p.users++
	// rxe answers its AH number to a client that left room for it.
	var driver []byte
	if out.driverLen >= 8 {
		driver = binary.NativeEndian.AppendUint32(driver, a.num)
		driver = append(driver, 0, 0, 0, 0)
	}
	if err := out.write(&struct{ AHHandle uint32 }{a.handle}, true); err != nil {
		f.dropAH(a)
		return err
	}
	if driver != nil {
		if err := out.driver(driver); err != nil {
			f.dropAH(a)
			return err
		}
	}
	return nil
}

func (f *file) destroyAH(req []byte, _ response) error {
	var r handleReq
	decode(req, &r)
	a, ok := object[*ah](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	f.dropAH(a)
	return nil
}

func (f *file) dropAH(a *ah) {
	d := f.d
	d.tab.Lock()
	delete(d.ahs, a.num)
	d.tab.Unlock()
	delete(f.objects, a.handle)
	a.pd.users--
}

// portGID returns GID idx of a port.
func portGID(p *Port, idx uint8) (uverbs.GIDEntry, bool) {
	for _, g := range p.GIDs {
		if g.Index == uint32(idx) {
			return g, true
		}
	}
	return uverbs.GIDEntry{}, false
}

// datagram is a UD message on its way.
type datagram struct {
	from            *qp
	dstQPN, qkey    uint32
	src, dst        [16]byte // GIDs
	hopLimit, class uint8
	flowLabel       uint32
	payload         []byte
	imm             uint32
	withImm         bool
	solicited       bool
}

// sendUD works off one UD send work request: the datagram is prepared,
// handed to the fabric and the request completed, delivered or not; or,
// stuck (Impairment.Stuck), left at the head of the send queue
// uncompleted: it returns true, and the requester stops until the next
// post. q.mu is held, and held again on return.
func (q *qp) sendUD(slot []byte) (stuck bool) {
	w := readSendWQE(slot, q.caps.MaxSendSGE)
	dg, status := q.prepareUD(&w, slot)
	port := q.attr.PortNum
	q.mu.Unlock()
	if status == uverbs.WCSuccess && dg != nil {
		stuck = !q.d.fab.deliverUD(dg, port)
	}
	q.mu.Lock()
	if stuck || q.attr.State != rts || q.destroyed {
		return stuck
	}
	q.completeSend(&w, status)
	return false
}

// prepareUD checks a UD send work request and resolves its address: the
// AH number's handle (of the queue pair's protection domain), or the
// address vector the request carries (rxe_get_av). q.mu is held.
func (q *qp) prepareUD(w *sendWQE, slot []byte) (*datagram, uverbs.WCStatus) {
	ne := binary.NativeEndian
	if w.badShape || (w.opcode != uverbs.WRSend && w.opcode != uverbs.WRSendWithImm) {
		return nil, uverbs.WCLocQPOpErr
	}
	dg := &datagram{from: q, dstQPN: ne.Uint32(slot[sendUDRemoteQPN:]) & 0xffffff, qkey: ne.Uint32(slot[sendUDRemoteQKey:]),
		imm: w.imm, withImm: w.opcode == uverbs.WRSendWithImm, solicited: w.flags&uverbs.SendSolicited != 0}
	if w.inline != nil {
		dg.payload = w.inline
	} else {
		data, ok := q.gather(w.sgl)
		if !ok {
			return nil, uverbs.WCLocProtErr
		}
		dg.payload = data
	}
	port, ok := q.d.dataPort(q.attr.PortNum)
	if !ok {
		return nil, uverbs.WCLocQPOpErr
	}
	if len(dg.payload) > port.ActiveMTU.Bytes() {
		// C10-93.1.1, as rxe: no packet, and no error either.
		return nil, uverbs.WCSuccess
	}
	if num := ne.Uint32(slot[sendUDAHNum:]); num != 0 {
		q.d.tab.RLock()
		a := q.d.ahs[num]
		q.d.tab.RUnlock()
		if a == nil || a.pd != q.pd {
			return nil, uverbs.WCLocQPOpErr
		}
		g, ok := portGID(&port, a.attr.SGIDIndex)
		if !ok {
			return nil, uverbs.WCLocQPOpErr
		}
		dg.src, dg.dst = g.GID, a.attr.DGID
		dg.hopLimit, dg.class, dg.flowLabel = a.attr.HopLimit, a.attr.TrafficClass, a.attr.FlowLabel
		return dg, uverbs.WCSuccess
	}
	// The address vector: its network type says which socket addresses
	// the kernel sends from and to.
	av := slot[sendUDAV : sendUDAV+avSize]
	switch av[avNetworkType] {
	case 1:
		dg.src = mappedGID([4]byte(av[avSGIDAddr+4:]))
		dg.dst = mappedGID([4]byte(av[avDGIDAddr+4:]))
	case 2:
		dg.src = [16]byte(av[avSGIDAddr+8:])
		dg.dst = [16]byte(av[avDGIDAddr+8:])
	default:
		return nil, uverbs.WCLocQPOpErr
	}
	dg.hopLimit, dg.class, dg.flowLabel = av[avHopLimit], av[avTClass], ne.Uint32(av[avFlowLabel:])
	return dg, uverbs.WCSuccess
}

func mappedGID(a [4]byte) [16]byte {
	var g [16]byte
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], a[:])
	return g
}

func isMapped(g [16]byte) bool { return [12]byte(g[:12]) == [12]byte{10: 0xff, 11: 0xff} }

// deliverUD carries a datagram to the queue pair it names, through the
// fabric's impairments; a delayed one travels on its own, so that later
// datagrams may pass it.
// It returns false when the datagram is stuck in the sender's kernel
// (Impairment.Stuck): not sent.
func (f *Fabric) deliverUD(dg *datagram, port uint8) bool {
	src := dg.from.d
	if !src.portActive(port) {
		return true
	}
	dst, dstPort := f.route(uverbs.AddressVector{IsGlobal: 1, DGID: dg.dst})
	p := Packet{From: src, To: dst, SrcQPN: dg.from.qpn, DstQPN: dg.dstQPN, Opcode: uverbs.WRSend, Length: len(dg.payload)}
	imp := f.impairment(p)
	if imp.Stuck {
		return false
	}
	if imp.Drop || dst == nil {
		return true
	}
	arrive := func() {
		if !dst.portActive(dstPort) {
			return
		}
		dst.tab.RLock()
		to := dst.qps[dg.dstQPN]
		dst.tab.RUnlock()
		if to != nil {
			to.respondUD(dg, dstPort)
		}
	}
	if imp.Delay > 0 {
		time.AfterFunc(imp.Delay, arrive)
		return true
	}
	arrive()
	return true
}

// respondUD receives a datagram addressed to q on port (rxe_rcv's checks,
// then rxe_resp.c's for UD): anything wrong drops it.
func (q *qp) respondUD(dg *datagram, port uint8) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := &q.attr
	switch {
	case q.destroyed || q.typ != ib.QPTypeUD || port != a.PortNum:
		return
	case a.State == errS:
		q.flushRecvLocked()
		return
	case a.State != rtr && a.State != rts && a.State != sqd:
		return
	case dg.qkey != a.QKey:
		return // check_keys
	}
	slot, ok := q.rq.head()
	if !ok {
		return // no receive: class D, dropped
	}
	ne := binary.NativeEndian
	n := ne.Uint32(slot[recvNumSGE:])
	if n > q.caps.MaxRecvSGE || rxeRecvWQESize+int(n)*sgeSize > len(slot) {
		return
	}
	sgl := readSGL(slot[rxeRecvWQESize:], n)
	var room uint64
	for _, s := range sgl {
		room += uint64(s.Length)
	}
	data := append(grhBytes(dg), dg.payload...)
	if uint64(len(data)) > room {
		if !q.d.cfg.ShortReceiveFails {
			return // 6.12: class D, dropped
		}
		// 6.1: the copy into the receive fails (class A): the receive
		// completes in error, the queue pair goes to the error state.
		q.rq.advance()
		q.rcq.post(uverbs.WC{WRID: ne.Uint64(slot[recvWRID:]), Status: uverbs.WCLocQPOpErr, QPNum: q.qpn}, true)
		q.toErrorLocked()
		return
	}
	if q.scatter(sgl, data, uverbs.AccessLocalWrite, uverbs.WCLocQPOpErr) != uverbs.WCSuccess {
		return
	}
	wc := uverbs.WC{WRID: ne.Uint64(slot[recvWRID:]), Status: uverbs.WCSuccess, Opcode: uverbs.WCRecv,
		ByteLen: uint32(len(data)), QPNum: q.qpn, SrcQP: dg.from.qpn, WCFlags: wcGRH, PortNum: a.PortNum}
	if dg.withImm {
		wc.WCFlags |= wcWithImm
		wc.Ex = dg.imm
	}
	q.rq.advance()
	if !q.rcq.post(wc, dg.solicited) {
		q.toErrorLocked() // CQ overflow: class G
	}
}

// grhBytes is the network header rxe writes ahead of a datagram's payload:
// for RoCE v2 over IPv4, 20 zero bytes and the IPv4 header (union
// rdma_network_hdr); over IPv6, the IPv6 header. Its lengths count the
// UDP header, BTH, DETH, the padded payload and the ICRC.
func grhBytes(dg *datagram) []byte {
	be := binary.BigEndian
	n := len(dg.payload)
	transport := 8 + 12 + 8 + n + (-n)&3 + 4
	h := make([]byte, 40)
	if isMapped(dg.src) && isMapped(dg.dst) {
		ip := h[20:]
		ip[0], ip[1] = 0x45, dg.class
		be.PutUint16(ip[2:], uint16(20+transport))
		ip[6], ip[8], ip[9] = 0x40, dg.hopLimit, 17
		copy(ip[12:16], dg.src[12:])
		copy(ip[16:20], dg.dst[12:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(be.Uint16(ip[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		be.PutUint16(ip[10:], ^uint16(sum))
		return h
	}
	be.PutUint32(h, 6<<28|uint32(dg.class)<<20|dg.flowLabel&0xfffff)
	be.PutUint16(h[4:], uint16(transport))
	h[6], h[7] = 17, dg.hopLimit
	copy(h[8:], dg.src[:])
	copy(h[24:], dg.dst[:])
	return h
}
