// Package uverbs talks to an RDMA device's user verbs character device,
// /dev/infiniband/uverbsN, through the kernel's legacy write() ABI
// (include/uapi/rdma/ib_user_verbs.h) in pure Go: no cgo, no libibverbs.
// It does what ibv_open_device, ibv_query_device and ibv_query_port do
// (`ibv_devinfo -v`), which is the only general way to learn a port's MTU.
//
// A command is one write(2) of a header, the core request and the driver's
// request data; the kernel copies the core response and the driver's
// response data to a user buffer named in the request. Context.execute does
// this for every command, so further commands (ALLOC_PD, CREATE_CQ, ...)
// are a request struct, a response struct and a method.
//
// GET_CONTEXT, the first command, carries driver-specific data. Drivers
// that need none (rxe, siw, mlx4, ...) are supported, and so is mlx5,
// whose request Open sends; a driver that refuses GET_CONTEXT without its
// request data is reported with an *UnsupportedDriverError.
//
// Beyond the device and port queries, the package creates the objects of
// a verbs probe (pd.go, cq.go, qp.go, mr.go) with the driver data of rxe,
// including its shared queues (rxe.go), and of mlx5's control path
// (mlx5.go). Completions are polled from rxe's queue or, with a
// completion channel, waited for as events (events.go: RxeCQ.Wait).
//
// A Context talks to the kernel through a Kernel: the character device
// for Open, or a stand-in given to NewContext, such as the fake kernel of
// package uverbstest, which unit tests of code above this package use.
package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Context is an open uverbs device with a user context (ibv_context).
// Its methods are safe for concurrent use.
type Context struct {
	name    string // "uverbs0 (rxe0)", for errors
	kernel  Kernel // nil once closed
	asyncFD int
	// NumCompVectors is the number of completion vectors of the device.
	NumCompVectors int
	// Node is the uverbs device Open opened, with the RDMA device's
	// driver ("rxe", "mlx5_core", ...).
	Node Node

	mu    sync.Mutex
	arena []byte // one page outside the Go heap for responses
	// arenaAddr is the arena's address, for requests that point into it.
	arenaAddr uint64
	// userHandles numbers the objects whose events name them (CQs).
	userHandles atomic.Uint64
	// channels are the completion channels made on the context, which
	// Close closes.
	channels []*CompChannel
}

// The response half of the arena. A driver that copies more response data
// than it was given room for (ib_copy_to_udata does not clamp) still writes
// inside the page.
const (
	arenaSize     = 4096
	maxResponse   = arenaSize / 2
	driverOutRoom = 1024 // driver response data allowed for GET_CONTEXT
)

func newContext(name string, k Kernel) (*Context, error) {
	arena, err := arenas.get()
	if err != nil {
		return nil, fmt.Errorf("%s: allocating the response buffer: %w", name, err)
	}
	return &Context{name: name, kernel: k, asyncFD: -1, arena: arena, arenaAddr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(arena))))}, nil
}

// arenas keeps the arenas of closed contexts for the next ones: reading
// every device of a node opens and closes one context after another, and
// an mmap and munmap each is two system calls a device.
var arenas arenaPool

// arenaPool is a few zeroed arenas, outside the Go heap.
type arenaPool struct {
	mu   sync.Mutex
	free [][]byte
}

// maxFreeArenas bounds what the pool keeps mapped (4 KiB each).
const maxFreeArenas = 4

func (p *arenaPool) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	return unix.Mmap(-1, 0, arenaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// put takes back an arena no request uses any more, zeroed as a new one.
func (p *arenaPool) put(b []byte) error {
	clear(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < maxFreeArenas {
		p.free = append(p.free, b)
		return nil
	}
	return unix.Munmap(b)
}

// Close releases the context and everything created in it, closes its
// completion channels, and closes the device.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, ch := range c.channels {
		errs = append(errs, ch.Close())
	}
	c.channels = nil
	if c.asyncFD >= 0 {
		errs = append(errs, unix.Close(c.asyncFD))
		c.asyncFD = -1
	}
	if c.kernel != nil {
		errs = append(errs, c.kernel.Close())
		c.kernel = nil
	}
	if c.arena != nil {
		errs = append(errs, arenas.put(c.arena))
		c.arena = nil
	}
	return errors.Join(errs...)
}

// responder is a request that names its response buffer.
type responder interface{ setResponse(addr uint64) }

// CommandError is a uverbs command the kernel refused.
type CommandError struct {
	Device  string // "uverbs0 (rxe0)"
	Command string // "QUERY_PORT"
	Err     error  // the errno
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Device, e.Command, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// execute runs one command: req (a pointer to a request struct) and
// driverIn are sent; the kernel's response is decoded into resp (a pointer
// to a response struct, or nil) and its driver response data copied into
// driverOut.
func (c *Context) execute(command uint32, req any, driverIn []byte, resp any, driverOut []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arena == nil {
		return &CommandError{Device: c.name, Command: commandNames[command], Err: os.ErrClosed}
	}
	respSize := len(driverOut)
	if resp != nil {
		respSize += binary.Size(resp)
	}
	if respSize > maxResponse {
		return fmt.Errorf("uverbs: %s response of %d bytes exceeds %d", commandNames[command], respSize, maxResponse)
	}
	out := c.arena[arenaSize-maxResponse:][:respSize]
	clear(out)
	if r, ok := req.(responder); ok {
		r.setResponse(uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out)))))
	}
	msg, err := encodeCommand(command, req, driverIn, respSize)
	if err != nil {
		return err
	}
	if err := c.write(commandNames[command], msg); err != nil {
		return err
	}
	if resp != nil {
		coreSize, err := binary.Decode(out, binary.NativeEndian, resp)
		if err != nil {
			return fmt.Errorf("uverbs: decoding %s response: %w", commandNames[command], err)
		}
		out = out[coreSize:]
	}
	copy(driverOut, out)
	return nil
}

