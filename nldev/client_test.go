package nldev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// fakeKernel returns a Client whose socket is answered by fn.
func fakeKernel(t *testing.T, fn nltest.Func) *Client {
	t.Helper()
	c := NewClient(nltest.Dial(fn))
	t.Cleanup(func() { c.Close() })
	return c
}

// nla builds one attribute as the kernel lays it out: host-endian length
// and type, the value, padding to 4 bytes.
func nla(typ Attr, value []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(value)))
	b = binary.NativeEndian.AppendUint16(b, uint16(typ))
	b = append(b, value...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func strz(s string) []byte { return append([]byte(s), 0) }

func u32b(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// recordRequest answers every request with an ACK and keeps the requests.
func recordRequest(reqs *[]netlink.Message) nltest.Func {
	return func(req []netlink.Message) ([]netlink.Message, error) {
		*reqs = append(*reqs, req...)
		return nltest.Error(0, req)
	}
}

// deviceReply is a GET reply for one device, echoing the request header.
func deviceReply(req netlink.Message, index uint32, name string) netlink.Message {
	data := nla(AttrDevIndex, u32b(index))
	data = append(data, nla(AttrDevName, strz(name))...)
	data = append(data, nla(AttrPortIndex, u32b(1))...)
	return netlink.Message{Header: netlink.Header{Type: MessageType(CmdGet), Sequence: req.Header.Sequence, PID: req.Header.PID}, Data: data}
}

func TestAddLinkRequestBytes(t *testing.T) {
	var reqs []netlink.Message
	c := fakeKernel(t, recordRequest(&reqs))
	if err := c.AddLink("rxe0", "rxe", "eth0"); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 {
		t.Fatalf("sent %d messages, want 1", len(reqs))
	}
	req := reqs[0]
	// What iproute2 sends for `rdma link add rxe0 type rxe netdev eth0`:
	// NEWLINK (5123), REQUEST|ACK, DEV_NAME, LINK_TYPE, NDEV_NAME as strz.
	if req.Header.Type != 5123 || req.Header.Flags != netlink.Request|netlink.Acknowledge {
		t.Fatalf("header type %d flags %#x, want 5123 and 0x5", req.Header.Type, req.Header.Flags)
	}
	want := []byte{
		9, 0, 2, 0, 'r', 'x', 'e', '0', 0, 0, 0, 0, // DEV_NAME
		8, 0, 65, 0, 'r', 'x', 'e', 0, // LINK_TYPE
		9, 0, 51, 0, 'e', 't', 'h', '0', 0, 0, 0, 0, // NDEV_NAME
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("expected bytes are written for a little-endian host")
	}
	if !bytes.Equal(req.Data, want) {
		t.Fatalf("attributes\n got % x\nwant % x", req.Data, want)
	}
}

func TestWriteRequests(t *testing.T) {
	dump := func(req []netlink.Message) ([]netlink.Message, error) {
		if req[0].Header.Flags&netlink.Dump != 0 {
			return nltest.Multipart([]netlink.Message{deviceReply(req[0], 7, "rxe0"), {Header: req[0].Header}})
		}
		return nltest.Error(0, req)
	}
	tests := []struct {
		name  string
		call  func(c *Client) error
		cmd   Command
		attrs []byte
	}{
		{"delete", func(c *Client) error { return c.DeleteLink("rxe0") }, CmdDelLink, nla(AttrDevIndex, u32b(7))},
		{"rename", func(c *Client) error { return c.RenameDevice("rxe0", "rxe_a") }, CmdSet,
			append(nla(AttrDevIndex, u32b(7)), nla(AttrDevName, strz("rxe_a"))...)},
		{"netns", func(c *Client) error { return c.SetDeviceNetNS("rxe0", 5) }, CmdSet,
			append(nla(AttrDevIndex, u32b(7)), nla(AttrNetNSFD, u32b(5))...)},
		{"dim", func(c *Client) error { return c.SetAdaptiveModeration("rxe0", true) }, CmdSet,
			append(nla(AttrDevIndex, u32b(7)), nla(AttrDevDIM, []byte{1})...)},
		{"netns mode", func(c *Client) error { return c.SetNetNSMode(NetNSExclusive) }, CmdSysSet, nla(AttrSysNetnsMode, []byte{0})},
		{"qkey", func(c *Client) error { return c.SetPrivilegedQKey(true) }, CmdSysSet, nla(AttrSysPrivilegedQKeyMode, []byte{1})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last netlink.Message
			c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
				last = req[0]
				return dump(req)
			})
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			if last.Header.Type != MessageType(tt.cmd) || last.Header.Flags != netlink.Request|netlink.Acknowledge {
				t.Fatalf("last request type %d flags %#x, want %s with REQUEST|ACK", last.Header.Type, last.Header.Flags, tt.cmd)
			}
			if !bytes.Equal(last.Data, tt.attrs) {
				t.Fatalf("attributes\n got % x\nwant % x", last.Data, tt.attrs)
			}
		})
	}
}

