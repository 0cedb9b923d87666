package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// Path is a path record (struct sa_path_rec): on RoCE the one the kernel
// built from the IP route, with the GIDs of the two addresses, the
// traffic class (the whole ToS byte), the hop limit of the route, the
// path MTU the netdev's MTU allows and the packet lifetime that sets the
// queue pair's ACK timeout.
type Path struct {
	SGID, DGID   [16]byte
	SLID, DLID   uint16 // InfiniBand; 0 on RoCE
	FlowLabel    uint32 // 20 bits
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	PKey         uint16
	MTU          ib.MTU
	// Rate is the IB static rate code (enum ib_rate: 3 is 2.5 Gb/s ...).
	Rate           uint8
	PacketLifeTime uint8 // 4.096 µs × 2^PacketLifeTime
	Reversible     bool
	RawTraffic     bool
	NumbPath       uint8
	Preference     uint8
	// The selectors qualify MTU, Rate and PacketLifeTime in SA queries
	// (0 greater than, 1 less than, 2 exactly, 3 largest available).
	MTUSelector, RateSelector, PacketLifeTimeSelector uint8
}

// Route is what QUERY_ROUTE answers: the ID's addresses, device and
// paths (the primary first; RoCE has one).
type Route struct {
	Src, Dst netip.AddrPort
	Device   DevicePort
	Paths    []Path
}

// QueryRoute returns the ID's route (QUERY_ROUTE), readable once the
// route is resolved: the path's traffic class and hop limit are what the
// queue pair's address vector gets.
func (id *ID) QueryRoute() (Route, error) {
	var r queryRouteResp
	resp := make([]byte, binary.Size(r))
	if err := id.ch.execute(cmdQueryRoute, id.handle, &queryReq{ID: id.handle}, resp); err != nil {
		return Route{}, err
	}
	if _, err := binary.Decode(resp, binary.NativeEndian, &r); err != nil {
		return Route{}, err
	}
	route := Route{
		Src:    decodeSockaddr(r.SrcAddr[:]),
		Dst:    decodeSockaddr(r.DstAddr[:]),
		Device: DevicePort{Index: r.IBDevIndex, NodeGUID: binary.BigEndian.Uint64(r.NodeGUID[:]), Port: r.PortNum},
	}
	for i := range min(int(r.NumPaths), len(r.IBRoute)) {
		route.Paths = append(route.Paths, r.IBRoute[i].path())
	}
	return route, nil
}

// path unpacks struct ib_user_path_rec.
func (p *userPathRec) path() Path {
	return Path{
		SGID: p.SGID, DGID: p.DGID,
		SLID: binary.BigEndian.Uint16(p.SLID[:]), DLID: binary.BigEndian.Uint16(p.DLID[:]),
		FlowLabel: binary.BigEndian.Uint32(p.FlowLabel[:]), HopLimit: p.HopLimit, TrafficClass: p.TrafficClass,
		SL: p.SL, PKey: binary.BigEndian.Uint16(p.PKey[:]), MTU: ib.MTU(p.MTU), Rate: p.Rate,
		PacketLifeTime: p.PacketLifeTime, Reversible: p.Reversible != 0, RawTraffic: p.RawTraffic != 0,
		NumbPath: p.NumbPath, Preference: p.Preference, MTUSelector: p.MTUSelector, RateSelector: p.RateSelector,
		PacketLifeTimeSelector: p.PacketLifeTimeSelector,
	}
}

// Path record flags of QUERY PATH (IB_PATH_*).
const (
	PathGMP            = 1 << 0
	PathPrimary        = 1 << 1
	PathAlternate      = 1 << 2
	PathOutbound       = 1 << 3
	PathInboundReverse = 1 << 5
)

// pathRecDataSize is struct ib_path_rec_data: flags, reserved, and a
// 64-byte packed SA PathRecord.
const (
	pathRecDataSize   = 72
	packedPathRecSize = 64
	maxQueriedPaths   = 3
)

// PathRecord is one path of QUERY PATH: its flags (Path*) and the path.
type PathRecord struct {
	Flags uint32
	Path  Path
}

// QueryPath returns the ID's paths as the SA packs them (QUERY, option
// PATH), what librdmacm's rdma_query_route reads. On RoCE the kernel
// packs the Ethernet half of its path record's union where the IB fields
// go: there SLID, DLID and RawTraffic are bytes of a MAC address
// (QueryRoute's are 0 and false).
func (id *ID) QueryPath() ([]PathRecord, error) {
	// The kernel copies a record only while more than one record's room
	// is left: give it room for one beyond the most it has (two).
	resp := make([]byte, 8+pathRecDataSize*maxQueriedPaths)
	if err := id.ch.execute(cmdQuery, id.handle, &queryReq{ID: id.handle, Option: queryPath}, resp); err != nil {
		return nil, err
	}
	n := int(binary.NativeEndian.Uint32(resp))
	if n > maxQueriedPaths-1 {
		return nil, fmt.Errorf("rdmacm: QUERY PATH answered %d paths, at most %d fit", n, maxQueriedPaths-1)
	}
	var out []PathRecord
	for i := range n {
		rec := resp[8+i*pathRecDataSize:][:pathRecDataSize]
		out = append(out, PathRecord{Flags: binary.NativeEndian.Uint32(rec), Path: unpackPath(rec[8:])})
	}
	return out, nil
}

