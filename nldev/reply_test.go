package nldev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// pairKernel is a fake kernel at the other end of a datagram socket pair
// from a Client's blockingSocket: each request is answered by the
// datagrams answer returns, as the real socket delivers them, one at a
// time. seqMark in a datagram stands for the request's sequence number.
type pairKernel struct {
	fd     int
	answer func(req netlink.Message) [][]byte
}

// seqMark is replaced by the request's sequence number in answers.
var seqMark = []byte("SEQ!")

// pairTimeout bounds a fake kernel's silence.
var pairTimeout = 5 * time.Second

func newPairClient(t testing.TB, answer func(req netlink.Message) [][]byte) *Client {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A bug shows as an error, not a hang.
	if pairTimeout > 0 {
		tv := unix.NsecToTimeval(pairTimeout.Nanoseconds())
		unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	k := &pairKernel{fd: fds[1], answer: answer}
	served := make(chan struct{})
	go func() { k.serve(); close(served) }()
	c := &Client{t: newBlockingSocket(fds[0], false, 1)}
	t.Cleanup(func() {
		// The kernel must be gone before its descriptor number is reused.
		unix.Shutdown(fds[1], unix.SHUT_RDWR)
		<-served
		unix.Close(fds[1])
		c.Close()
	})
	return c
}

func (k *pairKernel) serve() {
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(k.fd, buf)
		if err != nil || n == 0 {
			return
		}
		var req netlink.Message
		if req.UnmarshalBinary(buf[:n]) != nil {
			return
		}
		seq := binary.NativeEndian.AppendUint32(nil, req.Header.Sequence)
		for _, d := range k.answer(req) {
			if _, err := unix.Write(k.fd, bytes.ReplaceAll(d, seqMark, seq)); err != nil {
				return
			}
		}
	}
}

// datagram marshals messages into one datagram; a zero Sequence becomes
// the request's (seqMark).
func datagram(msgs ...netlink.Message) []byte {
	var b []byte
	for _, m := range msgs {
		m.Header.Length = uint32(unix.NLMSG_HDRLEN + len(m.Data))
		mb, err := m.MarshalBinary()
		if err != nil {
			panic(err)
		}
		binary.NativeEndian.PutUint32(mb[0:], uint32(len(mb)))
		if m.Header.Sequence == 0 {
			copy(mb[8:12], seqMark)
		}
		b = append(b, mb...)
	}
	return b
}

func devMsg(index uint32, name string, flags netlink.HeaderFlags) netlink.Message {
	data := nla(AttrDevIndex, u32b(index))
	data = append(data, nla(AttrDevName, strz(name))...)
	return netlink.Message{Header: netlink.Header{Type: MessageType(CmdGet), Flags: flags}, Data: data}
}

func doneMsg() netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)}
}

// cleanAnswer is a correct answer to a device dump (two devices in two
// datagrams) or doit (one device).
func cleanAnswer(req netlink.Message) [][]byte {
	if req.Header.Flags&netlink.Dump == 0 {
		return [][]byte{datagram(devMsg(0, "rxe0", 0))}
	}
	return [][]byte{datagram(devMsg(0, "rxe0", netlink.Multi)), datagram(devMsg(1, "rxe1", netlink.Multi), doneMsg())}
}

// expectClean checks that a dump and a doit on c get the clean answers.
func expectClean(t testing.TB, c *Client) {
	t.Helper()
	devs, err := c.Devices()
	if err != nil || len(devs) != 2 || devs[0].Name != "rxe0" || devs[1].Name != "rxe1" {
		t.Fatalf("dump after: %+v, %v; want rxe0 and rxe1", devs, err)
	}
	if d, err := c.Device(0); err != nil || d.Name != "rxe0" {
		t.Fatalf("doit after: %+v, %v; want rxe0", d, err)
	}
}

// TestReceiveErrorMidDump: a dump whose second datagram cannot be received
// (larger than the buffer) fails; what is left of it must not answer the
// next requests. It used to: the next dump returned an empty list without
// error (the stale NLMSG_DONE ended it) and the doit after failed with
// "mismatched sequence".
func TestReceiveErrorMidDump(t *testing.T) {
	calls := 0
	c := newPairClient(t, func(req netlink.Message) [][]byte {
		if calls++; calls > 1 {
			return cleanAnswer(req)
		}
		return [][]byte{
			datagram(devMsg(0, "rxe0", netlink.Multi)),
			make([]byte, receiveBufferSize+8), // truncated: a receive error
			datagram(devMsg(1, "rxe1", netlink.Multi), doneMsg()),
		}
	})
	if _, err := c.Devices(); !errors.Is(err, errTruncated) {
		t.Fatalf("first dump: error %v, want the truncated datagram", err)
	}
	expectClean(t, c)
}

