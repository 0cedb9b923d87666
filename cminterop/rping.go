package cminterop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
)

// RpingInfo is rping's one message (struct rping_rdma_info): a buffer
// the peer may access, 16 bytes big-endian on the wire.
type RpingInfo struct {
	Addr uint64
	RKey uint32
	Size uint32
}

// RpingInfoLen is the message's length; rping treats any other as
// "bogus data".
const RpingInfoLen = 16

// MarshalBinary is the message as rping sends it.
func (m RpingInfo) MarshalBinary() ([]byte, error) {
	b := make([]byte, RpingInfoLen)
	binary.BigEndian.PutUint64(b, m.Addr)
	binary.BigEndian.PutUint32(b[8:], m.RKey)
	binary.BigEndian.PutUint32(b[12:], m.Size)
	return b, nil
}

// UnmarshalBinary decodes a received message: exactly RpingInfoLen
// bytes.
func (m *RpingInfo) UnmarshalBinary(b []byte) error {
	if len(b) != RpingInfoLen {
		return fmt.Errorf("rping message of %d bytes; rping's are %d", len(b), RpingInfoLen)
	}
	m.Addr = binary.BigEndian.Uint64(b)
	m.RKey = binary.BigEndian.Uint32(b[8:])
	m.Size = binary.BigEndian.Uint32(b[12:])
	return nil
}

// RpingData is what rping's client sends in ping n (from 0) of size
// bytes: "rdma-ping-n: " and then letters from 'A' to 'z' in turn,
// starting one further each ping, and a NUL last.
func RpingData(n, size int) []byte {
	b := make([]byte, size)
	i := copy(b, fmt.Sprintf("rdma-ping-%d: ", n))
	c := byte(65 + n%58)
	for ; i < size; i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	if size > 0 {
		b[size-1] = 0
	}
	return b
}

// rpingNames name the work requests in errors: a message longer than
// the receive fails it (and the queue pair).
var rpingNames = map[uint64]string{
	wrRecv: "the receive of a 16-byte rping message (a longer message fails it)",
	wrSend: "the SEND of a 16-byte rping message", wrRDMA: "the RDMA READ or WRITE",
}

// Work request IDs of both protocols.
const (
	wrRecv  = 1
	wrSend  = 2
	wrRDMA  = 3
	infoOff = 0  // the received message
	sendOff = 32 // the message sent
	dataOff = 64 // the data buffers
)

// rpingClient pings rping -s count times with size bytes, as rping -c
// -V does: its start buffer is read by the server, the server writes
// it back into the second buffer, and the two must be equal.
func rpingClient(ctx context.Context, s *session, cfg Config, count, size int) error {
	res := s.res
	res.Size = size
	start, back := dataOff, dataOff+size
	// rping's client asks for responder resources (the server reads its
	// buffer) and retries 7 times.
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if err := s.dial(ctx, cfg, 4, 2, dataOff+2*size, param, func(e *endpoint) error {
		e.names = rpingNames
		return e.postRecv(wrRecv, infoOff, RpingInfoLen+1)
	}); err != nil {
		return err
	}
	s.watch(ctx)
	e := s.ep
	if err := s.step(string(Rping), func() (string, error) {
		t0 := time.Now()
		defer func() { res.Elapsed = time.Since(t0) }()
		for ping := 0; ping < count; ping++ {
			data := RpingData(ping, size)
			copy(e.buf[start:], data)
			clear(e.buf[back : back+size])
			if err := rpingSend(ctx, e, RpingInfo{Addr: e.mr.Addr + uint64(start), RKey: e.mr.RKey, Size: uint32(size)}); err != nil {
				return "", fmt.Errorf("ping %d: %w", ping, err)
			}
			if err := rpingGoAhead(ctx, e); err != nil {
				return "", fmt.Errorf("ping %d, after the server's RDMA READ: %w", ping, err)
			}
			if err := rpingSend(ctx, e, RpingInfo{Addr: e.mr.Addr + uint64(back), RKey: e.mr.RKey, Size: uint32(size)}); err != nil {
				return "", fmt.Errorf("ping %d: %w", ping, err)
			}
			if err := rpingGoAhead(ctx, e); err != nil {
				return "", fmt.Errorf("ping %d, after the server's RDMA WRITE: %w", ping, err)
			}
			if !bytes.Equal(e.buf[back:back+size], data) {
				return "", fmt.Errorf("ping %d: the server wrote back other data than it read (rping -V's check)", ping)
			}
			res.Count++
			res.Bytes += 2 * uint64(size)
		}
		return fmt.Sprintf("%d pings of %d bytes, validated", res.Count, size), nil
	}); err != nil {
		return err
	}
	return s.hangUp(ctx)
}

// rpingSend sends one message and waits for its completion.
func rpingSend(ctx context.Context, e *endpoint, m RpingInfo) error {
	b, _ := m.MarshalBinary()
	copy(e.buf[sendOff:], b)
	if err := e.post(uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(sendOff, RpingInfoLen)}}); err != nil {
		return err
	}
	_, err := e.completion(ctx, wrSend, "SEND")
	return err
}

