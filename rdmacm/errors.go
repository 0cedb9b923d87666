package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CommandError is a command the kernel refused (the write(2) failed).
type CommandError struct {
	Command string // "BIND"
	ID      uint32 // the kernel's ID handle; 0 for CREATE_ID
	Err     error  // the errno
	// Hint explains the errno for this command, when there is more to
	// say than its text.
	Hint string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("rdma_cm %s: %v", e.Command, e.Err)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// Is maps the errno as the io/fs errors stand for it: ENOENT and ENODEV
// (no such ID, no RDMA device for the address) are fs.ErrNotExist, EPERM
// and EACCES fs.ErrPermission.
func (e *CommandError) Is(target error) bool {
	var errno unix.Errno
	if !errors.As(e.Err, &errno) {
		return false
	}
	switch target {
	case fs.ErrNotExist:
		return errno == unix.ENOENT || errno == unix.ENODEV
	case fs.ErrPermission:
		return errno == unix.EPERM || errno == unix.EACCES
	}
	return false
}

// Error is a step of connection management that ended with an event
// other than the one it waits for, or whose wait was cut short by its
// context. Its message explains the failure with what the ID knew: the
// addresses, the device, the RoCE version and ToS of the route.
type Error struct {
	Step string // "resolve address", "resolve route", "connect", "accept", ...
	// Event and Status are the event that ended the step; with Err set
	// there was none.
	Event  EventType
	Status int32
	Err    error // the context's error
	Waited time.Duration

	Src, Dst netip.AddrPort
	// Device is the port the ID was bound to (zero before address
	// resolution), Port its description when the channel has one.
	Device DevicePort
	Port   PortInfo
	// TOS is the route's traffic class (the whole ToS byte), -1 before
	// route resolution.
	TOS int
	// Egress is, for an address error, the netdev the route to Dst
	// leaves through and the source address it picks, as the caller's
	// network namespace resolves them ("" when there is none).
	Egress    string
	EgressSrc netip.Addr
	// Private is a REJECTED event's private data (the peer's reason, in
	// its application's format; zero padded), nil for other events.
	Private []byte
}

// DevicePort is an RDMA device port as the CM names it: the device's
// index (RDMA netlink's), its node GUID and the port number.
type DevicePort struct {
	Index    uint32
	NodeGUID uint64
	Port     uint8
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Step)
	if e.Dst.IsValid() {
		fmt.Fprintf(&b, " %s", e.Dst)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.explainWait())
		return b.String()
	}
	fmt.Fprintf(&b, "%s", e.Event)
	if text := e.statusText(); text != "" {
		fmt.Fprintf(&b, " (%s)", text)
	}
	if why := e.explain(); why != "" {
		b.WriteString(": ")
		b.WriteString(why)
	}
	return b.String()
}

// statusText is the event status in words: an errno's text or a reject
// reason.
func (e *Error) statusText() string {
	switch {
	case e.Event == EventRejected && e.Status > 0:
		return RejectReason(e.Status).String()
	case e.Status < 0:
		return unix.Errno(-e.Status).Error()
	}
	return ""
}

// via describes the route's side of the connection: "RoCE v2, ToS 0,
// from rxe0/1 (10.0.0.1)".
func (e *Error) via() string {
	var parts []string
	if e.Port.RoCE != "" {
		parts = append(parts, e.Port.RoCE)
	}
	if e.TOS >= 0 {
		parts = append(parts, fmt.Sprintf("ToS %d", e.TOS))
	}
	from := e.deviceName()
	if from != "" && e.Src.IsValid() {
		from += fmt.Sprintf(" (%s)", e.Src.Addr())
	}
	if from != "" {
		parts = append(parts, "from "+from)
	}
	return strings.Join(parts, ", ")
}

func (e *Error) deviceName() string {
	switch {
	case e.Port.Device != "":
		return fmt.Sprintf("%s/%d", e.Port.Device, e.Device.Port)
	case e.Device.Port != 0:
		return fmt.Sprintf("RDMA device %d port %d", e.Device.Index, e.Device.Port)
	}
	return ""
}