func TestDoitGetSendsNoAck(t *testing.T) {
	var got netlink.HeaderFlags
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		got = req[0].Header.Flags
		return []netlink.Message{deviceReply(req[0], 3, "rxe3")}, nil
	})
	d, err := c.Device(3)
	if err != nil {
		t.Fatal(err)
	}
	// An ACK after the data reply would be read as the answer to the next request.
	if got != netlink.Request {
		t.Fatalf("flags %#x, want REQUEST only", got)
	}
	if d.Name != "rxe3" || d.Index != 3 || !d.Has(AttrDevName) || d.Has(AttrFWVersion) {
		t.Fatalf("decoded %+v", d)
	}
}

func TestLinkAddErrors(t *testing.T) {
	tests := []struct {
		errno unix.Errno
		typ   string
		want  string
	}{
		{unix.ENODEV, "rxe", "link add rxe0: netdev eth9 not found"},
		{unix.EINVAL, "rxe", "link type rxe is not available: load rdma_rxe"},
		{unix.EINVAL, "siw", "link type siw is not available: load siw"},
		{unix.EINVAL, "foo", "link type foo is not available: no kernel module provides rdma-link-foo"},
		{unix.ENFILE, "rxe", "an RDMA device named rxe0 already exists"},
		{unix.EEXIST, "rxe", "netdev eth9 already has an rxe device"},
		{unix.ENOENT, "rxe", "load crc32_generic"},
	}
	for _, tt := range tests {
		t.Run(tt.errno.Error(), func(t *testing.T) {
			c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
				return nltest.Error(int(tt.errno), req)
			})
			err := c.AddLink("rxe0", tt.typ, "eth9")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
			if !errors.Is(err, tt.errno) {
				t.Fatalf("error %v does not unwrap to %v", err, tt.errno)
			}
		})
	}
}

func TestInvalidNamesAreNotSent(t *testing.T) {
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		t.Fatalf("sent a request for an invalid name: % x", req[0].Data)
		return nil, nil
	})
	for _, name := range []string{"", strings.Repeat("a", 64), "rx/e", "rx e", "rxé", "rxe%d"} {
		var ia *InvalidArgumentError
		if err := c.AddLink(name, "rxe", "eth0"); !errors.As(err, &ia) {
			t.Errorf("AddLink(%q): %v, want an InvalidArgumentError", name, err)
		}
	}
	var ia *InvalidArgumentError
	if err := c.AddLink("rxe0", "rxe", "a-netdev-name-longer-than-ifnamsiz"); !errors.As(err, &ia) {
		t.Errorf("long netdev: %v, want an InvalidArgumentError", err)
	}
}

