package uverbs

import (
	"encoding/binary"
	"os"
)

// The ioctl ABI (RDMA_VERBS_IOCTL), for methods the write() ABI lacks.

// ioctlHdr is struct ib_uverbs_ioctl_hdr; the attributes follow it.
type ioctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// ioctlAttr is struct ib_uverbs_attr.
type ioctlAttr struct {
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64 // inline value (len <= 8), pointer, handle or fd
}

// attrFlagMandatory is UVERBS_ATTR_F_MANDATORY.
const attrFlagMandatory = 1

// Objects and methods of the default namespace (ib_user_ioctl_cmds.h).
const (
	objectMR              = 7 // UVERBS_OBJECT_MR
	methodRegDMABufMR     = 4 // UVERBS_METHOD_REG_DMABUF_MR
	regDMABufMRHandle     = 0
	regDMABufMRPDHandle   = 1
	regDMABufMROffset     = 2
	regDMABufMRLength     = 3
	regDMABufMRIOVA       = 4
	regDMABufMRFD         = 5
	regDMABufMRAccess     = 6
	regDMABufMRRespLKey   = 7
	regDMABufMRRespRKey   = 8
	ioctlOutOffset        = 1024 // where in the arena's request half outputs land
	ioctlMethodRegDMABuf  = "REG_DMABUF_MR"
	ioctlHeaderSize       = 24
	ioctlAttrSize         = 16
	ioctlMaxAttrs         = (ioctlOutOffset - ioctlHeaderSize) / ioctlAttrSize
	ioctlOutputBufferSize = 64
)

// ioctl runs one method. The message is built in the arena's request half
// (outside the Go heap, so the kernel reads and writes stable memory);
// outputs point at ioctlOut. After the call, the kernel's copy of the
// attributes (with new handles) is decoded back into attrs, and the output
// slots are returned, copied while the context is still locked: another
// call may overwrite them as soon as it is not.
// driverID is the device's enum rdma_driver_id (from RDMA netlink
// GET_CHARDEV): the kernel refuses a header that names another driver.
func (c *Context) ioctl(method string, driverID uint32, object, methodID uint16, attrs []ioctlAttr) (out ioctlOutputs, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arena == nil {
		return out, &CommandError{Device: c.name, Command: method, Err: os.ErrClosed}
	}
	buf := c.arena[:ioctlOutOffset]
	hdr := ioctlHdr{Length: uint16(ioctlHeaderSize + ioctlAttrSize*len(attrs)), ObjectID: object, MethodID: methodID,
		NumAttrs: uint16(len(attrs)), DriverID: driverID}
	msg, err := binary.Append(buf[:0], binary.NativeEndian, hdr)
	if err == nil {
		msg, err = binary.Append(msg, binary.NativeEndian, attrs)
	}
	if err != nil {
		return out, err
	}
	if err := c.kernel.Ioctl(msg); err != nil {
		return out, &CommandError{Device: c.name, Command: method, Err: err}
	}
	copy(out[:], c.arena[ioctlOutOffset:])
	_, err = binary.Decode(buf[ioctlHeaderSize:], binary.NativeEndian, attrs)
	return out, err
}

// ioctlOutputs is the arena's output area after a call: 8-byte slots.
type ioctlOutputs [ioctlOutputBufferSize]byte

// u32 reads the u32 the kernel wrote into slot i.
func (o *ioctlOutputs) u32(i int) uint32 { return binary.NativeEndian.Uint32(o[8*i:]) }

// ioctlOut is the address of the i-th 8-byte output slot in the arena
// (the arena's address is fixed for the context's life).
func (c *Context) ioctlOut(i int) uint64 { return c.arenaAddr + uint64(ioctlOutOffset+8*i) }
