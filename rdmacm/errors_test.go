package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestErrorMessages: what an operator reads for each failure, and what
// errors.Is finds in it.
func TestErrorMessages(t *testing.T) {
	dst := netip.MustParseAddrPort("10.0.0.2:7174")
	src := netip.MustParseAddrPort("10.0.0.1:40000")
	dev := DevicePort{Index: 3, NodeGUID: 0x1, Port: 1}
	named := PortInfo{Device: "mlx5_0", RoCE: "RoCE v2"}
	tests := []struct {
		name string
		err  *Error
		want string
		is   []error
	}{
		{"unreachable", &Error{Step: StepConnect, Event: EventUnreachable, Status: -int32(unix.ETIMEDOUT), Src: src, Dst: dst,
			Device: dev, Port: named, TOS: 104, Waited: 75 * time.Second},
			"connect 10.0.0.2:7174: RDMA_CM_EVENT_UNREACHABLE (connection timed out): the connection request (RoCE v2, ToS 104, from mlx5_0/1 (10.0.0.1)) got no answer in 1m15s: UDP port 4791 may be filtered on the path, 10.0.0.2 may run no RDMA CM (ib_cm) or have no RDMA device able to receive it, or its listener's backlog is full",
			[]error{syscall.ETIMEDOUT}},
		{"deadline", &Error{Step: StepConnect, Err: context.DeadlineExceeded, Src: src, Dst: dst, Device: dev, TOS: 0, Waited: 5 * time.Second},
			"connect 10.0.0.2:7174: no connection response (ToS 0, from RDMA device 3 port 1 (10.0.0.1)) in 5s: UDP port 4791 may be filtered on the path, 10.0.0.2 may run no RDMA CM (ib_cm) or have no RDMA device able to receive it, or its listener's backlog is full (the kernel gives up after about 75 s on 6.12, 100 s on 6.1, with RDMA_CM_EVENT_UNREACHABLE)",
			[]error{context.DeadlineExceeded}},
		{"canceled", &Error{Step: StepResolveAddr, Err: context.Canceled, Dst: dst, TOS: -1},
			"resolve address 10.0.0.2:7174: context canceled", []error{context.Canceled}},
		{"refused", &Error{Step: StepConnect, Event: EventRejected, Status: int32(RejectConsumer), Dst: dst, TOS: -1},
			"connect 10.0.0.2:7174: RDMA_CM_EVENT_REJECTED (consumer defined): refused by the peer: its application rejected the request, or its kernel did (listener bound to another address, netdev mismatch or down, queue pair type mismatch)",
			[]error{syscall.ECONNREFUSED}},
		{"address timeout", &Error{Step: StepResolveAddr, Event: EventAddrError, Status: -int32(unix.ETIMEDOUT), Dst: dst, TOS: -1},
			"resolve address 10.0.0.2:7174: RDMA_CM_EVENT_ADDR_ERROR (connection timed out): 10.0.0.2 did not answer address resolution (ARP or neighbour discovery) in time: is it up and reachable?",
			[]error{syscall.ETIMEDOUT}},
		{"no route", &Error{Step: StepResolveAddr, Event: EventAddrError, Status: -int32(unix.ENETUNREACH), Dst: dst, TOS: -1},
			"resolve address 10.0.0.2:7174: RDMA_CM_EVENT_ADDR_ERROR (network is unreachable): no route to 10.0.0.2 in this network namespace",
			[]error{syscall.ENETUNREACH}},
		{"no device, egress unknown", &Error{Step: StepResolveAddr, Event: EventAddrError, Status: -int32(unix.ENODEV), Dst: dst, TOS: -1},
			"resolve address 10.0.0.2:7174: RDMA_CM_EVENT_ADDR_ERROR (no such device): no RDMA device has a GID for the source address on the netdev of the route to 10.0.0.2",
			[]error{syscall.ENODEV, fs.ErrNotExist}},
		{"removed", &Error{Step: StepAccept, Event: EventDeviceRemoval, TOS: -1},
			"accept: RDMA_CM_EVENT_DEVICE_REMOVAL: the RDMA device was removed", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			wrapped := fmt.Errorf("probe: %w", tt.err)
			for _, target := range tt.is {
				if !errors.Is(wrapped, target) {
					t.Errorf("not %v", target)
				}
			}
		})
	}
	ce := &CommandError{Command: "BIND", Err: unix.EACCES}
	if !errors.Is(ce, fs.ErrPermission) || errors.Is(ce, fs.ErrNotExist) {
		t.Errorf("%v: Is", ce)
	}
	if ce := (&CommandError{Command: "QUERY", Err: unix.ENOENT}); !errors.Is(ce, fs.ErrNotExist) {
		t.Errorf("%v: not fs.ErrNotExist", ce)
	}
}

// TestSockaddr: the kernel's sockaddr_in and sockaddr_in6, both ways.
func TestSockaddr(t *testing.T) {
	for _, s := range []string{"10.0.0.1:7174", "[2001:db8::1]:18515", "[fe80::1%2]:1", "0.0.0.0:0"} {
		ap := netip.MustParseAddrPort(s)
		var b sockaddrStorage
		n, err := encodeSockaddr(b[:], ap)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeSockaddr(b[:n]); got != ap {
			t.Errorf("%s: decoded %s (%d bytes)", s, got, n)
		}
	}
	// An IPv4-mapped address goes as IPv4, the CM's form of it.
	var b sockaddrStorage
	if n, _ := encodeSockaddr(b[:], netip.MustParseAddrPort("[::ffff:10.0.0.1]:5")); n != sizeofSockaddrIn {
		t.Errorf("IPv4-mapped: %d bytes", n)
	}
	if _, err := encodeSockaddr(b[:], netip.MustParseAddrPort("[fe80::1%eth0]:1")); err == nil {
		t.Error("a named zone was encoded")
	}
	if got := decodeSockaddr(make([]byte, 48)); got.IsValid() {
		t.Errorf("an empty slot decoded to %s", got)
	}
}
