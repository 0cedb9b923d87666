package rdmacm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultPath is where udev (and devtmpfs) put rdma_ucm's device.
const DefaultPath = "/dev/infiniband/rdma_cm"

// Node is the RDMA CM character device: where it is and what RDMA netlink
// (GET_CHARDEV type "rdma_cm") or /sys/class/misc/rdma_cm says it is.
type Node struct {
	Path string // DefaultPath unless the device lives elsewhere
	// Dev is the device number (unix.Mkdev); when non-zero, Path must
	// be that character device. 0 accepts any character device.
	Dev uint64
	ABI uint64 // must be ABIVersion
}

// Channel is an open RDMA CM device (librdmacm's rdma_event_channel):
// the IDs created on it, and the events the kernel queues for them, which
// a goroutine reads through Go's poller and hands to the ID each is for.
// Closing it destroys every ID on it. Its methods are safe for concurrent
// use.
type Channel struct {
	name string
	f    *os.File        // the device, non-blocking; what the poller watches
	rc   syscall.RawConn // of f
	// write runs one command: write(2) on fd. Tests replace it with a
	// fake kernel, whose readiness is f.
	write func(fd uintptr, b []byte) (int, error)
	opts  Options
	// egress finds the netdev of the route to an address (egress);
	// trace, when set (by tests that record), sees every command and
	// event with the kernel's answer.
	egress func(dst netip.Addr) (string, netip.Addr)
	trace  func(cmd uint32, msg, resp []byte, err error)

	mu      sync.Mutex
	ids     map[uint64]*ID // by uid
	nextUID uint64
	err     error         // why the event reader stopped
	done    chan struct{} // closed when the event reader stops
}

// Options are a Channel's settings beyond the device.
type Options struct {
	// Describe, when set, names a device port for error messages, and
	// the RoCE version of the route's source GID there (sgid is zero
	// before route resolution); locator.OpenRDMACM sets it. Without it
	// errors name the device by its index.
	Describe func(port DevicePort, sgid [16]byte) PortInfo
}

// PortInfo describes a device port in error messages.
type PortInfo struct {
	Device string // "rxe0"
	// RoCE is the RoCE version the CM uses there ("RoCE v2"), "" when
	// unknown.
	RoCE string
}

// Open opens DefaultPath, after checking the ABI version that
// /sys/class/misc/rdma_cm/abi_version shows. Package cmnode finds the
// device through RDMA netlink instead, which also loads rdma_ucm on
// demand.
//
// Errors: an *fs.PathError with ENOENT (fs.ErrNotExist) when rdma_ucm is
// not loaded, EACCES (fs.ErrPermission) without access to the device.
func Open() (*Channel, error) {
	b, err := os.ReadFile("/sys/class/misc/rdma_cm/abi_version")
	if err != nil {
		return nil, fmt.Errorf("rdmacm: %w (is rdma_ucm loaded?)", err)
	}
	abi, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: /sys/class/misc/rdma_cm/abi_version: %w", err)
	}
	return OpenNode(Node{Path: DefaultPath, ABI: abi}, Options{})
}

// OpenNode opens the RDMA CM device n. The path must be a character
// device (and the one n.Dev names, when set); a symbolic link is refused.
func OpenNode(n Node, opts Options) (*Channel, error) { return openNode(n, opts, nil) }

// openNode is OpenNode with a trace of every command (tests record).
func openNode(n Node, opts Options, trace func(cmd uint32, msg, resp []byte, err error)) (*Channel, error) {
	if n.ABI != ABIVersion {
		return nil, fmt.Errorf("rdmacm: kernel RDMA CM ABI %d, want %d", n.ABI, ABIVersion)
	}
	if n.Path == "" {
		n.Path = DefaultPath
	}
	fd, err := unix.Open(n.Path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: n.Path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: n.Path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || (n.Dev != 0 && st.Rdev != n.Dev) {
		unix.Close(fd)
		return nil, fmt.Errorf("rdmacm: %s is not the RDMA CM character device (%d:%d)", n.Path, unix.Major(n.Dev), unix.Minor(n.Dev))
	}
	f := os.NewFile(uintptr(fd), n.Path)
	return newChannel(n.Path, f, func(fd uintptr, b []byte) (int, error) { return unix.Write(int(fd), b) }, opts, trace)
}

// newChannel starts the event reader on f, which must be non-blocking
// and pollable.
func newChannel(name string, f *os.File, write func(uintptr, []byte) (int, error), opts Options, trace func(uint32, []byte, []byte, error)) (*Channel, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &Channel{name: name, f: f, rc: rc, write: write, opts: opts, egress: egress, trace: trace, ids: map[uint64]*ID{}, done: make(chan struct{})}
	go c.readEvents()
	return c, nil
}

// Close destroys every ID of the channel (the kernel does, closing the
// device) and stops its event reader. Waits on the IDs end with
// ErrClosed.
func (c *Channel) Close() error {
	err := c.f.Close()
	<-c.done
	return err
}

// ErrClosed means the channel was closed.
var ErrClosed = errors.New("rdmacm: channel closed")

// responder is a request that names its response buffer.
type responder interface{ setResponse(addr uint64) }

// execute runs one command: req (a pointer to a request struct) is
// sent; the kernel writes its response into resp, if any, whose address
// the request carries. resp must stay where it is during the call: it is
// pinned.
func (c *Channel) execute(cmd uint32, id uint32, req any, resp []byte) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	if r, ok := req.(responder); ok && len(resp) > 0 {
		pin.Pin(&resp[0])
		r.setResponse(uint64(uintptr(unsafe.Pointer(&resp[0]))))
	}
	msg, err := encodeCommand(cmd, req, len(resp))
	if err != nil {
		return err
	}
	err = c.writeCommand(cmd, id, msg)
	if c.trace != nil {
		c.trace(cmd, msg, resp, err)
	}
	return err
}

