package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Completion events: instead of polling a completion queue until work
// completes, a program arms it (REQ_NOTIFY_CQ) and waits on its
// completion channel, a file the kernel writes one event
// (struct ib_uverbs_comp_event_desc) to when the armed queue gets a
// completion. The channel's descriptor is non-blocking and in Go's
// poller, so a goroutine waiting for an event costs neither CPU nor a
// thread.

// createCompChannelReq is struct ib_uverbs_create_comp_channel.
type createCompChannelReq struct{ Response uint64 }

// createCompChannelResp is struct ib_uverbs_create_comp_channel_resp.
type createCompChannelResp struct{ FD uint32 }

// reqNotifyCQReq is struct ib_uverbs_req_notify_cq; REQ_NOTIFY_CQ has no
// response.
type reqNotifyCQReq struct {
	CQHandle      uint32
	SolicitedOnly uint32
}

// compEventDesc is struct ib_uverbs_comp_event_desc, what a read of a
// completion channel returns: the user handle of the CQ (CREATE_CQ's
// user_handle).
type compEventDesc struct{ CQHandle uint64 }

func (r *createCompChannelReq) setResponse(addr uint64) { r.Response = addr }

// CompChannel is a completion channel (ibv_comp_channel): the kernel
// writes an event to it when a completion queue made with it, and armed,
// gets a completion. One channel may serve many queues; CQ events are
// handed to whoever waits for that queue. Its methods are safe for
// concurrent use.
type CompChannel struct {
	c    *Context
	fd   int // f's descriptor, which CREATE_CQ names
	f    *os.File
	rc   syscall.RawConn // f's, for read
	name string

	mu sync.Mutex
	// cqs are the user handles of the live queues using the channel, with
	// the events read from the file for each and not yet waited for.
	cqs     map[uint64]uint32
	reading bool // a waiter is reading the file
	// wake is closed when cqs or reading changed; nil until a waiter
	// needs it, so that a lone waiter makes no channel per event.
	wake   chan struct{}
	closed bool

	// interrupted: Interrupt was called and no WaitUntil has returned
	// ErrInterrupted since.
	interrupted atomic.Bool
	// woken: someone set the file's read deadline to wake the reader
	// (wakeReader), so readEvent must set its own again.
	woken atomic.Bool

	// The reader's (reading set) alone: read's state, kept here so that
	// a read allocates nothing.
	event      [8]byte // sizeof(struct ib_uverbs_comp_event_desc)
	eventN     uintptr
	eventErrno unix.Errno
	readFn     func(fd uintptr) bool // ch.readRaw
	// deadline is the read deadline readEvent last set on the file: a
	// wait with the same one (a responder's, until its next chore) does
	// not set it again, which costs a timer in the runtime each time.
	deadline time.Time
	// stale counts the events of queue staleCQ in the file that its
	// WaitUntil took as its wake without reading them (waitSole); -1:
	// there may be some (the queue was left armed). Whoever reads next
	// takes them first, as read already.
	stale   int
	staleCQ uint64 // a user handle
	// sole is waitSole's state during its read, for soleFn (ch.soleRaw).
	sole   soleWait
	soleFn func(fd uintptr) bool
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	var resp createCompChannelResp
	if err := c.execute(cmdCreateCompChannel, &createCompChannelReq{}, nil, &resp, nil); err != nil {
		return nil, err
	}
	fd := int(int32(resp.FD))
	name := c.name + " completion channel"
	// Non-blocking before os.NewFile, which then puts it in the poller:
	// reads park the goroutine, not a thread, and deadlines work.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ch := &CompChannel{c: c, fd: fd, f: f, rc: rc, name: name, cqs: map[uint64]uint32{}}
	ch.readFn, ch.soleFn = ch.readRaw, ch.soleRaw
	c.mu.Lock()
	c.channels = append(c.channels, ch)
	c.mu.Unlock()
	return ch, nil
}

// Close closes the channel: waiters return os.ErrClosed. The kernel keeps
// the channel until the queues using it are destroyed. Closing the context
// closes its channels too.
func (ch *CompChannel) Close() error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	ch.closed = true
	ch.broadcast()
	ch.mu.Unlock()
	return ch.f.Close()
}

