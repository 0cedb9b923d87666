package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// GRHSize is the room a UD receive buffer keeps in front of each payload
// for the packet's network header (sizeof(struct ibv_grh)): whether or not
// a GRH came, the payload starts GRHSize bytes into the buffer.
const GRHSize = 40

// GRH is the network header of a received datagram, as the receive
// buffer's first GRHSize bytes hold it: an InfiniBand GRH or, on RoCE v2,
// the IPv6 header, both in IPv6's layout; on RoCE v2 over IPv4 the IPv4
// header in the last 20 bytes, the first 20 zero (union
// rdma_network_hdr), its addresses given here as IPv4-mapped GIDs.
type GRH struct {
	// IPv4: the header was an IPv4 header (RoCE v2 over IPv4).
	IPv4 bool
	// SGID is the sender's GID, DGID the one the datagram was sent to.
	SGID, DGID   [16]byte
	TrafficClass uint8  // the IPv4 TOS
	FlowLabel    uint32 // 20 bits; 0 for IPv4
	HopLimit     uint8  // the IPv4 TTL
	// PayloadLength is what follows the header on the wire: the
	// transport headers, the payload and the ICRC (IPv6's payload length,
	// IPv4's total length less its header).
	PayloadLength uint16
	// NextHeader is the protocol after the header: 17 (UDP) on RoCE v2,
	// 0x1b (the IBA transport) for an InfiniBand GRH.
	NextHeader uint8
}

// WCGRH is the work completion flag (IBV_WC_GRH) saying that the receive
// buffer's first GRHSize bytes hold the datagram's network header.
const WCGRH = 1

// ErrNoGRH means a receive buffer's first GRHSize bytes are not a network
// header: the datagram came without a GRH (InfiniBand within a subnet),
// or the buffer was not written.
var ErrNoGRH = errors.New("uverbs: no GRH in the receive buffer")

// ParseGRH reads the network header rxe (and any RoCE or InfiniBand
// device) writes in front of a UD payload. It checks what it can of a
// header the sender controls: the IPv4 form's version, header length and
// total length, the IPv6 form's version; a header that is neither is
// ErrNoGRH. The IPv4 checksum is not checked: rxe copies the header of a
// datagram to itself (loopback) before the IP stack computes it, as 0.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHSize {
		return GRH{}, fmt.Errorf("uverbs: a GRH needs %d bytes, the buffer has %d", GRHSize, len(b))
	}
	b = b[:GRHSize]
	be := binary.BigEndian
	if b[0]>>4 == 6 {
		g := GRH{TrafficClass: uint8(be.Uint16(b[0:]) >> 4), FlowLabel: be.Uint32(b[0:]) & 0xfffff,
			PayloadLength: be.Uint16(b[4:]), NextHeader: b[6], HopLimit: b[7]}
		copy(g.SGID[:], b[8:24])
		copy(g.DGID[:], b[24:40])
		return g, nil
	}
	if [20]byte(b[:20]) != [20]byte{} {
		return GRH{}, ErrNoGRH
	}
	ip := b[20:]
	switch {
	case ip[0] == 0:
		return GRH{}, ErrNoGRH
	case ip[0]>>4 != 4 || ip[0]&0xf != 5:
		return GRH{}, fmt.Errorf("uverbs: not an IPv4 header of 20 bytes in the GRH (version %d, %d words)", ip[0]>>4, ip[0]&0xf)
	}
	total := be.Uint16(ip[2:])
	if total < 20 {
		return GRH{}, fmt.Errorf("uverbs: the IPv4 header in the GRH says %d bytes in all, less than itself", total)
	}
	g := GRH{IPv4: true, TrafficClass: ip[1], HopLimit: ip[8], NextHeader: ip[9], PayloadLength: total - 20}
	g.SGID = ipv4GID([4]byte(ip[12:16]))
	g.DGID = ipv4GID([4]byte(ip[16:20]))
	return g, nil
}

// ipv4GID is the IPv4-mapped GID of an IPv4 address.
func ipv4GID(a [4]byte) [16]byte {
	var g [16]byte
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], a[:])
	return g
}

// ipChecksum is the Internet checksum of b: 0 over a header whose
// checksum field is right (AppendGRH writes one).
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// AppendGRH appends the GRHSize bytes a receive buffer gets for a datagram
// with header g: the IPv4 form for IPv4 (checksum computed), else the
// IPv6 form. It is what rxe writes; fakes and tests use it.
func AppendGRH(b []byte, g GRH) []byte {
	be := binary.BigEndian
	var h [GRHSize]byte
	if g.IPv4 {
		ip := h[20:]
		ip[0], ip[1] = 0x45, g.TrafficClass
		be.PutUint16(ip[2:], g.PayloadLength+20)
		ip[6] = 0x40 // don't fragment, as rxe's prepare4
		ip[8], ip[9] = g.HopLimit, g.NextHeader
		copy(ip[12:16], g.SGID[12:])
		copy(ip[16:20], g.DGID[12:])
		be.PutUint16(ip[10:], ipChecksum(ip[:20]))
		return append(b, h[:]...)
	}
	be.PutUint32(h[0:], 6<<28|uint32(g.TrafficClass)<<20|g.FlowLabel&0xfffff)
	be.PutUint16(h[4:], g.PayloadLength)
	h[6], h[7] = g.NextHeader, g.HopLimit
	copy(h[8:24], g.SGID[:])
	copy(h[24:40], g.DGID[:])
	return append(b, h[:]...)
}