// writeCommand writes an encoded command. RawConn.Write holds the
// descriptor open for the call, so a concurrent Close cannot make it write
// to a reused descriptor number.
func (c *Channel) writeCommand(cmd, id uint32, msg []byte) error {
	var n int
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		n, werr = c.write(fd, msg)
		return true
	})
	if err != nil {
		return &CommandError{Command: commandNames[cmd], ID: id, Err: ErrClosed}
	}
	if werr != nil {
		return &CommandError{Command: commandNames[cmd], ID: id, Err: werr}
	}
	if n != len(msg) {
		return &CommandError{Command: commandNames[cmd], ID: id, Err: fmt.Errorf("short write: %d of %d bytes", n, len(msg))}
	}
	return nil
}

// encodeCommand returns the write() buffer of a command: the header and
// the request. out is the size of the response buffer.
func encodeCommand(cmd uint32, req any, out int) ([]byte, error) {
	in := binary.Size(req)
	if in < 0 || in > 0xffff || out > 0xffff {
		return nil, fmt.Errorf("rdmacm: %s: request of %d or response of %d bytes not encodable", commandNames[cmd], in, out)
	}
	msg := make([]byte, 0, 8+in)
	msg, err := binary.Append(msg, binary.NativeEndian, cmdHdr{Cmd: cmd, In: uint16(in), Out: uint16(out)})
	if err != nil {
		return nil, err
	}
	return binary.Append(msg, binary.NativeEndian, req)
}

// readEvents reads the kernel's events for as long as the channel is open
// and hands each to its ID. GET_EVENT is a write(2) that answers EAGAIN
// while nothing is queued; RawConn.Read then parks until the device polls
// readable, which is "an event is queued".
func (c *Channel) readEvents() {
	defer close(c.done)
	buf := make([]byte, binary.Size(eventResp{}))
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	msg, err := encodeCommand(cmdGetEvent, &getEventReq{Response: uint64(uintptr(unsafe.Pointer(&buf[0])))}, len(buf))
	if err != nil {
		c.stop(err)
		return
	}
	for {
		var werr error
		err := c.rc.Read(func(fd uintptr) bool {
			_, werr = c.write(fd, msg)
			return !errors.Is(werr, unix.EAGAIN)
		})
		switch {
		case err != nil: // closed
			c.stop(ErrClosed)
			return
		case errors.Is(werr, unix.EINTR):
			continue
		case werr != nil:
			c.stop(&CommandError{Command: "GET_EVENT", Err: werr})
			return
		}
		if c.trace != nil {
			c.trace(cmdGetEvent, msg, buf, nil)
		}
		var r eventResp
		if _, err := binary.Decode(buf, binary.NativeEndian, &r); err != nil {
			c.stop(err)
			return
		}
		c.dispatch(&r)
	}
}

// stop records why the event reader stopped and wakes every waiter.
func (c *Channel) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	for _, id := range c.ids {
		id.wake()
	}
}

// readerErr is why the event reader stopped, nil while it runs.
func (c *Channel) readerErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// dispatch hands an event to the ID whose uid it carries. A connection
// request becomes a new ID queued on its listener; one the listener has
// no room for is rejected at once. Events of IDs already destroyed are
// dropped.
func (c *Channel) dispatch(r *eventResp) {
	ev := decodeEvent(r)
	c.mu.Lock()
	id := c.ids[r.UID]
	if id == nil {
		c.mu.Unlock()
		if ev.Type == EventConnectRequest {
			// Its listener is gone: the new ID is ours to destroy.
			c.destroyHandle(r.ID)
		}
		return
	}
	if ev.Type == EventConnectRequest {
		ev.ID = c.newIDLocked(r.ID, id.ps)
	} else {
		ev.ID = id
	}
	c.mu.Unlock()
	if !id.push(ev) {
		// The listener's own limit: the kernel's backlog stops counting
		// a request once it is read, so without this a peer could queue
		// requests without end.
		ev.ID.rejectAndDestroy(RejectConsumer)
	}
}

// destroyHandle destroys a kernel ID that has no *ID.
func (c *Channel) destroyHandle(handle uint32) {
	resp := make([]byte, binary.Size(destroyIDResp{}))
	c.execute(cmdDestroyID, handle, &destroyIDReq{ID: handle}, resp)
}

// newIDLocked registers a kernel ID under a fresh uid; c.mu is held.
func (c *Channel) newIDLocked(handle uint32, ps PortSpace) *ID {
	c.nextUID++
	id := &ID{ch: c, handle: handle, uid: c.nextUID, ps: ps, notify: make(chan struct{}, 1), tos: -1}
	c.ids[id.uid] = id
	return id
}

// CreateID creates an ID in port space ps (rdma_create_id); PortSpaceTCP
// makes RC connections. The ID lives in the caller's network namespace:
// its addresses, routes and devices are that namespace's. Destroy it when
// done.
func (c *Channel) CreateID(ps PortSpace) (*ID, error) {
	c.mu.Lock()
	c.nextUID++
	uid := c.nextUID
	c.mu.Unlock()
	resp := make([]byte, binary.Size(createIDResp{}))
	if err := c.execute(cmdCreateID, 0, &createIDReq{UID: uid, PS: uint16(ps)}, resp); err != nil {
		return nil, err
	}
	handle := binary.NativeEndian.Uint32(resp)
	id := &ID{ch: c, handle: handle, uid: uid, ps: ps, notify: make(chan struct{}, 1), tos: -1}
	c.mu.Lock()
	c.ids[uid] = id
	c.mu.Unlock()
	return id, nil
}
