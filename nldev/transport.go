package nldev

import (
	"encoding/binary"
	"errors"
	"iter"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// transport carries a Client's requests and their replies: the kernel's
// socket (blockingSocket, what Dial opens) or a *netlink.Conn that a
// caller made (NewClient: nltest's fakes, a socket of its own).
type transport interface {
	// execute sends a doit request and returns its replies; an
	// NLMSG_ERROR with an errno is an error.
	execute(req netlink.Message) ([]netlink.Message, error)
	// dump sends a dump request and yields its messages up to and with
	// NLMSG_DONE, whose flags still count (NLM_F_DUMP_INTR).
	dump(req netlink.Message) iter.Seq2[netlink.Message, error]
	close() error
}

// connTransport is a caller's *netlink.Conn.
type connTransport struct{ c *netlink.Conn }

func (t connTransport) execute(req netlink.Message) ([]netlink.Message, error) {
	return t.c.Execute(req)
}

func (t connTransport) dump(req netlink.Message) iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		sent, err := t.c.Send(req)
		if err != nil {
			yield(netlink.Message{}, err)
			return
		}
		for m, err := range t.c.ReceiveIter() {
			if err == nil && m.Header.Sequence != sent.Header.Sequence {
				continue // a stale reply to an earlier request
			}
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

func (t connTransport) close() error { return t.c.Close() }

// KernelError is an errno the kernel answered in an NLMSG_ERROR (or a
// dump's NLMSG_DONE), with its extended-ack message when it sent one.
type KernelError struct {
	Errno   unix.Errno
	Message string // NLMSGERR_ATTR_MSG
}

func (e *KernelError) Error() string {
	if e.Message != "" {
		return e.Errno.Error() + ": " + e.Message
	}
	return e.Errno.Error()
}

func (e *KernelError) Unwrap() error { return e.Errno }

// errShortError is an error message too short for its errno.
var errShortError = errors.New("netlink error message too short")

// replyError returns the error an NLMSG_ERROR, or a dump's NLMSG_DONE,
// carries; nil for an acknowledgement (errno 0) and for other messages.
func replyError(m netlink.Message) error {
	switch {
	case m.Header.Type == netlink.Error:
	case m.Header.Type == netlink.Done && len(m.Data) > 0:
	default:
		return nil
	}
	if len(m.Data) < 4 {
		return errShortError
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	e := &KernelError{Errno: unix.Errno(-code)}
	if code > 0 {
		e.Errno = unix.Errno(code)
	}
	if m.Header.Flags&netlink.AcknowledgeTLVs == 0 {
		return e
	}
	// The TLVs follow the errno and, in an NLMSG_ERROR, the echoed
	// request: its header alone when capped, else the whole request.
	off := 4
	if m.Header.Type == netlink.Error {
		if len(m.Data) < 4+unix.NLMSG_HDRLEN {
			return e
		}
		echoed := int(binary.NativeEndian.Uint32(m.Data[4:]))
		if m.Header.Flags&netlink.HeaderFlags(unix.NLM_F_CAPPED) != 0 {
			echoed = unix.NLMSG_HDRLEN
		}
		off += align4(echoed)
	}
	if off > len(m.Data) {
		return e
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[off:])
	if err != nil {
		return e
	}
	for ad.Next() {
		if ad.Type() == unix.NLMSGERR_ATTR_MSG {
			e.Message = ad.String()
		}
	}
	return e
}

// stamp fills in a request's length, sequence number and port ID.
func (s *blockingSocket) stamp(req *netlink.Message) {
	s.seq++
	req.Header.Length = uint32(unix.NLMSG_HDRLEN + len(req.Data))
	req.Header.Sequence = s.seq
	req.Header.PID = s.pid
}

func (s *blockingSocket) execute(req netlink.Message) ([]netlink.Message, error) {
	var replies []netlink.Message
	for m, err := range s.request(req) {
		if err != nil {
			return nil, err
		}
		if m.Header.Type == netlink.Done || m.Header.Type == netlink.Error {
			continue // the ACK of a write, or a dump's end
		}
		replies = append(replies, m)
	}
	return replies, nil
}

func (s *blockingSocket) dump(req netlink.Message) iter.Seq2[netlink.Message, error] {
	return s.request(req)
}

// request sends req and yields the messages of its reply: one message or
// ACK, or a multi-part reply up to NLMSG_DONE; an error ends it. What is
// left of a reply the caller stopped reading is dropped by the next
// request's receive (deliver).
func (s *blockingSocket) request(req netlink.Message) iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		s.stamp(&req)
		if err := s.send(req); err != nil {
			yield(netlink.Message{}, err)
			return
		}
		for {
			more := false
			for m, err := range s.receiveReply() {
				if err == nil {
					err = replyError(m)
				}
				if err != nil {
					yield(netlink.Message{}, err)
					return
				}
				if !yield(m, nil) {
					return
				}
				if m.Header.Type == netlink.Done || m.Header.Type == netlink.Error {
					return
				}
				more = m.Header.Flags&netlink.Multi != 0
			}
			if !more {
				return
			}
		}
	}
}

func (s *blockingSocket) close() error { return unix.Close(s.fd) }