func (e *Error) explain() string {
	errno := unix.Errno(-e.Status)
	switch e.Event {
	case EventAddrError:
		switch errno {
		case unix.ENODEV:
			src := "the source address"
			if e.EgressSrc.IsValid() {
				src = e.EgressSrc.String()
			} else if e.Src.IsValid() && !e.Src.Addr().IsUnspecified() {
				src = e.Src.Addr().String()
			}
			if e.Egress != "" {
				return fmt.Sprintf("the route to %s leaves through netdev %s, which has no RDMA device with a GID for %s of its port's default RoCE mode: create one there (grdma link add NAME type rxe netdev %s) or use an address of an RDMA netdev",
					e.Dst.Addr(), e.Egress, src, e.Egress)
			}
			return fmt.Sprintf("no RDMA device has a GID for %s on the netdev of the route to %s", src, e.Dst.Addr())
		case unix.ETIMEDOUT:
			return fmt.Sprintf("%s did not answer address resolution (ARP or neighbour discovery) in time: is it up and reachable?", e.Dst.Addr())
		case unix.ENETUNREACH, unix.EHOSTUNREACH:
			return fmt.Sprintf("no route to %s in this network namespace", e.Dst.Addr())
		case unix.EADDRNOTAVAIL:
			return "the source address is on no netdev of this network namespace"
		}
	case EventRouteError:
		return fmt.Sprintf("no path to %s (the subnet manager's path query failed on InfiniBand; on RoCE the netdev lost its address or MTU)", e.Dst.Addr())
	case EventUnreachable:
		return fmt.Sprintf("the connection request%s got no answer%s: UDP port 4791 may be filtered on the path, %s may run no RDMA CM (ib_cm) or have no RDMA device able to receive it, or its listener's backlog is full",
			e.sentWith(), e.after(), e.Dst.Addr())
	case EventRejected:
		switch RejectReason(e.Status) {
		case RejectInvalidServiceID:
			return fmt.Sprintf("nothing listens on port %d at %s (RDMA CM)", e.Dst.Port(), e.Dst.Addr())
		case RejectConsumer:
			return "refused by the peer: its application rejected the request, or its kernel did (listener bound to another address, netdev mismatch or down, queue pair type mismatch)"
		}
		if e.Status < 0 {
			return "refused by the peer (iWARP)"
		}
	case EventConnectError:
		return "the connection failed on this side"
	case EventDisconnected:
		return "the peer disconnected"
	case EventDeviceRemoval:
		return "the RDMA device was removed"
	case EventAddrChange:
		return "the address moved to another device"
	}
	return ""
}

// sentWith is " (RoCE v2, ToS 0, from rxe0/1 (10.0.0.1))" or "".
func (e *Error) sentWith() string {
	if v := e.via(); v != "" {
		return " (" + v + ")"
	}
	return ""
}

func (e *Error) after() string {
	if e.Waited > 0 {
		return fmt.Sprintf(" in %v", e.Waited.Round(100*time.Millisecond))
	}
	return ""
}

// explainWait explains a wait its context ended.
func (e *Error) explainWait() string {
	if !errors.Is(e.Err, context.DeadlineExceeded) {
		return e.Err.Error()
	}
	switch e.Step {
	case StepConnect:
		return fmt.Sprintf("no connection response%s%s: UDP port 4791 may be filtered on the path, %s may run no RDMA CM (ib_cm) or have no RDMA device able to receive it, or its listener's backlog is full (the kernel gives up after about 75 s on 6.12, 100 s on 6.1, with RDMA_CM_EVENT_UNREACHABLE)",
			e.sentWith(), e.after(), e.Dst.Addr())
	case StepAccept:
		return fmt.Sprintf("the peer sent no ready-to-use message%s", e.after())
	}
	return fmt.Sprintf("timed out%s", e.after())
}

func (e *Error) Unwrap() error {
	switch {
	case e.Err != nil:
		return e.Err
	case e.Event == EventRejected && e.Status >= 0:
		return syscall.ECONNREFUSED
	case e.Status < 0:
		return unix.Errno(-e.Status)
	}
	return nil
}

// Is makes an address error for want of a device fs.ErrNotExist.
func (e *Error) Is(target error) bool {
	return target == fs.ErrNotExist && e.Err == nil && e.Event == EventAddrError && e.Status == -int32(unix.ENODEV)
}

// The steps an Error names.
const (
	StepResolveAddr  = "resolve address"
	StepResolveRoute = "resolve route"
	StepConnect      = "connect"
	StepAccept       = "accept"
	StepRequest      = "wait for a connection request"
	StepDisconnect   = "disconnect"
)

// egress finds the netdev the route to dst leaves through, and the source
// address it picks, as a connected UDP socket sees them: connecting one
// sends nothing. It answers in the calling thread's network namespace.
func egress(dst netip.Addr) (string, netip.Addr) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return "", netip.Addr{}
	}
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	conn.Close()
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", local
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == local.WithZone("") {
					return ifc.Name, local
				}
			}
		}
	}
	return "", local
}
