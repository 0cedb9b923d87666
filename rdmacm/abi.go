package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Kernel ABI numbers from include/uapi/rdma/rdma_user_cm.h.
const (
	// ABIVersion is RDMA_USER_CM_ABI_VERSION, which RDMA netlink's
	// GET_CHARDEV and /sys/class/misc/rdma_cm/abi_version report.
	ABIVersion = 4

	cmdCreateID     = 0  // RDMA_USER_CM_CMD_CREATE_ID
	cmdDestroyID    = 1  // RDMA_USER_CM_CMD_DESTROY_ID
	cmdResolveRoute = 4  // RDMA_USER_CM_CMD_RESOLVE_ROUTE
	cmdQueryRoute   = 5  // RDMA_USER_CM_CMD_QUERY_ROUTE
	cmdConnect      = 6  // RDMA_USER_CM_CMD_CONNECT
	cmdListen       = 7  // RDMA_USER_CM_CMD_LISTEN
	cmdAccept       = 8  // RDMA_USER_CM_CMD_ACCEPT
	cmdReject       = 9  // RDMA_USER_CM_CMD_REJECT
	cmdDisconnect   = 10 // RDMA_USER_CM_CMD_DISCONNECT
	cmdInitQPAttr   = 11 // RDMA_USER_CM_CMD_INIT_QP_ATTR
	cmdGetEvent     = 12 // RDMA_USER_CM_CMD_GET_EVENT
	cmdSetOption    = 14 // RDMA_USER_CM_CMD_SET_OPTION
	cmdNotify       = 15 // RDMA_USER_CM_CMD_NOTIFY
	cmdQuery        = 19 // RDMA_USER_CM_CMD_QUERY
	cmdBind         = 20 // RDMA_USER_CM_CMD_BIND
	cmdResolveAddr  = 21 // RDMA_USER_CM_CMD_RESOLVE_ADDR
)

var commandNames = map[uint32]string{
	cmdCreateID:     "CREATE_ID",
	cmdDestroyID:    "DESTROY_ID",
	cmdResolveRoute: "RESOLVE_ROUTE",
	cmdQueryRoute:   "QUERY_ROUTE",
	cmdConnect:      "CONNECT",
	cmdListen:       "LISTEN",
	cmdAccept:       "ACCEPT",
	cmdReject:       "REJECT",
	cmdDisconnect:   "DISCONNECT",
	cmdInitQPAttr:   "INIT_QP_ATTR",
	cmdGetEvent:     "GET_EVENT",
	cmdSetOption:    "SET_OPTION",
	cmdNotify:       "NOTIFY",
	cmdQuery:        "QUERY",
	cmdBind:         "BIND",
	cmdResolveAddr:  "RESOLVE_ADDR",
}

// QUERY options (RDMA_USER_CM_QUERY_*).
const (
	queryAddr = 0
	queryPath = 1
	queryGID  = 2
)

// SET_OPTION levels and names (RDMA_OPTION_*).
const (
	optionLevelID = 0 // RDMA_OPTION_ID

	optionTOS        = 0 // RDMA_OPTION_ID_TOS, u8
	optionReuseAddr  = 1 // RDMA_OPTION_ID_REUSEADDR, int
	optionAFOnly     = 2 // RDMA_OPTION_ID_AFONLY, int
	optionAckTimeout = 3 // RDMA_OPTION_ID_ACK_TIMEOUT, u8
)

// PortSpace is an RDMA CM port space (enum rdma_ucm_port_space): which
// transport an ID's connections use and the upper half of their IB
// service IDs.
type PortSpace uint16

// Port spaces.
const (
	PortSpaceTCP   PortSpace = 0x0106 // RC queue pairs (RDMA_PS_TCP)
	PortSpaceUDP   PortSpace = 0x0111 // UD queue pairs (RDMA_PS_UDP)
	PortSpaceIPoIB PortSpace = 0x0002 // UD, IPoIB's service IDs
	PortSpaceIB    PortSpace = 0x013F // the QP type given at creation
)

// String names the port space as librdmacm's RDMA_PS_ constants do.
func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIPoIB:
		return "IPoIB"
	case PortSpaceIB:
		return "IB"
	}
	return fmt.Sprintf("port space %#x", uint16(ps))
}

// The Go structs below mirror the kernel's field for field, reserved
// fields included, so that their encoding/binary form is the C layout;
// TestLayoutMatchesHeader checks every size and offset against the
// header. Requests with output carry Response, the user address the
// kernel copies it to.