// use returns the descriptor CREATE_CQ names for a queue of c.
func (ch *CompChannel) use(c *Context) (int, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.c != c {
		return -1, fmt.Errorf("%s: a completion channel of another context", c.name)
	}
	if ch.closed {
		return -1, fmt.Errorf("%s: %w", ch.name, os.ErrClosed)
	}
	return ch.fd, nil
}

func (ch *CompChannel) register(userHandle uint64) {
	ch.mu.Lock()
	ch.cqs[userHandle] = 0
	ch.mu.Unlock()
}

// forget drops a destroyed queue and the events read for it, and wakes
// the waiters (the reader through its deadline): one may wait for it.
func (ch *CompChannel) forget(userHandle uint64) {
	ch.mu.Lock()
	delete(ch.cqs, userHandle)
	if userHandle == ch.staleCQ && !ch.reading {
		ch.stale = 0 // the kernel dropped its events
	}
	ch.broadcast()
	reading := ch.reading
	ch.mu.Unlock()
	if reading {
		ch.wakeReader()
	}
}

// wakeReader ends the read in progress through the file's deadline, which
// the reader then sets again.
func (ch *CompChannel) wakeReader() {
	ch.woken.Store(true)
	ch.f.SetReadDeadline(longAgo)
}

func (ch *CompChannel) isClosed() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.closed
}

// errWoken means a read of the channel was interrupted for the waiters to
// look again.
var errWoken = errors.New("woken")

// broadcast wakes every waiter; ch.mu is held.
func (ch *CompChannel) broadcast() {
	if ch.wake != nil {
		close(ch.wake)
		ch.wake = nil
	}
}

// ErrInterrupted is WaitUntil's error when Interrupt woke it.
var ErrInterrupted = errors.New("uverbs: completion wait interrupted")

// Interrupt makes the channel's WaitUntil in progress return
// ErrInterrupted at once or, when none waits, the next one: a program
// wakes its event loop with it without a context per wait (each costs
// allocations and timers). One channel with several WaitUntils at once
// (one per queue) wakes one of them. Waits with a context ignore it. It is
// safe from any goroutine.
func (ch *CompChannel) Interrupt() {
	// The flag first: a reader checks it after setting its deadline, so
	// it either sees the flag or has its read woken below.
	ch.interrupted.Store(true)
	ch.mu.Lock()
	ch.broadcast()
	reading := ch.reading
	ch.mu.Unlock()
	if reading {
		ch.wakeReader()
	}
}

// WaitCQ waits until the channel has an event for cq (ibv_get_cq_event and
// ibv_ack_cq_events): cq was armed and got a completion. Events of other
// queues that arrive meanwhile are kept for their waiters. It returns
// ctx's error when ctx ends first, os.ErrClosed when the channel is
// closed, and an error wrapping EIO when the device is gone.
func (ch *CompChannel) WaitCQ(ctx context.Context, cq CQ) error {
	return ch.waitCQ(untilDone(ctx), cq)
}

// until is what ends a wait without an event: ctx's end, or its deadline
// (zero: none), which returns context.DeadlineExceeded. Without a ctx it
// is WaitUntil's: Interrupt ends it too, and the channel's reader waits
// with no context, no AfterFunc and no timer (a waiter behind another
// reader makes a timer).
type until struct {
	ctx      context.Context // nil: WaitUntil's
	deadline time.Time
}

// untilDone is the wait that ends with ctx.
func untilDone(ctx context.Context) until {
	deadline, _ := ctx.Deadline()
	return until{ctx: ctx, deadline: deadline}
}

