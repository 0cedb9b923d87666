package udping

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/spin"
	"github.com/grdma/grdma/uverbs"
)

// endpoint is one UD queue pair with what it needs to send and receive
// datagrams: a receive completion queue on a channel, a send completion
// queue only polled, receive buffers always posted (each room for a GRH
// and MaxDatagram bytes, whatever a peer sends), and send buffers lent
// out until the send completes.
//
// Only receives wake a waiting endpoint: a send's completion is taken by
// the next poll. On 6.12 rxe completes a send from its worker after the
// post returned, so a send completion on the channel woke the loop a
// second time for each datagram it sent.
type endpoint struct {
	l    Local
	qkey uint32
	addr Address // where peers reach it, kept after close
	ch   *uverbs.CompChannel
	cq   *uverbs.RxeCQ // receives, on ch
	scq  *uverbs.RxeCQ // sends, polled
	qp   *uverbs.RxeQP
	buf  []byte
	mr   uverbs.MR

	recvs, sends int
	freeSends    []int       // send slots not in use
	posted       []time.Time // when each send slot's send was posted; zero when free
	wcs          []uverbs.WC
	// interrupted ends wait's polling as ch.Interrupt ends its sleep.
	interrupted atomic.Bool
}

// The slots of an endpoint's buffer: receives first, then sends.
const (
	// pollBatch is the most completions of each queue a wait returns.
	pollBatch = 32
	recvSlot  = uverbs.GRHSize + MaxDatagram
	sendSlot  = MaxDatagram
	// sendFlag marks a send's work request ID; a receive's is its slot.
	sendFlag = 1 << 32
	// sendInline: datagrams up to this size go inline (the pingmesh's
	// default 64-byte probes and their echoes, reports): the kernel then
	// reads no memory region for them.
	sendInline = EchoDelayMax
)

// newEndpoint makes a UD queue pair on l with recvs receives and sends
// send slots, brings it to RTS with qkey and posts every receive.
// Nothing is left behind on failure.
func newEndpoint(l Local, qkey uint32, recvs, sends int) (e *endpoint, err error) {
	if l.Context == nil {
		return nil, errors.New("udping: no device context")
	}
	e = &endpoint{l: l, qkey: qkey, recvs: recvs, sends: sends, wcs: make([]uverbs.WC, 2*pollBatch)}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	c := l.Context
	if e.ch, err = c.CreateCompChannel(); err != nil {
		return e, err
	}
	if e.cq, err = c.CreateRxeCQWith(uverbs.CQInit{CQE: uint32(recvs), Channel: e.ch}); err != nil {
		return e, err
	}
	if e.scq, err = c.CreateRxeCQ(uint32(sends)); err != nil {
		return e, err
	}
	if e.qp, err = c.CreateRxeQP(uverbs.QPInit{PD: l.PD, SendCQ: e.scq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeUD, SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: uint32(sends), MaxRecvWR: uint32(recvs), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: sendInline}}); err != nil {
		return e, err
	}
	if e.buf, err = uverbs.AllocBuffer(recvs*recvSlot + sends*sendSlot); err != nil {
		return e, err
	}
	if e.mr, err = c.RegMR(l.PD, e.buf, uverbs.AccessLocalWrite); err != nil {
		uverbs.FreeBuffer(e.buf)
		e.buf = nil
		return e, err
	}
	if err = c.ConnectUD(e.qp.QP(), l.Port, qkey, rand.Uint32()); err != nil {
		return e, err
	}
	for i := range recvs {
		if err = e.postRecv(i); err != nil {
			return e, err
		}
	}
	for i := range sends {
		e.freeSends = append(e.freeSends, i)
	}
	e.posted = make([]time.Time, sends)
	e.addr = Address{GID: l.GID, QPN: e.qp.QP().QPN, QKey: qkey, MTU: l.MTU}
	return e, nil
}

// address is where peers reach the endpoint.
func (e *endpoint) address() Address { return e.addr }

func (e *endpoint) postRecv(i int) error {
	return e.qp.PostRecv(uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{
		{Addr: e.mr.Addr + uint64(i*recvSlot), Length: recvSlot, LKey: e.mr.LKey}}})
}

// received is receive slot i's bytes as the completion says they came:
// the GRH and the datagram.
func (e *endpoint) received(i int, byteLen uint32) ([]byte, bool) {
	if i < 0 || i >= e.recvs || byteLen < uverbs.GRHSize || byteLen > recvSlot {
		return nil, false
	}
	return e.buf[i*recvSlot : i*recvSlot+int(byteLen)], true
}

// sendBuf returns a free send slot of n bytes, or false when all are lent.
func (e *endpoint) sendBuf(n int) (int, []byte, bool) {
	if len(e.freeSends) == 0 {
		return 0, nil, false
	}
	i := e.freeSends[len(e.freeSends)-1]
	e.freeSends = e.freeSends[:len(e.freeSends)-1]
	off := e.recvs*recvSlot + i*sendSlot
	return i, e.buf[off : off+n], true
}

