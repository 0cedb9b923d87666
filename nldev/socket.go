package nldev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"time"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// blockingSocket is a NETLINK_RDMA socket driven by plain blocking
// sendto(2) and recvfrom(2). mdlayher/netlink's own socket goes through the
// runtime poller, peeks at every datagram and starts a goroutine per
// system call; for a command that makes one request per device, that was
// most of the cost of each request in the emulated test guest
// (BENCHMARKS.md). Dial uses it in every network namespace.
//
// RDMA netlink answers within the sendto (a dump's next part within the
// previous recvfrom), so a receive finds its datagram waiting: it is tried
// first as a raw non-blocking call (no handing the P to another thread,
// which costs more than the call on a slow machine). Only when nothing is
// there does it block, in an ordinary system call the scheduler and the
// GC can work around, and for at most receiveTimeout.
//
// It delivers only the messages of the last request sent: what is left of
// an earlier reply that stopped early (a receive error in a dump) is read
// and dropped, where it used to end the next reply early and shift every
// later one ("mismatched sequence").
type blockingSocket struct {
	fd  int
	buf []byte // one datagram; the kernel sends at most 32 KiB at a time
	// toKernel addresses every send to the kernel (tests use a socket pair).
	toKernel bool
	seq      uint32 // sequence number of the last request sent
	pid      uint32 // the socket's netlink port ID
}

// receiveTimeout bounds a receive that finds nothing: a safety net for a
// reply that never comes, not a deadline the kernel could miss.
const receiveTimeout = 30 * time.Second

// ErrNoReply means the kernel did not answer a request within 30 s.
var ErrNoReply = errors.New("no reply from the kernel's RDMA netlink within 30s")

// receiveBufferSize bounds one datagram: dumps fill at most 32 KiB, doit
// replies less.
const receiveBufferSize = 64 << 10

var _ transport = (*blockingSocket)(nil)

// dialBlocking opens and binds the socket, with extended acknowledgements
// on when the kernel has them.
func dialBlocking() (*blockingSocket, error) {
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
	tv := unix.NsecToTimeval(receiveTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return newBlockingSocket(fd, true, sa.(*unix.SockaddrNetlink).Pid), nil
}

func newBlockingSocket(fd int, toKernel bool, pid uint32) *blockingSocket {
	return &blockingSocket{fd: fd, buf: make([]byte, receiveBufferSize), toKernel: toKernel, pid: pid}
}

// dialBlockingIn opens the socket in the network namespace open as nsFD,
// from a thread that enters it and comes back (a thread that cannot come
// back is left locked, so the runtime ends it).
func dialBlockingIn(nsFD int) (*blockingSocket, error) {
	type dialled struct {
		c   *blockingSocket
		err error
	}
	done := make(chan dialled, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- dialled{err: err}
			return
		}
		defer unix.Close(home)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- dialled{err: fmt.Errorf("enter network namespace: %w", err)}
			return
		}
		c, err := dialBlocking()
		if rerr := unix.Setns(home, unix.CLONE_NEWNET); rerr != nil {
			if err == nil {
				c.close()
			}
			done <- dialled{err: fmt.Errorf("return from network namespace: %w", rerr)}
			return // still locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		done <- dialled{c, err}
	}()
	d := <-done
	return d.c, d.err
}

// send sends one request to the kernel.
func (s *blockingSocket) send(m netlink.Message) error {
	b, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	kernel := unix.RawSockaddrNetlink{Family: unix.AF_NETLINK}
	to, toLen := uintptr(unsafe.Pointer(&kernel)), unsafe.Sizeof(kernel)
	if !s.toKernel {
		to, toLen = 0, 0
	}
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0,
			to, toLen)
		runtime.KeepAlive(b)
		if errno != unix.EINTR {
			if errno != 0 {
				return errno
			}
			return nil
		}
	}
}

// errTruncated means a datagram did not fit receiveBufferSize.
var errTruncated = errors.New("netlink datagram larger than the receive buffer")

// receiveReply reads datagrams up to one that holds messages of the last
// request and yields those, whose data the caller owns.
func (s *blockingSocket) receiveReply() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		for {
			n, err := s.receive()
			if err != nil {
				yield(netlink.Message{}, err)
				return
			}
			if n < unix.NLMSG_HDRLEN {
				continue // not netlink: no reply to anything
			}
			// Aligned and zero-padded, as Message.UnmarshalBinary wants it.
			owned := make([]byte, align4(n))
			copy(owned, s.buf[:n])
			if s.deliver(owned, yield) {
				return
			}
		}
	}
}

// receive reads one datagram into s.buf and returns its length.
func (s *blockingSocket) receive() (int, error) {
	p, size := uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf))
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), p, size, unix.MSG_TRUNC|unix.MSG_DONTWAIT, 0, 0)
	for errno == unix.EAGAIN || errno == unix.EINTR {
		n, _, errno = unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), p, size, unix.MSG_TRUNC, 0, 0)
		if errno == unix.EAGAIN { // SO_RCVTIMEO
			return 0, ErrNoReply
		}
	}
	switch {
	case errno != 0:
		return 0, errno
	case int(n) > len(s.buf):
		return 0, errTruncated
	}
	return int(n), nil
}

// deliver yields the messages of datagram b that answer the last request
// and reports whether there were any (or an error, or the caller stopped).
// A datagram of an earlier reply, which the sequence number of its first
// header tells, is dropped whole, unparsed: a malformed leftover must not
// fail the next request; so is one too short to hold a header.
func (s *blockingSocket) deliver(b []byte, yield func(netlink.Message, error) bool) bool {
	if len(b) < unix.NLMSG_HDRLEN || binary.NativeEndian.Uint32(b[8:12]) != s.seq {
		return false
	}
	delivered := false
	for m, err := range splitMessages(b) {
		if err != nil {
			yield(netlink.Message{}, err)
			return true
		}
		if m.Header.Sequence != s.seq {
			continue
		}
		delivered = true
		if !yield(m, nil) {
			return true
		}
	}
	return delivered
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