// waitCQ is WaitCQ until u.
func (ch *CompChannel) waitCQ(u until, cq CQ) error {
	if cq.channel != ch {
		return fmt.Errorf("%s: the completion queue uses another channel", ch.name)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ch.mu.Lock()
		n, live := ch.cqs[cq.userHandle]
		switch {
		case !live:
			ch.mu.Unlock()
			return fmt.Errorf("%s: completion queue %d is destroyed", ch.name, cq.Handle)
		case n > 0:
			ch.cqs[cq.userHandle] = 0
			ch.mu.Unlock()
			return nil
		case ch.closed:
			ch.mu.Unlock()
			return fmt.Errorf("%s: %w", ch.name, os.ErrClosed)
		case u.ctx == nil && ch.interrupted.CompareAndSwap(true, false):
			ch.mu.Unlock()
			return ErrInterrupted
		case !ch.reading:
			// Read the file for everyone until an event comes.
			ch.reading = true
			ch.mu.Unlock()
			handle, err := ch.readEvent(u)
			ch.mu.Lock()
			ch.reading = false
			switch _, live := ch.cqs[handle]; {
			case err == nil && ch.stale > 0 && handle == ch.staleCQ:
				ch.stale-- // the queue's WaitUntil took it already
			case err == nil && live:
				ch.cqs[handle]++
			}
			ch.broadcast()
			ch.mu.Unlock()
			if err != nil && err != errWoken {
				return err
			}
			continue
		}
		if ch.wake == nil {
			ch.wake = make(chan struct{})
		}
		wake := ch.wake
		ch.mu.Unlock()
		switch {
		case u.ctx != nil:
			select {
			case <-wake:
			case <-u.ctx.Done():
				return u.ctx.Err()
			}
		case u.deadline.IsZero():
			<-wake
		default:
			if timer == nil {
				timer = time.NewTimer(time.Until(u.deadline))
			}
			select {
			case <-wake:
			case <-timer.C:
				return context.DeadlineExceeded
			}
		}
	}
}

// longAgo is a read deadline that has passed: it wakes a reader at once.
var longAgo = time.Unix(1, 0)

// read reads an event into ch.event as os.File.Read does, parked in the
// poller until the file is readable, but with a raw read(2) (the file is
// non-blocking): a read through the syscall package would wake Go's
// monitor thread at every event (quickWriter says what that costs).
func (ch *CompChannel) read() (int, error) {
	ch.eventN, ch.eventErrno = 0, 0
	err := ch.rawRead(ch.readFn)
	switch {
	case err != nil:
		return 0, err
	case ch.eventErrno != 0:
		return 0, ch.eventErrno
	case ch.eventN == 0:
		return 0, io.EOF
	}
	return int(ch.eventN), nil
}

// rawRead is the file's RawConn.Read with f, and os.File.Read's error
// for a closed file (RawConn's is internal).
func (ch *CompChannel) rawRead(f func(fd uintptr) bool) error {
	err := ch.rc.Read(f)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && ch.isClosed() {
		return os.ErrClosed
	}
	return err
}

// readRaw is read's RawConn.Read callback, made once (a closure per read
// would be an allocation).
func (ch *CompChannel) readRaw(fd uintptr) bool {
	for {
		ch.eventN, _, ch.eventErrno = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&ch.event[0])), uintptr(len(ch.event)))
		switch ch.eventErrno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		return true
	}
}

// readEvent reads one event from the file, parked in the poller until one
// comes or u ends. Only one goroutine reads at a time.
func (ch *CompChannel) readEvent(u until) (uint64, error) {
	if u.ctx != nil {
		// A cancelled ctx wakes the read through its deadline.
		stop := context.AfterFunc(u.ctx, ch.wakeReader)
		defer stop()
	}
	if err := ch.prepareRead(u); err != nil {
		return 0, err
	}
	n, err := ch.read()
	switch {
	case err == nil && n == len(ch.event):
		return binary.NativeEndian.Uint64(ch.event[:]), nil
	case err == nil:
		return 0, fmt.Errorf("%s: short event of %d bytes", ch.name, n)
	}
	return 0, ch.readError(u, err)
}

// prepareRead sets the file's read deadline for a read until u, and
// returns errWoken or ctx's error when the read must not start.
func (ch *CompChannel) prepareRead(u until) error {
	// The deadline is the file's, not this read's: set it unless it is
	// the one this channel's reader left and nobody woke a reader since.
	// woken is cleared first: a wake after it sets the deadline again
	// (ending this read, or the next one's skip).
	if ch.woken.Swap(false) || !u.deadline.Equal(ch.deadline) {
		if err := ch.f.SetReadDeadline(u.deadline); err != nil {
			ch.woken.Store(true) // unknown now
			return fmt.Errorf("%s: %w", ch.name, err)
		}
		ch.deadline = u.deadline
	}
	// After the deadline: an Interrupt or cancellation before it set
	// longAgo in vain, and is seen here.
	switch {
	case u.ctx != nil:
		return u.ctx.Err()
	case ch.interrupted.Load():
		return errWoken
	}
	return nil
}

