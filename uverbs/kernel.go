package uverbs

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel is what a Context sends its commands to: the uverbs character
// device of the running kernel (what Open and OpenNode use), or a stand-in
// such as the fake device of package uverbstest, through NewContext.
//
// File descriptors the kernel hands out in responses (the asynchronous
// event file of GET_CONTEXT, completion channels) are real descriptors of
// this process either way: the Context reads and closes them itself.
type Kernel interface {
	// Write is write(2) of one command: the header, the core request and
	// the driver's request data. Responses go to the user addresses the
	// request names (in memory outside the Go heap).
	Write(cmd []byte) (int, error)
	// Ioctl is ioctl(2) RDMA_VERBS_IOCTL of msg, a struct
	// ib_uverbs_ioctl_hdr and its attributes, outside the Go heap: the
	// kernel writes new handles back into the attributes.
	Ioctl(msg []byte) error
	// Mmap maps length bytes of the device at offset, shared (rxe's
	// queues), and Munmap unmaps what it mapped.
	Mmap(offset int64, length int) ([]byte, error)
	Munmap(b []byte) error
	// Close closes the device: the kernel then frees every object made
	// through it.
	Close() error
}

// NewContext creates a user context (GET_CONTEXT, as Open does) on the
// device k stands for: node says which (its Name and ibdev name it in
// errors) and its driver, which chooses GET_CONTEXT's request data; its
// device number is not used. The context owns k from then on: Close
// closes it, and so does a failed NewContext. Errors are those of Open's
// GET_CONTEXT: an *UnsupportedDriverError or a *CommandError.
func NewContext(k Kernel, ibdev string, node Node) (*Context, error) {
	c, err := newContext(contextName(node.Name, ibdev), k)
	if err != nil {
		return nil, errors.Join(err, k.Close())
	}
	if err := c.start(ibdev, node); err != nil {
		return nil, err
	}
	return c, nil
}

// deviceFile is the uverbs character device open at fd.
type deviceFile struct{ fd int }

func (d deviceFile) Write(cmd []byte) (int, error) { return unix.Write(d.fd, cmd) }

// WriteQuick writes a command that never blocks (a doorbell,
// REQ_NOTIFY_CQ) without telling Go's scheduler, as the runtime makes
// its own short system calls: see quickWriter.
func (d deviceFile) WriteQuick(cmd []byte) (int, error) {
	if len(cmd) == 0 {
		return 0, nil
	}
	// cmd stays reachable through the call, and the kernel copies it
	// before write(2) returns.
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(d.fd), uintptr(unsafe.Pointer(unsafe.SliceData(cmd))), uintptr(len(cmd)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// quickWriter is a Kernel that can write a command that never blocks as
// a raw system call. A system call through the syscall package (or
// x/sys/unix's Syscall) wakes Go's monitor thread, sysmon, from its deep
// sleep when the process was idle, and sysmon then naps 20 µs at a time
// for as long as the process works: a program that sleeps on completion
// events and wakes for each pays that at every wake. In the e2e guests
// (one emulated CPU) it was ~20 thread switches a UD round trip and
// 5.2 ms against 1.45 ms with sysmon kept from deep sleep
// (BENCHMARKS.md, "Go's monitor thread"). The data path's commands (the
// send doorbell, arming a CQ) never sleep in the kernel: arming returns
// at once, and the doorbell returns once rxe has taken the queue's new
// requests (on 6.1 it sends them within the call, as far as the send
// window lets it, without waiting for the network). Holding the
// processor through them is what Go's runtime does for its own short
// calls; the control path keeps Write.
type quickWriter interface {
	WriteQuick(cmd []byte) (int, error)
}

// rdmaVerbsIoctl is RDMA_VERBS_IOCTL: _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr).
const rdmaVerbsIoctl = 0xc0181b01

func (d deviceFile) Ioctl(msg []byte) error {
	if len(msg) == 0 {
		return fmt.Errorf("uverbs: empty ioctl message")
	}
	// msg is outside the Go heap (the context's arena): the pointer
	// stays valid whatever the runtime does during the call.
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(unsafe.SliceData(msg))))
	if errno != 0 {
		return errno
	}
	return nil
}

func (d deviceFile) Mmap(offset int64, length int) ([]byte, error) {
	return unix.Mmap(d.fd, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func (d deviceFile) Munmap(b []byte) error { return unix.Munmap(b) }

func (d deviceFile) Close() error { return unix.Close(d.fd) }
