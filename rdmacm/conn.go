package rdmacm

import (
	"context"
	"net/netip"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// The CM as code above this package drives it, behind interfaces so that
// its tests can put package rdmacmtest's fake in the kernel's place: CM
// opens an RDMA CM and makes IDs, a Conn is one end of a connection and a
// Listener takes connection requests. A Channel is a CM and an *ID both a
// Conn and a Listener.

// CM is an open RDMA CM: it makes the IDs of connections and listeners.
// Closing it ends its IDs' waits (a Channel destroys them).
type CM interface {
	// CreateConn creates an ID for one end of a connection (CreateID).
	CreateConn(ps PortSpace) (Conn, error)
	// CreateListener creates an ID to Bind and Listen on (CreateID).
	CreateListener(ps PortSpace) (Listener, error)
	Close() error
}

// Conn is one end of a connection: the active side's ID, or a request's
// (ConnRequest.Conn). The methods are *ID's.
type Conn interface {
	ResolveAddr(ctx context.Context, src, dst netip.AddrPort, timeout time.Duration) error
	SetTOS(tos uint8) error
	ResolveRoute(ctx context.Context, timeout time.Duration) error
	QueryAddr() (Addr, error)
	QueryRoute() (Route, error)
	InitQPAttr(state ib.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error)
	Connect(ctx context.Context, p ConnParam) (ConnParam, error)
	Establish() error
	Accept(p ConnParam) error
	WaitEstablished(ctx context.Context) error
	Reject(reason RejectReason, private []byte) error
	Disconnect() error
	WaitDisconnected(ctx context.Context) error
	Destroy() error
}

// Listener is an ID that takes connection requests. The methods are
// *ID's, and NextRequest is GetRequest with the request's ID as a Conn.
type Listener interface {
	Bind(addr netip.AddrPort) error
	Listen(backlog int) error
	QueryAddr() (Addr, error)
	NextRequest(ctx context.Context) (ConnRequest, error)
	Destroy() error
}

// ConnRequest is a Request as a Listener gives it: the request's own ID
// as a Conn (Accept or Reject it, and Destroy it when done), the
// requester's parameters and the new ID's addresses and device.
type ConnRequest struct {
	Conn Conn
	Peer ConnParam
	Addr Addr
}

var (
	_ CM       = (*Channel)(nil)
	_ Conn     = (*ID)(nil)
	_ Listener = (*ID)(nil)
)

// CreateConn is CreateID for the CM interface.
func (c *Channel) CreateConn(ps PortSpace) (Conn, error) {
	id, err := c.CreateID(ps)
	if err != nil {
		return nil, err
	}
	return id, nil
}

// CreateListener is CreateID for the CM interface.
func (c *Channel) CreateListener(ps PortSpace) (Listener, error) {
	id, err := c.CreateID(ps)
	if err != nil {
		return nil, err
	}
	return id, nil
}

// NextRequest is GetRequest for the Listener interface.
func (id *ID) NextRequest(ctx context.Context) (ConnRequest, error) {
	r, err := id.GetRequest(ctx)
	if err != nil {
		return ConnRequest{}, err
	}
	return ConnRequest{Conn: r.ID, Peer: r.Peer, Addr: r.Addr}, nil
}
