package cminterop

import (
	"context"
	"fmt"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
)

// ucmatose's exchange: count SENDs of size bytes each way, the server's
// first; every receive is posted before the connection. A slot has a
// byte more than size, so that a longer message is told by its length.

func recvID(i int) uint64 { return 1<<32 | uint64(i) }
func sendID(i int) uint64 { return 2<<32 | uint64(i) }

// ucmatoseLayout is where message i's receive and send buffers are.
type ucmatoseLayout struct{ count, size int }

func (l ucmatoseLayout) slot() int         { return l.size + 1 }
func (l ucmatoseLayout) recvOff(i int) int { return i * l.slot() }
func (l ucmatoseLayout) sendOff(i int) int { return (l.count + i) * l.slot() }
func (l ucmatoseLayout) bytes() int        { return 2 * l.count * l.slot() }

func (l ucmatoseLayout) postRecvs(e *endpoint) error {
	for i := range l.count {
		if err := e.postRecv(recvID(i), l.recvOff(i), l.slot()); err != nil {
			return fmt.Errorf("receive %d of %d: %w", i, l.count, err)
		}
	}
	return nil
}

// receive waits for the count messages, each exactly size bytes.
func (l ucmatoseLayout) receive(ctx context.Context, e *endpoint) error {
	for i := range l.count {
		wc, err := e.completion(ctx, recvID(i), fmt.Sprintf("message %d of %d", i+1, l.count))
		if err != nil {
			return err
		}
		if wc.Opcode != uverbs.WCRecv || int(wc.ByteLen) != l.size {
			return fmt.Errorf("message %d of %d: %d bytes (%v); ucmatose sends %d", i+1, l.count, wc.ByteLen, wc.Opcode, l.size)
		}
	}
	return nil
}

// send sends the count messages and waits for their completions.
func (l ucmatoseLayout) send(ctx context.Context, e *endpoint) error {
	for i := range l.count {
		if err := e.post(uverbs.SendWR{ID: sendID(i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(l.sendOff(i), l.size)}}); err != nil {
			return fmt.Errorf("SEND %d of %d: %w", i+1, l.count, err)
		}
	}
	for i := range l.count {
		if _, err := e.completion(ctx, sendID(i), fmt.Sprintf("SEND %d of %d", i+1, l.count)); err != nil {
			return err
		}
	}
	return nil
}

// ucmatoseClient connects to ucmatose's server (ucmatose without -s):
// it receives count messages, replies count, and ends when the server
// disconnects.
func ucmatoseClient(ctx context.Context, s *session, cfg Config, count, size int) error {
	l := ucmatoseLayout{count, size}
	s.res.Size = size
	param := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if err := s.dial(ctx, cfg, uint32(count), uint32(count), l.bytes(), param, l.postRecvs); err != nil {
		return err
	}
	s.watch(ctx)
	if err := s.step(string(Ucmatose), func() (string, error) {
		t0 := time.Now()
		defer func() { s.res.Elapsed = time.Since(t0) }()
		if err := l.receive(ctx, s.ep); err != nil {
			return "", err
		}
		if err := l.send(ctx, s.ep); err != nil {
			return "", err
		}
		s.res.Count, s.res.Bytes = count, 2*uint64(count*size)
		return fmt.Sprintf("%d messages of %d bytes each way", count, size), nil
	}); err != nil {
		return err
	}
	// The server ends the connection (ucmatose's does once it has the
	// replies); this side answers.
	if err := s.step("wait for the server's disconnect", func() (string, error) {
		select {
		case <-s.gone:
			return "", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}); err != nil {
		return err
	}
	return s.hangUp(ctx)
}

// ucmatoseServer serves one ucmatose client (ucmatose -s ADDR): it
// sends count messages once the connection is established, receives
// count replies, and disconnects.
func ucmatoseServer(ctx context.Context, s *session, cfg Config, count, size int) error {
	l := ucmatoseLayout{count, size}
	s.res.Size = size
	if err := s.accept(ctx, cfg, uint32(count), uint32(count), l.bytes(), l.postRecvs); err != nil {
		return err
	}
	s.watch(ctx)
	if err := s.step(string(Ucmatose), func() (string, error) {
		t0 := time.Now()
		defer func() { s.res.Elapsed = time.Since(t0) }()
		if err := l.send(ctx, s.ep); err != nil {
			return "", err
		}
		if err := l.receive(ctx, s.ep); err != nil {
			return "", err
		}
		s.res.Count, s.res.Bytes = count, 2*uint64(count*size)
		return fmt.Sprintf("%d messages of %d bytes each way", count, size), nil
	}); err != nil {
		return err
	}
	return s.hangUp(ctx)
}
