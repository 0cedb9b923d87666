package nldev

import (
	"encoding/binary"
	"errors"
	"iter"
	"runtime"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// blockingSocket is a NETLINK_RDMA socket driven by plain blocking
// sendto(2) and recvfrom(2). mdlayher/netlink's own socket goes through the
// runtime poller, peeks at every datagram and starts a goroutine per
// system call; for a command that makes one request per device, that was
// most of the cost of each request in the emulated test guest
// (BENCHMARKS.md). Dial uses it in the caller's network namespace; for
// another one (-n NETNS) it keeps mdlayher's socket, which enters it.
//
// The calls are raw (no handing the P to another thread while in the
// kernel): RDMA netlink answers within the sendto, so a receive never
// waits, and the hand-offs cost more than the calls on a slow machine.
type blockingSocket struct {
	fd  int
	buf []byte // one datagram; the kernel sends at most 32 KiB at a time
}

// receiveBufferSize bounds one datagram: dumps fill at most 32 KiB, doit
// replies less.
const receiveBufferSize = 64 << 10

var _ netlink.Socket = (*blockingSocket)(nil)

// dialBlocking opens and binds the socket, with extended acknowledgements
// on when the kernel has them.
func dialBlocking() (*netlink.Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	pid := sa.(*unix.SockaddrNetlink).Pid
	return netlink.NewConn(&blockingSocket{fd: fd, buf: make([]byte, receiveBufferSize)}, pid), nil
}

func (s *blockingSocket) Close() error { return unix.Close(s.fd) }

func (s *blockingSocket) Send(m netlink.Message) error {
	return s.SendMessages([]netlink.Message{m})
}

func (s *blockingSocket) SendMessages(msgs []netlink.Message) error {
	var b []byte
	for _, m := range msgs {
		mb, err := m.MarshalBinary()
		if err != nil {
			return err
		}
		b = append(b, mb...)
	}
	if len(b) == 0 {
		return nil
	}
	kernel := unix.RawSockaddrNetlink{Family: unix.AF_NETLINK}
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&kernel)), unsafe.Sizeof(kernel))
		runtime.KeepAlive(b)
		if errno != unix.EINTR {
			if errno != 0 {
				return errno
			}
			return nil
		}
	}
}

func (s *blockingSocket) Receive() ([]netlink.Message, error) {
	var msgs []netlink.Message
	for m, err := range s.ReceiveIter() {
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// errTruncated means a datagram did not fit receiveBufferSize.
var errTruncated = errors.New("netlink datagram larger than the receive buffer")

// ReceiveIter reads one datagram and yields its messages, whose data the
// caller owns.
func (s *blockingSocket) ReceiveIter() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		var n uintptr
		var errno unix.Errno
		for {
			n, _, errno = unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)),
				unix.MSG_TRUNC, 0, 0)
			if errno != unix.EINTR {
				break
			}
		}
		switch {
		case errno != 0:
			yield(netlink.Message{}, errno)
			return
		case int(n) > len(s.buf):
			yield(netlink.Message{}, errTruncated)
			return
		}
		// Aligned and zero-padded, as Message.UnmarshalBinary wants it.
		owned := make([]byte, align4(int(n)))
		copy(owned, s.buf[:n])
		for m, err := range splitMessages(owned) {
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// errBadLength is a message whose length does not fit its datagram.
var errBadLength = errors.New("netlink message length out of range")

// splitMessages yields the messages of a datagram (its length a multiple
// of 4).
func splitMessages(b []byte) iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		for len(b) >= unix.NLMSG_HDRLEN {
			n := align4(int(binary.NativeEndian.Uint32(b)))
			if n < unix.NLMSG_HDRLEN || n > len(b) {
				yield(netlink.Message{}, errBadLength)
				return
			}
			var m netlink.Message
			if err := m.UnmarshalBinary(b[:n]); err != nil {
				yield(netlink.Message{}, err)
				return
			}
			if !yield(m, nil) {
				return
			}
			b = b[n:]
		}
	}
}

func align4(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