// rpingReceive waits for the next message, checks its length, and posts
// the receive again (before anything is sent: the peer answers at once).
func rpingReceive(ctx context.Context, e *endpoint) (RpingInfo, error) {
	var m RpingInfo
	wc, err := e.completion(ctx, wrRecv, "RECV")
	if err != nil {
		return m, err
	}
	if wc.Opcode != uverbs.WCRecv {
		return m, fmt.Errorf("RECV completed as %v", wc.Opcode)
	}
	if err := m.UnmarshalBinary(e.buf[infoOff : infoOff+min(int(wc.ByteLen), RpingInfoLen+1)]); err != nil {
		if wc.ByteLen > RpingInfoLen {
			return m, fmt.Errorf("rping message of at least %d bytes; rping's are %d", wc.ByteLen, RpingInfoLen)
		}
		return m, err
	}
	return m, e.postRecv(wrRecv, infoOff, RpingInfoLen+1)
}

// rpingGoAhead waits for the server's go-ahead: 16 bytes, whatever they
// hold (rping's server never fills them).
func rpingGoAhead(ctx context.Context, e *endpoint) error {
	_, err := rpingReceive(ctx, e)
	return err
}

// rpingServer serves one rping -c: each ping it RDMA READs the client's
// buffer, says go ahead, RDMA WRITEs what it read into the client's
// second buffer, and says go ahead again; until the client disconnects
// (or count pings, when count is not 0).
func rpingServer(ctx context.Context, s *session, cfg Config, count int) error {
	res := s.res
	data := dataOff
	// The receive takes a byte more than a message: a longer one is then
	// told apart (its length), not a failed receive.
	if err := s.accept(ctx, cfg, 4, 2, dataOff+MaxSize+1, func(e *endpoint) error {
		e.names = rpingNames
		return e.postRecv(wrRecv, infoOff, RpingInfoLen+1)
	}); err != nil {
		return err
	}
	s.watch(ctx)
	e := s.ep
	var t0 time.Time
	err := s.step(string(Rping), func() (string, error) {
		defer func() {
			if !t0.IsZero() {
				res.Elapsed = time.Since(t0)
			}
		}()
		for ping := 0; count == 0 || ping < count; ping++ {
			m, err := rpingReceive(ctx, e)
			if err != nil {
				if ping > 0 && isPeerGone(err) {
					break // the client's end: it sent its count
				}
				return "", fmt.Errorf("ping %d: %w", ping, err)
			}
			if t0.IsZero() {
				t0 = time.Now()
			}
			if m.Size == 0 || m.Size > MaxSize {
				return "", fmt.Errorf("ping %d: the client names a buffer of %d bytes; rping's are 1 to %d", ping, m.Size, MaxSize)
			}
			n := int(m.Size)
			if err := e.post(uverbs.SendWR{ID: wrRDMA, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{e.sge(data, n)}, RemoteAddr: m.Addr, RKey: m.RKey}); err != nil {
				return "", err
			}
			if _, err := e.completion(ctx, wrRDMA, fmt.Sprintf("ping %d: RDMA READ of %d bytes from the client", ping, n)); err != nil {
				return "", err
			}
			if ping == 0 {
				res.Sample = sample(e.buf[data : data+n])
			}
			if err := rpingSend(ctx, e, RpingInfo{}); err != nil {
				return "", fmt.Errorf("ping %d: %w", ping, err)
			}
			m2, err := rpingReceive(ctx, e)
			if err != nil {
				return "", fmt.Errorf("ping %d, second message: %w", ping, err)
			}
			// What rping writes back: the string read, with its NUL.
			w := n
			if i := bytes.IndexByte(e.buf[data:data+n], 0); i >= 0 {
				w = i + 1
			}
			if int(m2.Size) < w {
				return "", fmt.Errorf("ping %d: the client's second buffer has %d bytes, less than the %d to write back", ping, m2.Size, w)
			}
			if err := e.post(uverbs.SendWR{ID: wrRDMA, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{e.sge(data, w)}, RemoteAddr: m2.Addr, RKey: m2.RKey}); err != nil {
				return "", err
			}
			if _, err := e.completion(ctx, wrRDMA, fmt.Sprintf("ping %d: RDMA WRITE of %d bytes to the client", ping, w)); err != nil {
				return "", err
			}
			if err := rpingSend(ctx, e, RpingInfo{}); err != nil {
				return "", fmt.Errorf("ping %d: %w", ping, err)
			}
			res.Count++
			res.Size = n
			res.Bytes += uint64(n + w)
		}
		return fmt.Sprintf("%d pings of %d bytes served", res.Count, res.Size), nil
	})
	if err != nil {
		return err
	}
	return s.hangUp(ctx)
}

func isPeerGone(err error) bool { return errors.Is(err, ErrPeerGone) }

// sample is the peer's text up to its NUL, at most SampleLen bytes.
func sample(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b[:min(len(b), SampleLen)])
}