// unpackPath reads a packed SA PathRecord (IBA 15.2.5.16, the kernel's
// path_rec_table): big-endian, bit fields from each word's top.
func unpackPath(b []byte) Path {
	var p Path
	copy(p.DGID[:], b[8:24])
	copy(p.SGID[:], b[24:40])
	p.DLID = binary.BigEndian.Uint16(b[40:])
	p.SLID = binary.BigEndian.Uint16(b[42:])
	w11 := binary.BigEndian.Uint32(b[44:])
	p.RawTraffic = w11>>31 != 0
	p.FlowLabel = w11 >> 8 & 0xfffff
	p.HopLimit = uint8(w11)
	p.TrafficClass = b[48]
	p.Reversible = b[49]>>7 != 0
	p.NumbPath = b[49] & 0x7f
	p.PKey = binary.BigEndian.Uint16(b[50:])
	p.SL = b[53] & 0xf
	p.MTUSelector, p.MTU = b[54]>>6, ib.MTU(b[54]&0x3f)
	p.RateSelector, p.Rate = b[55]>>6, b[55]&0x3f
	p.PacketLifeTimeSelector, p.PacketLifeTime = b[56]>>6, b[56]&0x3f
	p.Preference = b[57]
	return p
}

// InitQPAttr returns the attributes that move a queue pair of this
// connection to state (rdma_init_qp_attr): INIT (port, P_Key index,
// access flags), RTR (address vector, path MTU, remote QPN, receive PSN,
// responder resources) or RTS (send PSN, retries, timeout, initiator
// depth), with the mask of those set, ready for uverbs' ModifyQP. RTR
// and RTS are known once the peer answered (CONNECT_RESPONSE on the
// active side, CONNECT_REQUEST on the passive).
func (id *ID) InitQPAttr(state ib.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	var a qpAttr
	resp := make([]byte, binary.Size(a))
	if err := id.ch.execute(cmdInitQPAttr, id.handle, &initQPAttrReq{ID: id.handle, QPState: uint32(state)}, resp); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	if _, err := binary.Decode(resp, binary.NativeEndian, &a); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	attr, mask := a.toUverbs()
	return attr, mask, nil
}

// toUverbs copies an INIT_QP_ATTR answer field by field into MODIFY_QP's
// attributes. Bits above the standard ones (which MODIFY_QP refuses) are
// dropped, as librdmacm drops them.
func (a *qpAttr) toUverbs() (uverbs.QPAttr, uverbs.QPAttrMask) {
	return uverbs.QPAttr{
		State: ib.QPState(a.QPState), CurState: ib.QPState(a.CurQPState), PathMTU: ib.MTU(a.PathMTU),
		PathMigState: uint8(a.PathMigState), QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPN: a.DestQPNum,
		AccessFlags: uverbs.Access(a.QPAccessFlags), PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, SQDraining: a.SQDraining, MaxRdAtomic: a.MaxRdAtomic,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer, PortNum: a.PortNum, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, AltPortNum: a.AltPortNum, AltTimeout: a.AltTimeout,
		AV: a.AHAttr.addressVector(), AltAV: a.AltAHAttr.addressVector(),
		Cap: uverbs.QPCap{MaxSendWR: a.MaxSendWR, MaxRecvWR: a.MaxRecvWR, MaxSendSGE: a.MaxSendSGE,
			MaxRecvSGE: a.MaxRecvSGE, MaxInlineData: a.MaxInlineData},
	}, uverbs.QPAttrMask(a.QPAttrMask) & uverbs.QPAttrAll
}

// addressVector reorders struct ib_uverbs_ah_attr as struct
// ib_uverbs_qp_dest.
func (ah *ahAttr) addressVector() uverbs.AddressVector {
	return uverbs.AddressVector{
		DGID: ah.DGID, FlowLabel: ah.FlowLabel, DLID: ah.DLID, SGIDIndex: ah.SGIDIndex, HopLimit: ah.HopLimit,
		TrafficClass: ah.TrafficClass, SL: ah.SL, SrcPathBits: ah.SrcPathBits, StaticRate: ah.StaticRate,
		IsGlobal: ah.IsGlobal, PortNum: ah.PortNum,
	}
}
