package verbsprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grdma/grdma/internal/spin"
	"github.com/grdma/grdma/uverbs"
)

// payloadSize is the bytes each operation moves: more than one path MTU
// (up to 4096), so that messages are segmented and reassembled.
const payloadSize = 8192

// The memory region's parts, payloadSize bytes each.
const (
	regionSource   = iota // what is sent and written
	regionReceive         // the SEND lands here
	regionWritten         // the RDMA WRITE lands here
	regionReadBack        // the RDMA READ of regionWritten lands here
	regionCount
)

// Work request IDs, to tell the completions apart.
const (
	wrRecv uint64 = iota + 1
	wrSend
	wrWrite
	wrRead
)

// traffic is a test's data path: posting work requests, polling
// completions.
type traffic struct {
	e  *testEnv
	qp dataPath
	cq completions
}

// newTraffic returns the Conn's data path, or false when the driver has
// none grdma knows.
func newTraffic(e *testEnv) (*traffic, bool) {
	qp, ok := e.conn.qp.(dataPath)
	if !ok {
		return nil, false
	}
	cq, ok := e.conn.cq.(completions)
	if !ok {
		return nil, false
	}
	return &traffic{e: e, qp: qp, cq: cq}, true
}

// WCError is a work completion with an error status.
type WCError struct {
	WC uverbs.WC
}

func (e *WCError) Error() string {
	return fmt.Sprintf("work completion %s (wr %d): %s (status %d, vendor error %#x)",
		e.WC.Opcode, e.WC.WRID, e.WC.Status, uint32(e.WC.Status), e.WC.VendorErr)
}

// CompletionTimeoutError means completions did not come in time.
type CompletionTimeoutError struct {
	Want, Got int
	Timeout   time.Duration
}

func (e *CompletionTimeoutError) Error() string {
	return fmt.Sprintf("%d of %d completions within %v", e.Got, e.Want, e.Timeout)
}

// PayloadMismatchError means the data that arrived is not what was sent.
type PayloadMismatchError struct {
	Operation string
	Offset    int // of the first differing byte
	Got, Want byte
}

func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("%s payload differs from what was sent at byte %d: %#02x, want %#02x",
		e.Operation, e.Offset, e.Got, e.Want)
}

// operation is one transfer through the queue pair: the requests to post,
// the completions they must produce, and the memory that must then hold
// the payload.
type operation struct {
	name   string         // as the verification error names it
	recv   *uverbs.RecvWR // posted before send
	send   uverbs.SendWR  // signalled
	expect []expectedWC   // the completions, in any order
	landed []byte         // must then equal payload
	detail string         // what passing means
}

// expectedWC is a completion an operation must produce; byteLen < 0
// means any length.
type expectedWC struct {
	wrID    uint64
	opcode  uverbs.WCOpcode
	byteLen int
}

// run posts the operation's requests, waits for their completions and
// compares the memory the payload landed in with payload.
func (t *traffic) run(op operation, payload []byte) (string, error) {
	if op.recv != nil {
		if err := t.qp.PostRecv(*op.recv); err != nil {
			return "", err
		}
	}
	op.send.Flags |= uverbs.SendSignaled
	if err := t.qp.PostSend(op.send); err != nil {
		return "", err
	}
	wcs, err := t.await(len(op.expect))
	if err != nil {
		return "", err
	}
	for _, e := range op.expect {
		if err := expect(wcs, e.wrID, e.opcode, e.byteLen); err != nil {
			return "", err
		}
	}
	if err := verify(op.name, op.landed, payload); err != nil {
		return "", err
	}
	return op.detail, nil
}

// send posts a receive for a SEND of a fresh payload.
func (t *traffic) send() (string, error) {
	m := t.e.conn.mr
	randomPayload(m.region(regionSource))
	clear(m.region(regionReceive))
	return t.run(operation{
		name:   "SEND",
		recv:   &uverbs.RecvWR{ID: wrRecv, SGL: []uverbs.SGE{m.sge(regionReceive)}},
		send:   uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{m.sge(regionSource)}},
		expect: []expectedWC{{wrSend, uverbs.WCSend, -1}, {wrRecv, uverbs.WCRecv, m.part}},
		landed: m.region(regionReceive),
		detail: fmt.Sprintf("%d bytes received and verified", m.part),
	}, m.region(regionSource))
}

