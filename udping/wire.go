package udping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The datagrams of a UD ping, big-endian, HeaderSize bytes of header then
// zeros up to the datagram's length:
//
//	offset size
//	 0      4   magic "gRUP"
//	 4      1   version (1)
//	 5      1   kind: 1 probe, 2 echo (the first reply), 3 report (the second)
//	 6      2   length: the datagram's bytes, header included
//	 8      8   session: the prober's random identity
//	16      8   id: the probe's number in the session
//	24      8   delay: a report's, or an echo's with FlagEchoDelay: the
//	            responder's delay in nanoseconds
//	32      4   flags: a report's FlagHardwareTimestamps; a probe's and
//	            its echo's FlagEchoDelay
//	36      4   reserved, zero
//
// A probe is as long as the prober chose; its echo is as long as the
// probe, so that both directions carry the size; the report is a header
// alone. A probe with FlagEchoDelay asks for one reply: its echo carries
// the delay (and the flag), and no report follows.

// HeaderSize is the bytes of a datagram's header: the smallest probe.
const HeaderSize = 40

// MaxDatagram is the largest datagram either side sends or takes: the
// largest RoCE MTU.
const MaxDatagram = 4096

// Kind is what a datagram is.
type Kind uint8

// Kinds of datagrams.
const (
	KindProbe  Kind = 1
	KindEcho   Kind = 2 // the first reply: at once, as long as the probe
	KindReport Kind = 3 // the second reply: the responder's delay
)

func (k Kind) String() string {
	switch k {
	case KindProbe:
		return "probe"
	case KindEcho:
		return "echo"
	case KindReport:
		return "report"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// FlagHardwareTimestamps says a report's delay comes from the device's
// completion timestamps.
const FlagHardwareTimestamps = 1

// FlagEchoDelay, in a probe, asks for one reply: an echo that carries
// the responder's delay, with no report after it; in an echo, says it
// carries the delay. A prober sets it only for a responder whose control
// channel said it takes it (Address.EchoDelay), and only on probes of
// EchoDelayMax bytes or less.
const FlagEchoDelay = 2

// EchoDelayMax is the largest probe a prober asks one reply for. The
// report exists for two things: a delay known only once the echo left
// (hardware timestamps, which grdma does not read), and telling an echo
// lost from a probe lost — on a path that drops large datagrams, the
// header-sized report passes where the echo does not. An echo of 64
// bytes is a report's size on the wire give or take 24 bytes: no
// size-dependent loss tells them apart. So small probes, a fast
// pingmesh's 64-byte probes, cost one datagram back, not two: in the
// guests the send doorbells (two a probe) were 56 % of the responder's
// CPU, and a responder sending no report cut a 64-byte ping's round trip
// from 1415 to 1042 µs (6.1) and 1116 to 1040 µs (6.12).
const EchoDelayMax = 64

// Version is the version of the datagrams' format.
const Version = 1

var magic = [4]byte{'g', 'R', 'U', 'P'}

// MaxDelay bounds the delay a report may carry: a responder that took
// longer answered a probe the prober gave up on long ago.
const MaxDelay = 10 * time.Second

// Header is a datagram's header.
type Header struct {
	Kind    Kind
	Length  int // the datagram's bytes
	Session uint64
	ID      uint64
	Delay   time.Duration // KindReport, or KindEcho with FlagEchoDelay
	Flags   uint32
}

// AppendDatagram appends the datagram h describes: its header, then zeros
// up to h.Length (at least HeaderSize).
func AppendDatagram(b []byte, h Header) []byte {
	n := max(h.Length, HeaderSize)
	start := len(b)
	b = append(b, make([]byte, n)...)
	PutHeader(b[start:], h)
	return b
}

// PutHeader writes h into the first HeaderSize bytes of b, its length
// field being len(b).
func PutHeader(b []byte, h Header) {
	be := binary.BigEndian
	copy(b[0:4], magic[:])
	b[4], b[5] = Version, byte(h.Kind)
	be.PutUint16(b[6:], uint16(len(b)))
	be.PutUint64(b[8:], h.Session)
	be.PutUint64(b[16:], h.ID)
	be.PutUint64(b[24:], uint64(max(h.Delay, 0)))
	be.PutUint32(b[32:], h.Flags)
	be.PutUint32(b[36:], 0)
}

// ErrNotPing means a datagram is not a UD ping's: another program's, or a
// peer's garbage.
var ErrNotPing = errors.New("not a grdma UD ping datagram")

// ParseHeader reads the header of datagram b (the payload of one receive,
// without its GRH), checking everything a peer could get wrong: the
// magic, the version, the kind, the length against what arrived, a
// report's delay against MaxDelay, the reserved bytes.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize || [4]byte(b[0:4]) != magic {
		return Header{}, ErrNotPing
	}
	be := binary.BigEndian
	if b[4] != Version {
		return Header{}, fmt.Errorf("a UD ping datagram of version %d; this side speaks %d", b[4], Version)
	}
	h := Header{Kind: Kind(b[5]), Length: int(be.Uint16(b[6:])), Session: be.Uint64(b[8:]), ID: be.Uint64(b[16:]),
		Flags: be.Uint32(b[32:])}
	delay := be.Uint64(b[24:])
	switch {
	case h.Kind != KindProbe && h.Kind != KindEcho && h.Kind != KindReport:
		return Header{}, fmt.Errorf("a UD ping datagram of unknown %s", h.Kind)
	case h.Length != len(b):
		return Header{}, fmt.Errorf("a UD ping %s of %d bytes says it has %d", h.Kind, len(b), h.Length)
	case be.Uint32(b[36:]) != 0:
		return Header{}, fmt.Errorf("a UD ping %s with reserved bytes set", h.Kind)
	case h.Kind == KindProbe && delay != 0:
		return Header{}, fmt.Errorf("a UD ping probe with a delay")
	case h.Kind == KindEcho && delay != 0 && h.Flags&FlagEchoDelay == 0:
		return Header{}, fmt.Errorf("a UD ping echo with a delay but not FlagEchoDelay")
	case h.Kind == KindReport && h.Length != HeaderSize:
		return Header{}, fmt.Errorf("a UD ping report of %d bytes, not %d", h.Length, HeaderSize)
	case delay > uint64(MaxDelay):
		return Header{}, fmt.Errorf("a UD ping %s of a delay over %v", h.Kind, MaxDelay)
	case h.Kind == KindReport && h.Flags&^FlagHardwareTimestamps != 0,
		h.Kind != KindReport && h.Flags&^FlagEchoDelay != 0:
		return Header{}, fmt.Errorf("a UD ping %s with unknown flags %#x", h.Kind, h.Flags)
	}
	h.Delay = time.Duration(delay)
	return h, nil
}