// readError is what a read of the file until u that failed with err
// returns: errWoken when it was woken for the waiters to look again.
func (ch *CompChannel) readError(u until, err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The file's deadline passed, or was set to wake us: the next
		// read sets its own.
		ch.woken.Store(true)
		if u.ctx != nil {
			if err := u.ctx.Err(); err != nil {
				return err
			}
		}
		if !u.deadline.IsZero() && !time.Now().Before(u.deadline) {
			return context.DeadlineExceeded
		}
		// A queue destroyed, an Interrupt, or another reader's
		// cancellation.
		return errWoken
	case errors.Is(err, io.EOF):
		// The kernel answers EIO once the device is gone; a stand-in
		// that can only end the file is read the same.
		return fmt.Errorf("%s: %w", ch.name, unix.EIO)
	default:
		return fmt.Errorf("%s: %w", ch.name, err)
	}
}

// A queue alone on its channel waits for its event without reading it
// (RxeCQ.WaitUntil): the poller's wake is the event, and the event is
// read at the next wait, before the queue is armed again. The read then
// happens after the program answered what woke it, not between the wake
// and the answer: on the emulated guests' CPUs the read(2) took 11-12 µs
// of each UD ping's turnaround, on each side.
//
// soleWait is such a wait's state, the reader's alone.
type soleWait struct {
	cq     *RxeCQ
	wcs    []WC
	mode   armMode
	n      int   // completions the poll after arming found
	err    error // the arming's, or a read's
	parked bool  // the callback found nothing and the reader parked
	woke   bool  // ... and was woken: the event came
}

// readSole is waitSole's read: it takes the stale events, arms cq,
// polls it and parks until its event (left in the file) or u ends.
// ch.reading is set.
func (ch *CompChannel) readSole(u until, cq *RxeCQ, wcs []WC, mode armMode) (int, error) {
	if err := ch.prepareRead(u); err != nil {
		return 0, err
	}
	// The file's readiness is cleared when the read starts (RawConn.Read),
	// and soleRaw arms and polls after that: an event after the poll is
	// seen by the park, whenever it comes.
	if ch.staleCQ != cq.cq.userHandle {
		ch.stale, ch.staleCQ = -1, cq.cq.userHandle
	}
	ch.sole = soleWait{cq: cq, wcs: wcs, mode: mode}
	err := ch.rawRead(ch.soleFn)
	s := ch.sole
	ch.sole = soleWait{}
	if s.woke {
		// One event came for the one arming; it stays in the file.
		cq.armed, ch.stale = disarmed, 1
		return 0, nil
	}
	if cq.armed != disarmed {
		// Left armed: an event may come while nobody waits.
		ch.stale = -1
	}
	switch {
	case s.err != nil:
		return 0, s.err
	case err != nil:
		return 0, ch.readError(u, err)
	}
	return s.n, nil
}

// soleRaw is readSole's RawConn.Read callback: called first, it reads the
// stale events, arms the queue and polls it; called again after parking,
// the file became readable: the event came.
func (ch *CompChannel) soleRaw(fd uintptr) bool {
	s := &ch.sole
	if s.parked {
		s.woke = true
		return true
	}
	for ch.stale != 0 {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&ch.event[0])), uintptr(len(ch.event)))
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			ch.stale = 0
		case errno != 0:
			s.err = fmt.Errorf("%s: %w", ch.name, errno)
			return true
		case n == 0:
			s.err = fmt.Errorf("%s: %w", ch.name, unix.EIO)
			return true
		default:
			// An event disarms the queue.
			s.cq.armed = disarmed
			if ch.stale > 0 {
				ch.stale--
			}
		}
	}
	if s.cq.armed < s.mode {
		if s.err = s.cq.arm(s.mode); s.err != nil {
			return true
		}
	}
	if s.n = s.cq.Poll(s.wcs); s.n > 0 {
		return true
	}
	s.parked = true
	return false
}