// rdmaWrite writes a fresh payload into the region's written part.
func (t *traffic) rdmaWrite() (string, error) {
	m := t.e.conn.mr
	randomPayload(m.region(regionSource))
	clear(m.region(regionWritten))
	return t.run(operation{
		name: "RDMA WRITE",
		send: uverbs.SendWR{ID: wrWrite, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{m.sge(regionSource)},
			RemoteAddr: m.sge(regionWritten).Addr, RKey: m.mr.RKey},
		expect: []expectedWC{{wrWrite, uverbs.WCRDMAWrite, -1}},
		landed: m.region(regionWritten),
		detail: fmt.Sprintf("%d bytes written and verified", m.part),
	}, m.region(regionSource))
}

// rdmaRead reads back over the wire what rdmaWrite wrote.
func (t *traffic) rdmaRead() (string, error) {
	m := t.e.conn.mr
	clear(m.region(regionReadBack))
	return t.run(operation{
		name: "RDMA READ",
		send: uverbs.SendWR{ID: wrRead, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{m.sge(regionReadBack)},
			RemoteAddr: m.sge(regionWritten).Addr, RKey: m.mr.RKey},
		expect: []expectedWC{{wrRead, uverbs.WCRDMARead, m.part}},
		landed: m.region(regionReadBack),
		detail: fmt.Sprintf("%d bytes read back and verified", m.part),
	}, m.region(regionWritten))
}

// spinFor is how long await spins before it sleeps between polls:
// completions on rxe take tens of microseconds, more than a sleep's
// granularity.
const spinFor = 10 * time.Millisecond

// await polls the completion queue for n completions, failing on the
// first error status.
func (t *traffic) await(n int) ([]uverbs.WC, error) {
	wcs := make([]uverbs.WC, n)
	got := 0
	timeout := t.e.conn.dev.opts.CompletionTimeout
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.e.ctx, timeout)
	defer cancel()
	for empty := 0; got < n; {
		var k int
		if t.e.conn.channel != nil {
			var err error
			if k, err = t.cq.Wait(ctx, wcs[got:]); err != nil {
				if t.e.ctx.Err() != nil {
					return nil, interruption(t.e.ctx)
				}
				if errors.Is(err, context.DeadlineExceeded) {
					return nil, &CompletionTimeoutError{Want: n, Got: got, Timeout: timeout}
				}
				return nil, err
			}
		} else {
			k = t.cq.Poll(wcs[got:])
		}
		for _, wc := range wcs[got : got+k] {
			if wc.Status != uverbs.WCSuccess {
				return nil, &WCError{WC: wc}
			}
		}
		got += k
		if got == n || k > 0 {
			empty = 0
			continue
		}
		if empty++; t.e.conn.dev.driver.software {
			spin.Empty(empty)
		}
		switch waited := time.Since(start); {
		case waited > timeout:
			return nil, &CompletionTimeoutError{Want: n, Got: got, Timeout: timeout}
		case waited < spinFor:
			spin.Yield()
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
	return wcs, nil
}

// UnexpectedCompletionError means a completion is not the one expected.
type UnexpectedCompletionError struct {
	WRID    uint64
	Problem string
}

func (e *UnexpectedCompletionError) Error() string {
	return fmt.Sprintf("completion of work request %d: %s", e.WRID, e.Problem)
}

// expect checks that wcs hold a completion of work request id with the
// opcode and, unless byteLen is negative, the length.
func expect(wcs []uverbs.WC, id uint64, opcode uverbs.WCOpcode, byteLen int) error {
	for _, wc := range wcs {
		if wc.WRID != id {
			continue
		}
		if wc.Opcode != opcode {
			return &UnexpectedCompletionError{WRID: id, Problem: fmt.Sprintf("opcode %s, want %s", wc.Opcode, opcode)}
		}
		if byteLen >= 0 && wc.ByteLen != uint32(byteLen) {
			return &UnexpectedCompletionError{WRID: id, Problem: fmt.Sprintf("%d bytes, want %d", wc.ByteLen, byteLen)}
		}
		return nil
	}
	return &UnexpectedCompletionError{WRID: id, Problem: "missing"}
}

func verify(operation string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	return &PayloadMismatchError{Operation: operation, Offset: i, Got: got[i], Want: want[i]}
}