func TestDeviceNotFoundListsDevices(t *testing.T) {
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		return nltest.Multipart([]netlink.Message{deviceReply(req[0], 0, "rxe0"), deviceReply(req[0], 1, "rxe1"), {Header: req[0].Header}})
	})
	err := c.DeleteLink("nosuch")
	want := "RDMA device nosuch not found (devices: rxe0, rxe1)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestInterruptedDumpIsRetried(t *testing.T) {
	calls := 0
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		calls++
		first := deviceReply(req[0], 0, "rxe0")
		if calls == 1 {
			// A device was added while the kernel dumped: the reply is flagged.
			first.Header.Flags |= netlink.DumpInterrupted
			return nltest.Multipart([]netlink.Message{first, {Header: req[0].Header}})
		}
		return nltest.Multipart([]netlink.Message{first, deviceReply(req[0], 1, "rxe1"), {Header: req[0].Header}})
	})
	devs, err := c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(devs) != 2 || devs[1].Name != "rxe1" {
		t.Fatalf("after %d dumps got %d devices %+v; want the second, complete dump", calls, len(devs), devs)
	}
}

func TestAlwaysInterruptedDumpFails(t *testing.T) {
	calls := 0
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		calls++
		m := deviceReply(req[0], 0, "rxe0")
		m.Header.Flags |= netlink.DumpInterrupted
		return nltest.Multipart([]netlink.Message{m, {Header: req[0].Header}})
	})
	if _, err := c.Devices(); !errors.Is(err, ErrDumpInterrupted) {
		t.Fatalf("error %v, want ErrDumpInterrupted", err)
	}
	if calls != maxDumpRetries {
		t.Fatalf("%d attempts, want %d", calls, maxDumpRetries)
	}
}

func TestExtendedAckIsShown(t *testing.T) {
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		// NLMSG_ERROR with NLM_F_ACK_TLVS: errno, the echoed request (header
		// and payload, not capped), then NLMSGERR_ATTR_MSG.
		hdr, _ := req[0].MarshalBinary()
		errno := -int32(unix.EINVAL)
		data := binary.NativeEndian.AppendUint32(nil, uint32(errno))
		data = append(data, hdr...)
		msg := strz("Unknown device")
		data = binary.NativeEndian.AppendUint16(data, uint16(4+len(msg)))
		data = binary.NativeEndian.AppendUint16(data, unix.NLMSGERR_ATTR_MSG)
		data = append(data, msg...)
		for len(data)%4 != 0 {
			data = append(data, 0)
		}
		h := req[0].Header
		h.Type = netlink.Error
		h.Flags = netlink.AcknowledgeTLVs
		return []netlink.Message{{Header: h, Data: data}}, nil
	})
	_, err := c.Device(9)
	if err == nil || !strings.Contains(err.Error(), "(kernel: Unknown device)") {
		t.Fatalf("error %q, want the kernel's extended ack text", err)
	}
}

// TestNetNSMoveExplainsCause: EOPNOTSUPP has two causes; the mode tells.
func TestNetNSMoveExplainsCause(t *testing.T) {
	for mode, want := range map[uint8]string{
		NetNSShared:    "not possible in shared netns mode (run: grdma sys set netns exclusive)",
		NetNSExclusive: "the driver of rxe0 cannot move devices between network namespaces",
	} {
		c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
			h := req[0].Header
			switch {
			case h.Flags&netlink.Dump != 0:
				return nltest.Multipart([]netlink.Message{deviceReply(req[0], 7, "rxe0"), {Header: h}})
			case h.Type == MessageType(CmdSysGet):
				return []netlink.Message{{Header: netlink.Header{Type: h.Type, Sequence: h.Sequence, PID: h.PID}, Data: nla(AttrSysNetnsMode, []byte{mode})}}, nil
			}
			return nltest.Error(int(unix.EOPNOTSUPP), req)
		})
		if err := c.SetDeviceNetNS("rxe0", 5); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %d: %v, want %q", mode, err, want)
		}
	}
}
