package uverbstest

import (
	"encoding/binary"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/uverbs"
)

// cq is a completion queue: rxe's ring of struct rxe_cqe, and what arms
// its events.
type cq struct {
	file       *file
	handle     uint32
	userHandle uint64
	ring       *ring
	ch         *channel

	mu         sync.Mutex
	notify     uint8 // notifySolicited, notifyNext (IB_CQ_SOLICITED, IB_CQ_NEXT_COMP)
	users      int   // queue pairs using it
	destroyed  bool
	overflowed bool
}

const (
	notifySolicited = 1
	notifyNext      = 2
)

// post puts a completion into the queue and, when the queue is armed for
// it, an event on its channel (rxe_cq_post). It fails when the process
// let the queue fill up.
func (c *cq) post(wc uverbs.WC, solicited bool) bool {
	elem := encode(&wc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return false
	}
	if !c.ring.push(elem) {
		c.overflowed = true
		return false
	}
	if c.notify&notifyNext != 0 || (c.notify&notifySolicited != 0 && solicited) {
		c.notify = 0
		if c.ch != nil {
			c.ch.push(c.userHandle)
		}
	}
	return true
}

// channel is a completion channel: a pipe whose read end the process got
// as the channel's descriptor, so that it reads events through its own
// poller as from the kernel's event file.
type channel struct {
	pipe *eventPipe
	file *file
	cqs  int // completion queues using it

	mu      sync.Mutex
	backlog []byte            // events the full pipe did not take
	pushed  map[uint64]uint32 // events written, by CQ user handle
}

// push writes one struct ib_uverbs_comp_event_desc.
func (ch *channel) push(userHandle uint64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.pushed[userHandle]++
	ch.backlog = binary.NativeEndian.AppendUint64(ch.backlog, userHandle)
	ch.flush()
}

// flush writes what the pipe takes of the backlog, whole events only.
func (ch *channel) flush() {
	for len(ch.backlog) > 0 {
		n, err := ch.pipe.write(ch.backlog)
		if n > 0 {
			ch.backlog = ch.backlog[n:]
		}
		if err != nil {
			return
		}
	}
}

// unread counts the events in the pipe and its backlog.
func (ch *channel) unread() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := len(ch.backlog)
	if !ch.pipe.closed {
		// TIOCINQ is FIONREAD: the bytes a read would get.
		if b, err := unix.IoctlGetInt(ch.pipe.r, unix.TIOCINQ); err == nil {
			n += b
		}
	}
	return n / 8
}

// drop removes a destroyed queue's events not yet read, as the kernel
// unlinks them, and returns how many were read (comp_events_reported).
func (ch *channel) drop(userHandle uint64) uint32 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	unread := append(ch.pipe.drain(), ch.backlog...)
	ch.backlog = ch.backlog[:0]
	dropped := uint32(0)
	for len(unread) >= 8 {
		h := binary.NativeEndian.Uint64(unread)
		unread = unread[8:]
		if h == userHandle {
			dropped++
			continue
		}
		ch.backlog = binary.NativeEndian.AppendUint64(ch.backlog, h)
	}
	ch.flush()
	reported := ch.pushed[userHandle] - dropped
	delete(ch.pushed, userHandle)
	return reported
}

// eventPipe is an event file of the fake kernel: the process got user,
// the read end; the fake writes to w and can read back what is unread
// through r, its own descriptor of the read end.
type eventPipe struct {
	user int
	r, w int
	// dev and ino identify the pipe, to tell whether the process's
	// descriptor is still it.
	dev, ino uint64
	closed   bool
}

func newEventPipe() (*eventPipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	r, err := unix.FcntlInt(uintptr(fds[0]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fds[0], &st); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		unix.Close(r)
		return nil, err
	}
	return &eventPipe{user: fds[0], r: r, w: fds[1], dev: st.Dev, ino: st.Ino}, nil
}

// isUsers reports whether fd is still the process's descriptor of the
// pipe (it may have closed it, and the number be taken again).
func (p *eventPipe) isUsers(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Dev == p.dev && st.Ino == p.ino
}

func (p *eventPipe) write(b []byte) (int, error) {
	if p.closed {
		return 0, syscall.EPIPE
	}
	// Whole events: a pipe takes up to PIPE_BUF bytes at once.
	n := min(len(b), pipeBuf) / 8 * 8
	return unix.Write(p.w, b[:n])
}

// drain reads back what the process has not read.
func (p *eventPipe) drain() []byte {
	if p.closed {
		return nil
	}
	var all []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(p.r, buf)
		if n > 0 {
			all = append(all, buf[:n]...)
		}
		if err != nil || n <= 0 {
			return all
		}
	}
}

// close ends the file: the process then reads end of file, which uverbs
// reports as the kernel's EIO.
func (p *eventPipe) close() {
	if p.closed {
		return
	}
	p.closed = true
	unix.Close(p.w)
	unix.Close(p.r)
}

// closeUser closes the process's end, for a command that failed after
// making it.
func (p *eventPipe) closeUser() { unix.Close(p.user) }

// pipeBuf is PIPE_BUF: a pipe write of up to it is atomic.
const pipeBuf = 4096
