package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
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
	reading bool          // a waiter is reading the file
	wake    chan struct{} // closed when cqs or reading changed
	closed  bool
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
	ch := &CompChannel{c: c, fd: fd, f: f, rc: rc, name: name,
		cqs: map[uint64]uint32{}, wake: make(chan struct{})}
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
	ch.broadcast()
	reading := ch.reading
	ch.mu.Unlock()
	if reading {
		ch.f.SetReadDeadline(longAgo)
	}
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
	close(ch.wake)
	ch.wake = make(chan struct{})
}

// WaitCQ waits until the channel has an event for cq (ibv_get_cq_event and
// ibv_ack_cq_events): cq was armed and got a completion. Events of other
// queues that arrive meanwhile are kept for their waiters. It returns
// ctx's error when ctx ends first, os.ErrClosed when the channel is
// closed, and an error wrapping EIO when the device is gone.
func (ch *CompChannel) WaitCQ(ctx context.Context, cq CQ) error {
	if cq.channel != ch {
		return fmt.Errorf("%s: the completion queue uses another channel", ch.name)
	}
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
		case !ch.reading:
			// Read the file for everyone until an event comes.
			ch.reading = true
			ch.mu.Unlock()
			handle, err := ch.readEvent(ctx)
			ch.mu.Lock()
			ch.reading = false
			if _, live := ch.cqs[handle]; err == nil && live {
				ch.cqs[handle]++
			}
			ch.broadcast()
			ch.mu.Unlock()
			if err != nil && err != errWoken {
				return err
			}
			continue
		}
		wake := ch.wake
		ch.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// longAgo is a read deadline that has passed: it wakes a reader at once.
var longAgo = time.Unix(1, 0)

// read reads the file as os.File.Read does, parked in the poller until
// it is readable, but with a raw read(2) (the file is non-blocking): a
// read through the syscall package would wake Go's monitor thread at
// every event (quickWriter says what that costs).
func (ch *CompChannel) read(buf []byte) (int, error) {
	var n uintptr
	var errno unix.Errno
	err := ch.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
			switch errno {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			return true
		}
	})
	switch {
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && ch.isClosed():
		// os.File.Read's error for a closed file; RawConn's is internal.
		return 0, os.ErrClosed
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// readEvent reads one event from the file, parked in the poller until one
// comes or ctx ends. Only one goroutine reads at a time.
func (ch *CompChannel) readEvent(ctx context.Context) (uint64, error) {
	deadline, _ := ctx.Deadline()
	// A cancelled ctx wakes the read through its deadline.
	stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(longAgo) })
	defer stop()
	var buf [8]byte // sizeof(struct ib_uverbs_comp_event_desc)
	for {
		// The deadline is the file's, not this read's: set it for each
		// read, after a reader before us (or a cancellation of its ctx)
		// left another.
		if err := ch.f.SetReadDeadline(deadline); err != nil {
			return 0, fmt.Errorf("%s: %w", ch.name, err)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := ch.read(buf[:])
		switch {
		case err == nil && n == len(buf):
			return binary.NativeEndian.Uint64(buf[:]), nil
		case err == nil:
			return 0, fmt.Errorf("%s: short event of %d bytes", ch.name, n)
		case errors.Is(err, os.ErrDeadlineExceeded):
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return 0, context.DeadlineExceeded
			}
			// A queue destroyed, or another reader's cancellation.
			return 0, errWoken
		case errors.Is(err, io.EOF):
			// The kernel answers EIO once the device is gone; a
			// stand-in that can only end the file is read the same.
			return 0, fmt.Errorf("%s: %w", ch.name, unix.EIO)
		default:
			return 0, fmt.Errorf("%s: %w", ch.name, err)
		}
	}
}
