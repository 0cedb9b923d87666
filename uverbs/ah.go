package uverbs

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"github.com/grdma/grdma/ib"
)

// Unreliable datagram (UD) queue pairs send each message to an address
// handle (AH) named in the work request, with the remote queue pair
// number and Q_Key; they are not connected to anyone. On RoCE the address
// is global (a GRH: destination GID, source GID index, hop limit, traffic
// class). The receiver finds 40 bytes in front of every payload: the GRH,
// or on RoCE v2 over IPv4 the IPv4 header in its last 20 bytes
// (ParseGRH).

// GlobalRoute is struct ib_uverbs_global_route: the GRH part of an
// address.
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
}

// AHAttr is struct ib_uverbs_ah_attr (ibv_ah_attr): where datagrams sent
// with the address handle go. On RoCE IsGlobal must be 1 and GRH name a
// RoCE v2 source GID of PortNum; on InfiniBand DLID is the destination's
// LID.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
	Reserved    uint8
}

// createAHReq is struct ib_uverbs_create_ah.
type createAHReq struct {
	Response   uint64
	UserHandle uint64
	PDHandle   uint32
	Reserved   uint32
	Attr       AHAttr
}

// createAHResp is struct ib_uverbs_create_ah_resp.
type createAHResp struct{ AHHandle uint32 }

// destroyAHReq is struct ib_uverbs_destroy_ah; DESTROY_AH has no
// response.
type destroyAHReq struct{ AHHandle uint32 }

func (r *createAHReq) setResponse(addr uint64) { r.Response = addr }

// AH is an address handle (ibv_ah). One made by CreateRxeAH also carries
// what rxe's send work requests need.
type AH struct {
	Handle uint32
	Attr   AHAttr
	rxe    *rxeAH
}

// CreateAH creates an address handle in pd (ibv_create_ah). driverOut
// receives the driver's response data (rxe: its AH number). Use
// CreateRxeAH on rxe.
func (c *Context) CreateAH(pd PD, attr AHAttr, driverOut []byte) (AH, error) {
	req := createAHReq{UserHandle: c.userHandles.Add(1), PDHandle: pd.Handle, Attr: attr}
	var resp createAHResp
	if err := c.execute(cmdCreateAH, &req, nil, &resp, driverOut); err != nil {
		return AH{}, err
	}
	return AH{Handle: resp.AHHandle, Attr: attr}, nil
}

// DestroyAH destroys an address handle (ibv_destroy_ah).
func (c *Context) DestroyAH(ah AH) error {
	return c.execute(cmdDestroyAH, &destroyAHReq{AHHandle: ah.Handle}, nil, nil, nil)
}

// rxe's address handles (rdma_user_rxe.h). Since Linux 5.10 CREATE_AH
// answers an AH number (struct rxe_create_ah_resp), which a UD send
// work request names and the kernel looks up. Before, the request carried
// the whole address vector (struct rxe_av) that librxe builds: network
// type, GRH, and the source and destination GIDs as socket addresses.
// CreateRxeAH builds both, as librxe's rxe_create_av does, and a send
// carries both; the kernel uses the number when there is one.

// rxeCreateAHResp is struct rxe_create_ah_resp, CREATE_AH's driver
// response data.
type rxeCreateAHResp struct {
	AHNum    uint32
	Reserved uint32
}

// rxeGlobalRoute is struct rxe_global_route.
type rxeGlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Pad          uint8 // the struct's tail padding (union rxe_gid is 8-aligned)
}

// rxeAV is struct rxe_av. SGIDAddr and DGIDAddr are each a union of
// struct sockaddr_in and struct sockaddr_in6 (rxeSockaddr).
type rxeAV struct {
	PortNum     uint8
	NetworkType uint8
	DMAC        [6]byte
	GRH         rxeGlobalRoute
	SGIDAddr    [28]byte
	DGIDAddr    [28]byte
}

// rxe network types (RXE_NETWORK_TYPE_*).
const (
	rxeNetworkIPv4 = 1
	rxeNetworkIPv6 = 2
)

// rxeAH is what an rxe UD send work request carries of its address
// handle.
type rxeAH struct {
	num uint32 // 0: the kernel gave none; the av is used
	av  rxeAV
}

// CreateRxeAH creates an address handle on an rxe device. It builds the
// address vector as librxe does (rxe_create_av): the source GID is
// attr.GRH.SGIDIndex of the port (QUERY_GID_TABLE), the network type IPv4
// for an IPv4-mapped destination GID, else IPv6; the destination MAC is
// the port's own when the destination GID is one of the device's (rxe
// uses it only to recognise a datagram to itself: the IP stack resolves
// other neighbours). The vector is only needed by kernels before 5.10,
// which answer no AH number; there a GID table that cannot be read is an
// error, elsewhere the vector is left as far as it could be filled.
func (c *Context) CreateRxeAH(pd PD, attr AHAttr) (AH, error) {
	var out [unsafe.Sizeof(rxeCreateAHResp{})]byte
	ah, err := c.CreateAH(pd, attr, out[:])
	if err != nil {
		return AH{}, err
	}
	var resp rxeCreateAHResp
	decodeDriverData(out[:], &resp)
	r := &rxeAH{num: resp.AHNum}
	if err := c.fillRxeAV(&r.av, attr); err != nil && r.num == 0 {
		return AH{}, errors.Join(err, c.DestroyAH(ah))
	}
	ah.rxe = r
	return ah, nil
}

