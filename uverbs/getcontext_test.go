package uverbs

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestGetContextIoctl: the ioctl GET_CONTEXT message (object DEVICE, method
// GET_CONTEXT, the two optional outputs pointing into the arena), no async
// event file, and the write command where the kernel lacks the method.
func TestGetContextIoctl(t *testing.T) {
	c, k := newFakeContext(t)
	var sent []byte
	fakeIoctl(t, c, func(msg []byte) error {
		sent = bytes.Clone(msg)
		binary.NativeEndian.PutUint32(c.arena[ioctlOutOffset:], 3) // num_comp_vectors
		return nil
	})
	if err := c.getContextIoctl(DriverIDRXE); err != nil {
		t.Fatal(err)
	}
	if c.NumCompVectors != 3 || c.asyncFD != -1 || len(k.got) != 0 {
		t.Errorf("comp vectors %d, async fd %d, %d write commands; want 3, none, none", c.NumCompVectors, c.asyncFD, len(k.got))
	}
	// Object DEVICE (0), method GET_CONTEXT (3), 3 attributes, driver_id
	// (14, RXE); NUM_COMP_VECTORS (u32) and CORE_SUPPORT (u64) are optional
	// outputs; UHW_OUT (0x1001) is 1,024 bytes of room for the driver's
	// response, in the arena's response half.
	want := ioctlMessage(0, 3, 3, 14)
	want = appendIoctlAttr(want, 0, 4, 0, c.ioctlOut(0))
	want = appendIoctlAttr(want, 1, 8, 0, c.ioctlOut(1))
	want = appendIoctlAttr(want, 0x1001, 1024, 0, uint64(uintptr(unsafe.Pointer(&c.arena[arenaSize-maxResponse]))))
	if !bytes.Equal(sent, want) {
		t.Fatalf("message\n got % x\nwant % x", sent, want)
	}

	for _, errno := range []unix.Errno{unix.EOPNOTSUPP, unix.EPROTONOSUPPORT, unix.ENOTTY, unix.EINVAL} {
		c, k := newFakeContext(t)
		fakeIoctl(t, c, func([]byte) error { return errno })
		k.responses[cmdGetContext] = unhex(t, "07000000 02000000") // async_fd 7, 2 vectors
		if err := c.getContextIoctl(DriverIDRXE); err != nil {
			t.Fatalf("%v: %v", errno, err)
		}
		if c.NumCompVectors != 2 || c.asyncFD != 7 || len(k.got) != 1 {
			t.Errorf("%v: comp vectors %d, async fd %d, %d write commands; want the write command's 2 and 7", errno, c.NumCompVectors, c.asyncFD, len(k.got))
		}
		c.asyncFD = -1 // not a real descriptor
	}
	c, _ = newFakeContext(t)
	fakeIoctl(t, c, func([]byte) error { return unix.EFAULT })
	if err := c.getContextIoctl(DriverIDRXE); err == nil {
		t.Error("EFAULT was not reported")
	}
}