// send posts send slot i's first n bytes to peer, through ah.
func (e *endpoint) send(i, n int, ah *uverbs.AH, peer Address) error {
	off := e.recvs*recvSlot + i*sendSlot
	wr := uverbs.SendWR{ID: sendFlag | uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		AH: ah, RemoteQPN: peer.QPN, RemoteQKey: peer.QKey}
	if n <= int(e.qp.QP().Cap.MaxInlineData) {
		wr.Inline = e.buf[off : off+n]
	} else {
		wr.SGL = []uverbs.SGE{{Addr: e.mr.Addr + uint64(off), Length: uint32(n), LKey: e.mr.LKey}}
	}
	err := e.qp.PostSend(wr)
	if err != nil {
		e.freeSends = append(e.freeSends, i)
		return err
	}
	e.posted[i] = time.Now()
	return nil
}

// sent gives a send slot back once its send completed.
func (e *endpoint) sent(i int) {
	if i >= 0 && i < e.sends {
		e.freeSends = append(e.freeSends, i)
		e.posted[i] = time.Time{}
	}
}

// oldestSend is when the send waiting longest for its completion was
// posted; zero when none waits.
func (e *endpoint) oldestSend() time.Time {
	var oldest time.Time
	for _, at := range e.posted {
		if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	return oldest
}

// wait returns the completions that came, sends first, waiting until a
// receive does, until deadline (zero: none) or until interrupt; until
// spinUntil it polls, then it sleeps on the completion channel. The
// deadline or an interrupt is no error: no completions (but the sends'
// that came).
func (e *endpoint) wait(deadline, spinUntil time.Time) ([]uverbs.WC, error) {
	if n := e.poll(); n > 0 {
		return e.wcs[:n], nil
	}
	if !deadline.IsZero() && spinUntil.After(deadline) {
		spinUntil = deadline
	}
	// An interrupt seen here ends the polling; the channel's, set after
	// it, then ends the sleep at once.
	for now, empty := time.Now(), 1; now.Before(spinUntil) && !e.interrupted.Load(); now, empty = time.Now(), empty+1 {
		if n := e.poll(); n > 0 {
			return e.wcs[:n], nil
		}
		spin.Empty(empty) // rxe: its work runs on this machine's CPUs
		spin.Yield()
	}
	if !deadline.IsZero() && time.Until(deadline) <= 0 {
		return nil, nil
	}
	n, err := e.cq.WaitUntil(deadline, e.wcs[pollBatch:])
	if errors.Is(err, uverbs.ErrInterrupted) {
		// Cleared after the channel's: an interrupt between the two
		// left the channel's set, for the next wait.
		e.interrupted.Store(false)
		n, err = 0, nil
	}
	if err != nil {
		return nil, err
	}
	// The sends that completed meanwhile go first, as in poll.
	k := e.scq.Poll(e.wcs[:pollBatch])
	copy(e.wcs[k:], e.wcs[pollBatch:pollBatch+n])
	return e.wcs[:k+n], nil
}

// poll takes the completions there are, sends first (their slots are
// free again before the receives are answered), into e.wcs.
func (e *endpoint) poll() int {
	k := e.scq.Poll(e.wcs[:pollBatch])
	n := e.cq.Poll(e.wcs[k : k+pollBatch])
	return k + n
}

// interrupt ends the wait in progress, or the next one, at once. It is
// safe from any goroutine while e is not closing (the caller's lock keeps
// close away).
func (e *endpoint) interrupt() {
	e.interrupted.Store(true)
	if e.ch != nil { // closed
		e.ch.Interrupt()
	}
}

// ah makes an address handle to peer's GID from the local port.
func (e *endpoint) ah(peer gid.GID) (uverbs.AH, error) {
	return e.l.Context.CreateRxeAH(e.l.PD, uverbs.AHAttr{IsGlobal: 1, PortNum: e.l.Port,
		GRH: uverbs.GlobalRoute{DGID: peer, SGIDIndex: e.l.GIDIndex, HopLimit: hopLimit}})
}

// hopLimit is the GRH's hop limit (the IPv4 TTL), as ibv_ud_pingpong's.
const hopLimit = 64

// close destroys what exists, queue pair first.
func (e *endpoint) close() error {
	if e == nil {
		return nil
	}
	var errs []error
	c := e.l.Context
	if e.qp != nil {
		errs = append(errs, e.qp.Destroy())
		e.qp = nil
	}
	if e.cq != nil {
		errs = append(errs, e.cq.Destroy())
		e.cq = nil
	}
	if e.scq != nil {
		errs = append(errs, e.scq.Destroy())
		e.scq = nil
	}
	if e.ch != nil {
		errs = append(errs, e.ch.Close())
		e.ch = nil
	}
	if e.buf != nil {
		if err := c.DeregMR(e.mr); err != nil {
			errs = append(errs, err) // the device may still use the memory: keep it
		} else {
			errs = append(errs, uverbs.FreeBuffer(e.buf))
		}
		e.buf = nil
	}
	return errors.Join(errs...)
}

// NewQKey returns a random Q_Key for a responder: a prober must have
// asked the responder for it (its control channel) before the kernel
// lets its datagrams in. The high bit is left clear: such Q_Keys are
// privileged.
func NewQKey() uint32 { return rand.Uint32N(0x7fffffff) + 1 }

// completionError says a completion failed.
type completionError struct {
	wc uverbs.WC
}

func (e *completionError) Error() string {
	what := "receive"
	if e.wc.WRID&sendFlag != 0 {
		what = "send"
	}
	return fmt.Sprintf("a %s completed with status %v", what, e.wc.Status)
}
