package uverbs

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// FuzzRxeQueueHeader: the header of an rxe queue is written by the kernel
// into memory the process maps; whatever it says (and whatever indexes the
// kernel leaves), mapRxeQueue either refuses it or every slot the
// producer/consumer indexes can reach lies inside the mapping, at least
// minElem bytes long.
func FuzzRxeQueueHeader(f *testing.F) {
	f.Add(uint32(7), uint32(63), uint32(0), uint32(0), uint32(0x4000), uint16(64))
	f.Add(uint32(8), uint32(31), uint32(31), uint32(5), uint32(0x4000), uint16(256))
	f.Add(uint32(31), uint32(0xffffffff), uint32(7), uint32(9), uint32(0x4000), uint16(1))
	f.Add(uint32(0), uint32(0), uint32(0), uint32(0), uint32(uint32(rxeDataOffset)), uint16(0))
	f.Add(uint32(12), uint32(2), uint32(1), uint32(2), uint32(0x4000), uint16(64)) // 3 slots: not a power of two
	f.Fuzz(func(t *testing.T, shift, mask, prod, cons, size uint32, minElem uint16) {
		if size > 1<<20 {
			return
		}
		k := &testKernel{munmap: func([]byte) error { return nil }}
		k.mmap = func(int64, int) ([]byte, error) {
			b := make([]byte, size)
			if uintptr(size) >= rxeDataOffset {
				binary.NativeEndian.PutUint32(b[unsafe.Offsetof(rxeQueueBuf{}.Log2ElemSize):], shift)
				binary.NativeEndian.PutUint32(b[unsafe.Offsetof(rxeQueueBuf{}.IndexMask):], mask)
				binary.NativeEndian.PutUint32(b[rxeProducerOffset:], prod)
				binary.NativeEndian.PutUint32(b[rxeConsumerOffset:], cons)
			}
			return b, nil
		}
		c := &Context{name: "uverbs0 (rxe0)", kernel: k}
		q, err := c.mapRxeQueue("send", mmapInfo{Size: size}, uintptr(minElem))
		if err != nil {
			return
		}
		if s, ok := q.nextFree(); ok && len(s) < int(minElem) {
			t.Fatalf("free slot of %d bytes, want at least %d", len(s), minElem)
		}
		q.produce()
		if s, ok := q.nextFull(); ok && len(s) < int(minElem) {
			t.Fatalf("full slot of %d bytes, want at least %d", len(s), minElem)
		}
		q.consume()
		// Every slot an index can name is inside the mapping.
		for _, i := range []uint32{0, q.indexMask, prod & q.indexMask, cons & q.indexMask} {
			q.slot(i)
		}
	})
}