// cmdHdr is struct rdma_ucm_cmd_hdr: unlike uverbs', In and Out count
// bytes, In without the header.
type cmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// createIDReq is struct rdma_ucm_create_id.
type createIDReq struct {
	UID      uint64
	Response uint64
	PS       uint16
	QPType   uint8
	Reserved [5]uint8
}

// createIDResp is struct rdma_ucm_create_id_resp.
type createIDResp struct{ ID uint32 }

// destroyIDReq is struct rdma_ucm_destroy_id.
type destroyIDReq struct {
	Response uint64
	ID       uint32
	Reserved uint32
}

// destroyIDResp is struct rdma_ucm_destroy_id_resp.
type destroyIDResp struct{ EventsReported uint32 }

// sockaddrStorage is struct __kernel_sockaddr_storage.
type sockaddrStorage [128]byte

// sockaddrIn6 is struct sockaddr_in6, the slot of the legacy commands.
type sockaddrIn6 [28]byte

// bindReq is struct rdma_ucm_bind.
type bindReq struct {
	ID       uint32
	AddrSize uint16
	Reserved uint16
	Addr     sockaddrStorage
}

// resolveAddrReq is struct rdma_ucm_resolve_addr.
type resolveAddrReq struct {
	ID        uint32
	TimeoutMs uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	SrcAddr   sockaddrStorage
	DstAddr   sockaddrStorage
}

// resolveRouteReq is struct rdma_ucm_resolve_route.
type resolveRouteReq struct {
	ID        uint32
	TimeoutMs uint32
}

// queryReq is struct rdma_ucm_query.
type queryReq struct {
	Response uint64
	ID       uint32
	Option   uint32
}

// queryAddrResp is struct rdma_ucm_query_addr_resp. NodeGUID is the
// kernel's __be64 copied as is, so it is read big-endian.
type queryAddrResp struct {
	NodeGUID   [8]byte
	PortNum    uint8
	Reserved   uint8
	PKey       uint16
	SrcSize    uint16
	DstSize    uint16
	SrcAddr    sockaddrStorage
	DstAddr    sockaddrStorage
	IBDevIndex uint32
	Reserved1  uint32
}

// userPathRec is struct ib_user_path_rec (ib_user_sa.h), a path record
// unpacked: GIDs and the __be fields in network order.
type userPathRec struct {
	DGID                   [16]byte
	SGID                   [16]byte
	DLID                   [2]byte
	SLID                   [2]byte
	RawTraffic             uint32
	FlowLabel              [4]byte
	Reversible             uint32
	MTU                    uint32
	PKey                   [2]byte
	HopLimit               uint8
	TrafficClass           uint8
	NumbPath               uint8
	SL                     uint8
	MTUSelector            uint8
	RateSelector           uint8
	Rate                   uint8
	PacketLifeTimeSelector uint8
	PacketLifeTime         uint8
	Preference             uint8
}

// queryRouteResp is struct rdma_ucm_query_route_resp.
type queryRouteResp struct {
	NodeGUID   [8]byte
	IBRoute    [2]userPathRec
	SrcAddr    sockaddrIn6
	DstAddr    sockaddrIn6
	NumPaths   uint32
	PortNum    uint8
	Reserved   [3]uint8
	IBDevIndex uint32
	Reserved1  uint32
}

// connParam is struct rdma_ucm_conn_param.
type connParam struct {
	QPNum              uint32
	QKey               uint32
	PrivateData        [256]byte
	PrivateDataLen     uint8
	SRQ                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	Valid              uint8
}

// ahAttr is struct ib_uverbs_ah_attr with its struct
// ib_uverbs_global_route grh inlined.
type ahAttr struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	GRHReserved  uint8
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
	Reserved     uint8
}

// udParam is struct rdma_ucm_ud_param.
type udParam struct {
	QPNum          uint32
	QKey           uint32
	AHAttr         ahAttr
	PrivateData    [256]byte
	PrivateDataLen uint8
	Reserved       [7]uint8
}

// ece is struct rdma_ucm_ece (enhanced connection establishment, mlx5).
type ece struct {
	VendorID uint32
	AttrMod  uint32
}

// connectReq is struct rdma_ucm_connect.
type connectReq struct {
	ConnParam connParam
	ID        uint32
	Reserved  uint32
	ECE       ece
}

// listenReq is struct rdma_ucm_listen.
type listenReq struct {
	ID      uint32
	Backlog uint32
}

