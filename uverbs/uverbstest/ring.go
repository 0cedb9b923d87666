package uverbstest

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is an rxe queue (struct rxe_queue_buf) seen from the kernel: memory
// shared with the process through mmap, a header the kernel writes once,
// and producer and consumer indexes. Work queues are produced by the
// process and consumed here; completion queues the other way round. As
// rxe, the fake keeps its own index privately and only publishes it:
// whatever the process writes there is not trusted.
type ring struct {
	mem   []byte // the whole mapping, header included
	shift uint32 // log2 of the element size
	mask  uint32 // slots-1
	index uint32 // the kernel's own: the consumer of a work queue, the producer of a CQ

	// The mmap the process may do once, and what the kernel must keep
	// until both the object is gone and the process unmapped it.
	info      mmapInfo
	mapped    bool // the process mapped it
	unmapped  bool // and unmapped it again
	destroyed bool // the object is gone
}

// newRing allocates a queue of at least n elements (rxe_queue_init):
// slots are the next power of two above n, elements the next power of
// two of elemSize and at least a cache line. It returns the ring and the
// number of elements it holds (slots-1).
func newRing(n uint32, elemSize int) (*ring, uint32, error) {
	slots := uint32(1) << bits.Len32(n) // roundup_pow_of_two(n+1)
	elem := max(cacheLine, 1<<bits.Len(uint(elemSize-1)))
	shift := uint32(bits.TrailingZeros(uint(elem)))
	page := unix.Getpagesize()
	size := (rxeQueueHeader + int(slots)<<shift + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, 0, err
	}
	binary.NativeEndian.PutUint32(mem[0:], shift)
	binary.NativeEndian.PutUint32(mem[4:], slots-1)
	return &ring{mem: mem, shift: shift, mask: slots - 1}, slots - 1, nil
}

func (r *ring) atomicIndex(offset int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[offset]))
}

func (r *ring) slot(i uint32) []byte {
	start := rxeQueueHeader + int(i&r.mask)<<r.shift
	return r.mem[start : start+1<<r.shift]
}

// head returns the oldest element the process produced into a work queue
// and not yet consumed, or false.
func (r *ring) head() ([]byte, bool) {
	prod := atomic.LoadUint32(r.atomicIndex(rxeProducerOffset)) & r.mask
	if prod == r.index {
		return nil, false
	}
	return r.slot(r.index), true
}

// advance consumes the element head returned.
func (r *ring) advance() {
	r.index = (r.index + 1) & r.mask
	atomic.StoreUint32(r.atomicIndex(rxeConsumerOffset), r.index)
}

// push produces an element into a completion queue: false when it is
// full (the process does not consume).
func (r *ring) push(elem []byte) bool {
	cons := atomic.LoadUint32(r.atomicIndex(rxeConsumerOffset)) & r.mask
	next := (r.index + 1) & r.mask
	if next == cons {
		return false
	}
	s := r.slot(r.index)
	clear(s)
	copy(s, elem)
	r.index = next
	atomic.StoreUint32(r.atomicIndex(rxeProducerOffset), r.index)
	return true
}

// reset empties the queue (a queue pair back to RESET).
func (r *ring) reset() {
	r.index = 0
	atomic.StoreUint32(r.atomicIndex(rxeProducerOffset), 0)
	atomic.StoreUint32(r.atomicIndex(rxeConsumerOffset), 0)
}

// release frees the memory once the object is destroyed and the process
// no longer maps it (or never did and never can).
func (r *ring) release() {
	if r == nil || r.mem == nil || !r.destroyed || (r.mapped && !r.unmapped) {
		return
	}
	unix.Munmap(r.mem)
	r.mem = nil
}

// mappedCount is 1 while the process maps the queue.
func (r *ring) mappedCount() int {
	if r != nil && r.mapped && !r.unmapped {
		return 1
	}
	return 0
}
