package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeIoctl makes fn c's ioctl; fn sees the message bytes.
func fakeIoctl(t *testing.T, c *Context, fn func(msg []byte) error) {
	t.Helper()
	kernelOf(t, c).ioctl = fn
}

// ioctlMessage is the struct ib_uverbs_ioctl_hdr of a message with n
// attributes, for appendIoctlAttr to add them to.
func ioctlMessage(object, method, n uint16, driverID uint32) []byte {
	b := binary.NativeEndian.AppendUint16(nil, 24+n*16) // length
	b = binary.NativeEndian.AppendUint16(b, object)
	b = binary.NativeEndian.AppendUint16(b, method)
	b = binary.NativeEndian.AppendUint16(b, n)
	b = append(b, make([]byte, 8)...) // reserved1, reserved2
	b = binary.NativeEndian.AppendUint32(b, driverID)
	return append(b, make([]byte, 4)...)
}

// appendIoctlAttr appends a struct ib_uverbs_attr.
func appendIoctlAttr(b []byte, id, length, flags uint16, data uint64) []byte {
	b = binary.NativeEndian.AppendUint16(b, id)
	b = binary.NativeEndian.AppendUint16(b, length)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint16(b, 0)
	return binary.NativeEndian.AppendUint64(b, data)
}

func TestRegDMABufMRBytes(t *testing.T) {
	c, _ := newFakeContext(t)
	var sent []byte
	fakeIoctl(t, c, func(msg []byte) error {
		sent = append([]byte(nil), msg...)
		// The kernel writes the new handle into the HANDLE attribute and
		// the keys through the output pointers.
		binary.NativeEndian.PutUint64(msg[24+8:], 77)
		// The output pointers are slots 0 and 1 of the arena's output area.
		if binary.NativeEndian.Uint64(msg[24+7*16+8:]) != c.ioctlOut(0) || binary.NativeEndian.Uint64(msg[24+8*16+8:]) != c.ioctlOut(1) {
			t.Errorf("output pointers do not point at the arena")
		}
		binary.NativeEndian.PutUint32(c.arena[ioctlOutOffset:], 0x1234)
		binary.NativeEndian.PutUint32(c.arena[ioctlOutOffset+8:], 0x5678)
		return nil
	})
	mr, err := c.RegDMABufMR(14, PD{Handle: 3}, 0x1000, 0x2000, 0x3000, 9, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Handle != 77 || mr.LKey != 0x1234 || mr.RKey != 0x5678 {
		t.Fatalf("mr %+v", mr)
	}
	// Object MR (7), method REG_DMABUF_MR (4), 9 attributes, driver_id
	// (14, RXE).
	want := ioctlMessage(7, 4, 9, 14)
	attr := func(id, length, flags uint16, data uint64) { want = appendIoctlAttr(want, id, length, flags, data) }
	attr(0, 0, 1, 0)      // HANDLE (new)
	attr(1, 0, 1, 3)      // PD_HANDLE
	attr(2, 8, 1, 0x1000) // OFFSET, inline
	attr(3, 8, 1, 0x2000) // LENGTH
	attr(4, 8, 1, 0x3000) // IOVA
	attr(5, 4, 1, 9)      // FD: a 32-bit int, inline
	attr(6, 4, 0, uint64(AccessLocalWrite))
	attr(7, 4, 1, c.ioctlOut(0)) // RESP_LKEY: pointer
	attr(8, 4, 1, c.ioctlOut(1)) // RESP_RKEY
	if !bytes.Equal(sent, want) {
		t.Fatalf("message\n got % x\nwant % x", sent, want)
	}
}

func TestProbeDMABufImportReturnsKernelAnswer(t *testing.T) {
	c, _ := newFakeContext(t)
	// ALLOC_PD answers handle 0 (the arena is zeroed), DEALLOC_PD has no
	// response; both are counted so the PD is seen released.
	var alloc, dealloc int
	kernelOf(t, c).write = func(b []byte) (int, error) {
		switch binary.NativeEndian.Uint32(b) {
		case cmdAllocPD:
			alloc++
		case cmdDeallocPD:
			dealloc++
		}
		return len(b), nil
	}
	for _, errno := range []unix.Errno{unix.EBADF, unix.EPROTONOSUPPORT, unix.EOPNOTSUPP} {
		fakeIoctl(t, c, func(msg []byte) error {
			// fd -1 travels as a 32-bit int in the FD attribute.
			if fd := int32(binary.NativeEndian.Uint32(msg[24+5*16+8:])); fd != -1 {
				t.Fatalf("fd %d, want -1", fd)
			}
			return errno
		})
		if err := c.ProbeDMABufImport(14); !errors.Is(err, errno) {
			t.Errorf("got %v, want %v", err, errno)
		}
	}
	if alloc != 3 || dealloc != 3 {
		t.Errorf("%d PDs allocated, %d released; want 3 and 3", alloc, dealloc)
	}
}