// acceptReq is struct rdma_ucm_accept.
type acceptReq struct {
	UID       uint64
	ConnParam connParam
	ID        uint32
	Reserved  uint32
	ECE       ece
}

// rejectReq is struct rdma_ucm_reject.
type rejectReq struct {
	ID             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [256]byte
}

// disconnectReq is struct rdma_ucm_disconnect.
type disconnectReq struct{ ID uint32 }

// initQPAttrReq is struct rdma_ucm_init_qp_attr.
type initQPAttrReq struct {
	Response uint64
	ID       uint32
	QPState  uint32
}

// qpAttr is struct ib_uverbs_qp_attr, INIT_QP_ATTR's answer.
type qpAttr struct {
	QPAttrMask       uint32
	QPState          uint32
	CurQPState       uint32
	PathMTU          uint32
	PathMigState     uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	AHAttr           ahAttr
	AltAHAttr        ahAttr
	MaxSendWR        uint32
	MaxRecvWR        uint32
	MaxSendSGE       uint32
	MaxRecvSGE       uint32
	MaxInlineData    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [5]uint8
}

// notifyReq is struct rdma_ucm_notify.
type notifyReq struct {
	ID    uint32
	Event uint32
}

// getEventReq is struct rdma_ucm_get_event.
type getEventReq struct{ Response uint64 }

// eventResp is struct rdma_ucm_event_resp. Param is the union of
// struct rdma_ucm_conn_param (RC) and struct rdma_ucm_ud_param (UD).
type eventResp struct {
	UID      uint64
	ID       uint32
	Event    uint32
	Status   int32
	Param    [304]byte
	Reserved uint32
	ECE      ece
}

// setOptionReq is struct rdma_ucm_set_option.
type setOptionReq struct {
	OptVal  uint64
	ID      uint32
	Level   uint32
	OptName uint32
	OptLen  uint32
}

func (r *createIDReq) setResponse(addr uint64)   { r.Response = addr }
func (r *destroyIDReq) setResponse(addr uint64)  { r.Response = addr }
func (r *queryReq) setResponse(addr uint64)      { r.Response = addr }
func (r *initQPAttrReq) setResponse(addr uint64) { r.Response = addr }
func (r *getEventReq) setResponse(addr uint64)   { r.Response = addr }

// Socket address encoding: the kernel's struct sockaddr_in and
// sockaddr_in6, family in host order, port and address in network order.
const (
	sizeofSockaddrIn  = 16
	sizeofSockaddrIn6 = 28
)

// encodeSockaddr writes ap into b (at least 28 bytes) as a sockaddr_in
// (IPv4 and IPv4-mapped addresses) or sockaddr_in6, and returns its size.
// An IPv6 zone must be a numeric interface index.
func encodeSockaddr(b []byte, ap netip.AddrPort) (int, error) {
	addr := ap.Addr()
	if addr.Is4In6() {
		addr = addr.Unmap()
	}
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if addr.Is4() {
		binary.NativeEndian.PutUint16(b, unix.AF_INET)
		a4 := addr.As4()
		copy(b[4:8], a4[:])
		return sizeofSockaddrIn, nil
	}
	if !addr.Is6() {
		return 0, fmt.Errorf("rdmacm: invalid address %v", ap)
	}
	binary.NativeEndian.PutUint16(b, unix.AF_INET6)
	a16 := addr.As16()
	copy(b[8:24], a16[:])
	if zone := addr.Zone(); zone != "" {
		var scope uint32
		if _, err := fmt.Sscanf(zone, "%d", &scope); err != nil || fmt.Sprint(scope) != zone {
			return 0, fmt.Errorf("rdmacm: IPv6 zone %q of %v is not an interface index", zone, ap)
		}
		binary.NativeEndian.PutUint32(b[24:], scope)
	}
	return sizeofSockaddrIn6, nil
}

// decodeSockaddr reads a sockaddr_in or sockaddr_in6; anything else
// (AF_IB, an empty slot) is the zero AddrPort.
func decodeSockaddr(b []byte) netip.AddrPort {
	if len(b) < sizeofSockaddrIn {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		if len(b) < sizeofSockaddrIn6 {
			return netip.AddrPort{}
		}
		addr := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:]); scope != 0 {
			addr = addr.WithZone(fmt.Sprint(scope))
		}
		return netip.AddrPortFrom(addr, port)
	}
	return netip.AddrPort{}
}