// write writes one encoded command, named name in errors; the caller
// holds c.mu and has checked the context is open.
func (c *Context) write(name string, msg []byte) error {
	return c.writeWith(c.kernel.Write, name, msg)
}

// executeQuick writes msg, an encoded command of the data path without a
// response that never blocks, as a raw system call where the kernel can
// (quickWriter).
func (c *Context) executeQuick(command uint32, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arena == nil {
		return &CommandError{Device: c.name, Command: commandNames[command], Err: os.ErrClosed}
	}
	if q, ok := c.kernel.(quickWriter); ok {
		return c.writeWith(q.WriteQuick, commandNames[command], msg)
	}
	return c.write(commandNames[command], msg)
}

func (c *Context) writeWith(write func([]byte) (int, error), name string, msg []byte) error {
	n, err := write(msg)
	if err != nil {
		return &CommandError{Device: c.name, Command: name, Err: err}
	}
	if n != len(msg) {
		return &CommandError{Device: c.name, Command: name, Err: fmt.Errorf("short write: %d of %d bytes", n, len(msg))}
	}
	return nil
}

// encodeCommand returns the write() buffer of a command: the header, the
// core request, then the driver's request data. respSize is the size of
// the response buffer (core and driver response). Both sizes must be whole
// 32-bit words, the unit of the header.
func encodeCommand(command uint32, req any, driverIn []byte, respSize int) ([]byte, error) {
	size := binary.Size(cmdHdr{}) + binary.Size(req) + len(driverIn)
	if size%4 != 0 || respSize%4 != 0 || size/4 > 0xffff || respSize/4 > 0xffff {
		return nil, fmt.Errorf("uverbs: %s: request of %d and response of %d bytes are not encodable in 32-bit words",
			commandNames[command], size, respSize)
	}
	hdr := cmdHdr{Command: command, InWords: uint16(size / 4), OutWords: uint16(respSize / 4)}
	msg := make([]byte, 0, size)
	msg, err := binary.Append(msg, binary.NativeEndian, hdr)
	if err != nil {
		return nil, err
	}
	if msg, err = binary.Append(msg, binary.NativeEndian, req); err != nil {
		return nil, err
	}
	return append(msg, driverIn...), nil
}

// getContext creates the user context (ibv_open_device): the device accepts
// no other command before it. The driver gets no request data and room for
// its response data.
func (c *Context) getContext() error {
	var resp getContextResp
	var driverOut [driverOutRoom]byte
	if err := c.execute(cmdGetContext, &getContextReq{}, nil, &resp, driverOut[:]); err != nil {
		return err
	}
	c.asyncFD = int(resp.AsyncFD)
	c.NumCompVectors = int(resp.NumCompVectors)
	return nil
}

const (
	methodGetContext         = 3      // UVERBS_METHOD_GET_CONTEXT (UVERBS_OBJECT_DEVICE)
	getContextNumCompVectors = 0      // UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS
	getContextCoreSupport    = 1      // UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT
	attrUHWOut               = 0x1001 // UVERBS_ATTR_UHW_OUT: room for the driver's response
)

// getContextIoctl creates the user context through the ioctl method, which
// unlike the write command makes no asynchronous event file: one file and
// descriptor less to create and close per device opened (nothing here reads
// async events). The driver gets the same room for its response data as
// with the write command (siw refuses less than its response, mlx4 writes
// it); it gets no request data, so drivers that need some (mlx5) use their
// contextRequests.
func (c *Context) getContextIoctl(driverID uint32) error {
	attrs := []ioctlAttr{
		{AttrID: getContextNumCompVectors, Len: 4, Data: c.ioctlOut(0)},
		{AttrID: getContextCoreSupport, Len: 8, Data: c.ioctlOut(1)},
		{AttrID: attrUHWOut, Len: driverOutRoom, Data: c.arenaAddr + arenaSize - maxResponse},
	}
	out, err := c.ioctl("GET_CONTEXT (ioctl)", driverID, objectDevice, methodGetContext, attrs)
	// Kernels without the method, and a driver that refuses it (EINVAL):
	// the write command, which every driver takes.
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return c.getContext()
	}
	if err != nil {
		return err
	}
	c.NumCompVectors = int(out.u32(0))
	return nil
}

// CompVectors returns NumCompVectors.
func (c *Context) CompVectors() int { return c.NumCompVectors }

// QueryDevice returns the device's attributes (ibv_query_device).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var attr DeviceAttr
	err := c.execute(cmdQueryDevice, &queryDeviceReq{}, nil, &attr, nil)
	return attr, err
}

// QueryPort returns the attributes of port number port, from 1
// (ibv_query_port).
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	var attr PortAttr
	err := c.execute(cmdQueryPort, &queryPortReq{PortNum: port}, nil, &attr, nil)
	return attr, err
}