// AVOnly returns the address handle as a kernel before Linux 5.10 gave
// it, without an AH number: rxe's send work requests then carry only the
// address vector, which the kernel uses as it is. It proves the vector
// on a newer kernel.
func (ah AH) AVOnly() AH {
	if ah.rxe != nil {
		r := *ah.rxe
		r.num = 0
		ah.rxe = &r
	}
	return ah
}

// RxeAHNum is the AH number rxe answered (0: none, a kernel before 5.10).
func (ah AH) RxeAHNum() uint32 {
	if ah.rxe == nil {
		return 0
	}
	return ah.rxe.num
}

// fillRxeAV fills the address vector of attr (librxe's rxe_create_av).
func (c *Context) fillRxeAV(av *rxeAV, attr AHAttr) error {
	g := attr.GRH
	*av = rxeAV{PortNum: attr.PortNum, GRH: rxeGlobalRoute{DGID: g.DGID, FlowLabel: g.FlowLabel,
		SGIDIndex: g.SGIDIndex, HopLimit: g.HopLimit, TrafficClass: g.TrafficClass}}
	av.NetworkType = rxeNetworkIPv6
	if isIPv4Mapped(g.DGID) {
		av.NetworkType = rxeNetworkIPv4
	}
	gidToSockaddr(&av.DGIDAddr, g.DGID)
	port, err := c.QueryPort(attr.PortNum)
	if err != nil {
		return err
	}
	// rxe's driver ID: a node found in sysfs names none.
	entries, err := c.QueryGIDTable(DriverIDRXE, max(int(port.GIDTblLen), 1)*max(int(c.portCount()), 1))
	if err != nil {
		return err
	}
	var src, dst *GIDEntry
	for i, e := range entries {
		if e.Port == uint32(attr.PortNum) && e.Index == uint32(g.SGIDIndex) {
			src = &entries[i]
		}
		if e.GID == g.DGID {
			dst = &entries[i]
		}
	}
	if src == nil {
		return fmt.Errorf("uverbs: %s port %d has no GID %d for the address handle's source", c.name, attr.PortNum, g.SGIDIndex)
	}
	gidToSockaddr(&av.SGIDAddr, src.GID)
	if dst != nil && dst.NetdevIfindex != 0 {
		if ifi, err := net.InterfaceByIndex(int(dst.NetdevIfindex)); err == nil && len(ifi.HardwareAddr) == 6 {
			copy(av.DMAC[:], ifi.HardwareAddr)
		}
	}
	return nil
}

// portCount is the device's number of ports (1 when QUERY_DEVICE fails:
// the GID table request is then sized for one port).
func (c *Context) portCount() uint8 {
	if a, err := c.QueryDevice(); err == nil {
		return a.PhysPortCnt
	}
	return 1
}

// isIPv4Mapped reports whether a GID is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d), the GID of an IPv4 address on RoCE v2.
func isIPv4Mapped(g [16]byte) bool {
	return [12]byte(g[:12]) == [12]byte{10: 0xff, 11: 0xff}
}

// gidToSockaddr writes a GID as librxe's rdma_gid2ip does: a struct
// sockaddr_in with the IPv4 address of an IPv4-mapped GID, else a struct
// sockaddr_in6. librxe leaves the IPv4 family 0; it is set here (the
// kernel reads only the address and the vector's network type).
func gidToSockaddr(sa *[28]byte, g [16]byte) {
	*sa = [28]byte{}
	if isIPv4Mapped(g) {
		*(*uint16)(unsafe.Pointer(&sa[0])) = afInet
		copy(sa[4:8], g[12:])
		return
	}
	*(*uint16)(unsafe.Pointer(&sa[0])) = afInet6
	copy(sa[8:24], g[:])
}

// Address families of the socket addresses (host byte order).
const (
	afInet  = 2
	afInet6 = 10
)

// UD queue pairs' attributes for each step to RTS (ib_modify_qp_is_ok):
// INIT takes the P_Key index, port and Q_Key; RTR nothing more; RTS the
// send PSN.
const (
	QPAttrsResetToInitUD = QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey
	QPAttrsInitToRTRUD   = QPAttrState
	QPAttrsRTRToRTSUD    = QPAttrState | QPAttrSQPSN
)

// ConnectUD brings a UD queue pair from RESET to RTS as ibv_ud_pingpong
// does: INIT on port with P_Key index 0 and qkey, RTR, RTS with send PSN
// psn.
func (c *Context) ConnectUD(qp QP, port uint8, qkey, psn uint32) error {
	steps := []struct {
		attr QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: ib.QPStateInit, PortNum: port, QKey: qkey}, QPAttrsResetToInitUD},
		{QPAttr{State: ib.QPStateRTR}, QPAttrsInitToRTRUD},
		{QPAttr{State: ib.QPStateRTS, SQPSN: psn & 0xffffff}, QPAttrsRTRToRTSUD},
	}
	for _, s := range steps {
		if err := c.ModifyQP(qp, &s.attr, s.mask); err != nil {
			return fmt.Errorf("to %s: %w", s.attr.State, err)
		}
	}
	return nil
}