// TestStaleReplies: leftovers of earlier requests (data, an extended-ack
// error, an interrupted dump part, a DONE) before the reply are dropped; a
// reply split over datagrams and flagged DUMP_INTR is retried.
func TestStaleReplies(t *testing.T) {
	stale := func(m netlink.Message) netlink.Message { m.Header.Sequence = 7; return m }
	extAck := extAckError(unix.EINVAL, "Unknown device")
	cases := map[string][][]byte{
		"stale data and DONE": {datagram(stale(devMsg(5, "old", netlink.Multi)), stale(doneMsg()))},
		"stale extended ack":  {datagram(stale(extAck))},
		"stale interrupted":   {datagram(stale(devMsg(5, "old", netlink.Multi|netlink.DumpInterrupted)))},
	}
	for name, before := range cases {
		t.Run(name, func(t *testing.T) {
			c := newPairClient(t, func(req netlink.Message) [][]byte { return append(append([][]byte{}, before...), cleanAnswer(req)...) })
			expectClean(t, c)
		})
	}
	t.Run("interrupted dump is retried", func(t *testing.T) {
		calls := 0
		c := newPairClient(t, func(req netlink.Message) [][]byte {
			if calls++; calls == 1 {
				return [][]byte{datagram(devMsg(0, "rxe0", netlink.Multi|netlink.DumpInterrupted)), datagram(doneMsg())}
			}
			return cleanAnswer(req)
		})
		expectClean(t, c)
	})
	t.Run("extended ack of this request", func(t *testing.T) {
		c := newPairClient(t, func(req netlink.Message) [][]byte { return [][]byte{datagram(extAck)} })
		if _, err := c.Device(9); err == nil || !strings.Contains(err.Error(), "(kernel: Unknown device)") {
			t.Fatalf("error %v, want the kernel's message", err)
		}
	})
}

// extAckError is an NLMSG_ERROR with NLM_F_ACK_TLVS: errno, the echoed
// request header (capped), NLMSGERR_ATTR_MSG.
func extAckError(errno unix.Errno, msg string) netlink.Message {
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	data = append(data, make([]byte, 16)...) // the echoed header
	binary.NativeEndian.PutUint32(data[4:], 16)
	data = append(data, nla(Attr(unix.NLMSGERR_ATTR_MSG), strz(msg))...)
	return netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.AcknowledgeTLVs | netlink.HeaderFlags(unix.NLM_F_CAPPED)}, Data: data}
}

// TestBlockedReceiveLetsGCRun: a reply that is slow to come must not stop
// the world. The receive used to be a raw system call, which the scheduler
// cannot take the P from: a GC waited for the receive to end. Here the
// reply comes only once a GC has finished, so the old receive deadlocks
// (the stopped world stops any watchdog too: go test's -timeout reports
// it, with the stuck recvfrom in the goroutine dump).
func TestBlockedReceiveLetsGCRun(t *testing.T) {
	defer func(d time.Duration) { pairTimeout = d }(pairTimeout)
	pairTimeout = 0 // block as a socket without SO_RCVTIMEO does
	gcDone := make(chan struct{})
	c := newPairClient(t, func(req netlink.Message) [][]byte {
		<-gcDone
		return cleanAnswer(req)
	})
	result := make(chan error, 1)
	go func() {
		_, err := c.Device(0)
		result <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it block in recvfrom
	runtime.GC()
	close(gcDone)
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// TestReceiveTimeout: a reply that never comes ends in ErrNoReply.
func TestReceiveTimeout(t *testing.T) {
	defer func(d time.Duration) { pairTimeout = d }(pairTimeout)
	pairTimeout = 100 * time.Millisecond
	c := newPairClient(t, func(netlink.Message) [][]byte { return nil })
	if _, err := c.Devices(); !errors.Is(err, ErrNoReply) {
		t.Fatalf("error %v, want ErrNoReply", err)
	}
}

// FuzzReplies sends arbitrary datagrams (seqMark: the request's sequence
// number) before a dump's DONE: the dump may fail but not panic or hang,
// and whatever was left must not answer the next requests.
func FuzzReplies(f *testing.F) {
	f.Add(datagram(devMsg(0, "rxe0", netlink.Multi)), datagram(devMsg(1, "rxe1", netlink.Multi|netlink.DumpInterrupted)))
	f.Add(datagram(extAckError(unix.ENOENT, "no")), []byte{})
	f.Add(datagram(netlink.Message{Header: netlink.Header{Type: netlink.Error, Sequence: 3}, Data: make([]byte, 20)}), datagram(doneMsg()))
	for _, kv := range []string{"6.1", "6.12"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", kv, "nl", "*dump*.bin"))
		for _, file := range files[:min(len(files), 4)] {
			if b, err := os.ReadFile(file); err == nil && len(b) >= 16 {
				b = bytes.Clone(b)
				copy(b[8:12], seqMark)
				f.Add(b, []byte{})
			}
		}
	}
	f.Fuzz(func(t *testing.T, d1, d2 []byte) {
		if len(d1) > 4096 || len(d2) > 4096 {
			return
		}
		calls := 0
		c := newPairClient(t, func(req netlink.Message) [][]byte {
			if calls++; calls > 1 {
				return cleanAnswer(req)
			}
			return [][]byte{d1, d2, datagram(doneMsg())}
		})
		c.Devices()
		expectClean(t, c)
	})
}
