package nldev

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// replyError reads the errno and the extended-ack message where the
// kernel puts them: after the whole echoed request, after its header alone
// when capped, or right after the errno in a dump's NLMSG_DONE.
func TestReplyError(t *testing.T) {
	request := make([]byte, 24) // an echoed request: header and 8 bytes
	binary.NativeEndian.PutUint32(request, 24)
	errno := func(e unix.Errno) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(-int32(e))) }
	msg := nla(Attr(unix.NLMSGERR_ATTR_MSG), strz("Unknown device"))
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for _, tt := range []struct {
		name  string
		m     netlink.Message
		errno unix.Errno // 0: no error
		text  string
	}{
		{"ack", netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: cat(errno(0), request)}, 0, ""},
		{"plain errno", netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: cat(errno(unix.EPERM), request)}, unix.EPERM, ""},
		{"ext ack after the whole request", netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.AcknowledgeTLVs},
			Data: cat(errno(unix.EINVAL), request, msg)}, unix.EINVAL, "Unknown device"},
		{"ext ack, capped", netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.AcknowledgeTLVs | netlink.HeaderFlags(unix.NLM_F_CAPPED)},
			Data: cat(errno(unix.EINVAL), request[:16], msg)}, unix.EINVAL, "Unknown device"},
		{"dump DONE with an errno", netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi | netlink.AcknowledgeTLVs},
			Data: cat(errno(unix.EMSGSIZE), msg)}, unix.EMSGSIZE, "Unknown device"},
		{"clean DONE", netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: errno(0)}, 0, ""},
		{"data", devMsg(0, "rxe0", 0), 0, ""},
		{"ext ack past the end", netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.AcknowledgeTLVs},
			Data: cat(errno(unix.EINVAL), []byte{200, 0, 0, 0}, request[4:16])}, unix.EINVAL, ""},
	} {
		err := replyError(tt.m)
		var ke *KernelError
		switch {
		case tt.errno == 0 && err != nil:
			t.Errorf("%s: %v, want none", tt.name, err)
		case tt.errno != 0 && (!errors.As(err, &ke) || ke.Errno != tt.errno || ke.Message != tt.text || !errors.Is(err, tt.errno)):
			t.Errorf("%s: %#v, want errno %v and %q", tt.name, err, tt.errno, tt.text)
		}
	}
	if err := replyError(netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: []byte{1}}); !errors.Is(err, errShortError) {
		t.Errorf("short error message: %v", err)
	}
}

// A write request's ACK ends its reply; the kernel's refusal with an
// extended ack is an *Error naming it.
func TestExecuteAck(t *testing.T) {
	ack := func(code unix.Errno, flags netlink.HeaderFlags, extra []byte) []byte {
		data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(code)))
		data = append(data, make([]byte, 16)...)
		binary.NativeEndian.PutUint32(data[4:], 16)
		return datagram(netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: flags}, Data: append(data, extra...)})
	}
	refuse := false
	c := newPairClient(t, func(req netlink.Message) [][]byte {
		switch {
		case req.Header.Flags&netlink.Acknowledge == 0:
			return cleanAnswer(req)
		case refuse:
			return [][]byte{ack(unix.EEXIST, netlink.AcknowledgeTLVs|netlink.HeaderFlags(unix.NLM_F_CAPPED), nla(Attr(unix.NLMSGERR_ATTR_MSG), strz("Name exists")))}
		}
		return [][]byte{ack(0, 0, nil)}
	})
	if err := c.RenameDevice("rxe0", "rxe7"); err != nil {
		t.Fatalf("acknowledged write: %v", err)
	}
	refuse = true
	err := c.RenameDevice("rxe0", "rxe1")
	var e *Error
	if !errors.As(err, &e) || e.Extack != "Name exists" || !errors.Is(err, unix.EEXIST) ||
		err.Error() != "rename rxe0 to rxe1: an RDMA device named rxe1 already exists (kernel: Name exists)" {
		t.Fatalf("refused write: %v", err)
	}
	expectClean(t, c)
}
