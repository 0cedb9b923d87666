package rdmacm

import (
	"encoding/binary"
	"fmt"
)

// EventType is what happened to an ID (enum rdma_cm_event_type).
type EventType uint32

// Event types. Kernels 6.1 and 6.12 send only these.
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventMulticastJoin   EventType = 12
	EventMulticastError  EventType = 13
	EventAddrChange      EventType = 14
	EventTimewaitExit    EventType = 15
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

// String returns the name librdmacm's rdma_event_str gives, e.g.
// "RDMA_CM_EVENT_ADDR_ERROR", which applications log.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return "RDMA_CM_EVENT_" + eventNames[t]
	}
	return fmt.Sprintf("RDMA_CM_EVENT_%d", uint32(t))
}

// ConnParam is what one side of a connection states (struct
// rdma_conn_param): its queue pair, how many RDMA READ and atomic
// operations it accepts (ResponderResources) and issues
// (InitiatorDepth) at once, and the retry counts for the peer's queue
// pair. In an event it is the peer's, already swapped to this side's
// view: ResponderResources is what this side may accept.
type ConnParam struct {
	QPNum              uint32 // 24 bits
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8 // 0..7; the active side's applies to both
	RNRRetryCount      uint8 // 0..7, 7 forever; for the peer's queue pair
	SRQ                bool
	// PrivateData is sent with the request, reply or reject (at most
	// MaxConnectPrivateData, MaxAcceptPrivateData, MaxRejectPrivateData
	// bytes on IB and RoCE). Events carry the peer's at its fixed length.
	PrivateData []byte
}

// Private data limits on IB and RoCE: the REQ's 92 bytes less the CM's
// 36-byte header for IP port spaces, the REP's 196 and the REJ's 148.
const (
	MaxConnectPrivateData = 56
	MaxAcceptPrivateData  = 196
	MaxRejectPrivateData  = 148
)

// encode returns the struct rdma_ucm_conn_param of p, valid.
func (p *ConnParam) encode(limit int) (connParam, error) {
	if len(p.PrivateData) > limit {
		return connParam{}, fmt.Errorf("rdmacm: %d bytes of private data, at most %d fit", len(p.PrivateData), limit)
	}
	c := connParam{
		QPNum: p.QPNum, PrivateDataLen: uint8(len(p.PrivateData)), ResponderResources: p.ResponderResources,
		InitiatorDepth: p.InitiatorDepth, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, Valid: 1,
	}
	copy(c.PrivateData[:], p.PrivateData)
	if p.FlowControl {
		c.FlowControl = 1
	}
	if p.SRQ {
		c.SRQ = 1
	}
	return c, nil
}

// Event is one event of an ID (struct rdma_cm_event).
type Event struct {
	Type EventType
	// Status is 0, a negative errno (ADDR_ERROR, ROUTE_ERROR,
	// UNREACHABLE, CONNECT_ERROR, DISCONNECTED after a timeout), or for
	// REJECTED on IB and RoCE the IB CM reject reason (RejectReason).
	Status int32
	// ID is the ID the event is for; for EventConnectRequest the new ID
	// of the request, which the listener's owner accepts or rejects.
	ID *ID
	// Conn is the peer's parameters (CONNECT_REQUEST, CONNECT_RESPONSE,
	// ESTABLISHED, REJECTED's private data), with the private data at
	// the event's fixed length.
	Conn ConnParam
}

// decodeEvent reads an RC event; ID is left for the caller. The
// private data length comes from the kernel, bounded by the buffer.
func decodeEvent(r *eventResp) Event {
	ev := Event{Type: EventType(r.Event), Status: r.Status}
	var p connParam
	if _, err := binary.Decode(r.Param[:], binary.NativeEndian, &p); err != nil {
		return ev // r.Param is larger than connParam: cannot happen
	}
	ev.Conn = ConnParam{
		QPNum: p.QPNum & 0xffffff, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: p.FlowControl != 0, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ != 0,
	}
	if n := min(int(p.PrivateDataLen), len(p.PrivateData)); n > 0 {
		ev.Conn.PrivateData = append([]byte(nil), p.PrivateData[:n]...)
	}
	return ev
}

// RejectReason is an IB CM reject reason (IBA table 112), the status of
// a REJECTED event on IB and RoCE.
type RejectReason int32

// The reject reasons an RDMA CM user meets.
const (
	// RejectInvalidServiceID: nothing listens on that port (and port
	// space) at that address.
	RejectInvalidServiceID RejectReason = 8
	// RejectConsumer: refused by the peer (its application, or its
	// kernel: listener bound to another address, netdev mismatch or
	// down, QP type mismatch, ID destroyed before accepting).
	RejectConsumer RejectReason = 28
	// RejectVendorOptionNotSupported: ECE refused (mlx5).
	RejectVendorOptionNotSupported RejectReason = 35
)

// String describes the reason in the words of IBA table 112.
func (r RejectReason) String() string {
	switch r {
	case RejectInvalidServiceID:
		return "invalid service ID"
	case RejectConsumer:
		return "consumer defined"
	case RejectVendorOptionNotSupported:
		return "vendor option not supported"
	case 1:
		return "no QP"
	case 2:
		return "no EEC"
	case 3:
		return "no resources"
	case 4:
		return "timeout"
	case 5:
		return "unsupported"
	case 7:
		return "invalid comm instance"
	case 9:
		return "invalid service type"
	case 10:
		return "stale connection"
	case 23:
		return "port redirect"
	case 26:
		return "invalid MTU"
	case 27:
		return "insufficient responder resources"
	case 30:
		return "invalid QP type"
	}
	return fmt.Sprintf("reason %d", int32(r))
}
