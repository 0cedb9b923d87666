package uverbs

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GIDEntry is one valid GID table entry as the kernel reports it (struct
// ib_uverbs_gid_entry).
type GIDEntry struct {
	GID           [16]byte
	Index         uint32
	Port          uint32
	Type          uint32 // GIDTypeIB, GIDTypeRoCEv1, GIDTypeRoCEv2
	NetdevIfindex uint32 // 0 when no netdev is associated
}

// GID types of GIDEntry (enum ib_uverbs_gid_type).
const (
	GIDTypeIB     = 0
	GIDTypeRoCEv1 = 1
	GIDTypeRoCEv2 = 2
)

const (
	methodQueryGIDTable      = 5 // UVERBS_METHOD_QUERY_GID_TABLE (UVERBS_OBJECT_DEVICE)
	objectDevice             = 0
	gidTableEntrySize        = 0 // UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE
	gidTableRespEntries      = 2 // UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES
	gidTableRespNumEntries   = 3 // UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES
	gidEntrySize             = 32
	ioctlMethodQueryGIDTable = "QUERY_GID_TABLE"
)

// gidBuffer is the memory QueryGIDTable lends the kernel.
var gidBuffer mmapBuffer

// mmapBuffer is anonymous memory outside the Go heap, grown on demand and
// kept; the caller holds its lock while it uses it.
type mmapBuffer struct {
	sync.Mutex
	b []byte
}

// get returns at least size bytes, zeroed.
func (m *mmapBuffer) get(size int) ([]byte, error) {
	if size > len(m.b) {
		page := unix.Getpagesize()
		b, err := unix.Mmap(-1, 0, (size+page-1)&^(page-1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, err
		}
		if m.b != nil {
			unix.Munmap(m.b)
		}
		m.b = b
	}
	clear(m.b[:size])
	return m.b[:size], nil
}

// QueryGIDTable returns every valid GID of every port of the device in one
// request (ibv_query_gid_table; Linux 5.9+), where sysfs needs up to three
// file reads per slot. maxEntries bounds the answer (the sum of the ports'
// GID table lengths); driverID is the device's enum rdma_driver_id.
func (c *Context) QueryGIDTable(driverID uint32, maxEntries int) ([]GIDEntry, error) {
	if maxEntries <= 0 || maxEntries*gidEntrySize > 0xffff {
		return nil, fmt.Errorf("uverbs: %d GID entries do not fit one request", maxEntries)
	}
	// The kernel writes the entries during the call: give it memory
	// outside the Go heap, kept for the next call (one per device when a
	// program reads them all).
	gidBuffer.Lock()
	defer gidBuffer.Unlock()
	buf, err := gidBuffer.get(maxEntries * gidEntrySize)
	if err != nil {
		return nil, err
	}
	attrs := []ioctlAttr{
		{AttrID: gidTableEntrySize, Len: 8, Flags: attrFlagMandatory, Data: gidEntrySize},
		{AttrID: gidTableRespEntries, Len: uint16(maxEntries * gidEntrySize), Flags: attrFlagMandatory,
			Data: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))},
		{AttrID: gidTableRespNumEntries, Len: 8, Flags: attrFlagMandatory, Data: c.ioctlOut(0)},
	}
	out, err := c.ioctl(ioctlMethodQueryGIDTable, driverID, objectDevice, methodQueryGIDTable, attrs)
	if err != nil {
		return nil, err
	}
	n := int(out.u32(0))
	if n > maxEntries {
		return nil, fmt.Errorf("uverbs: QUERY_GID_TABLE reported %d entries for room of %d", n, maxEntries)
	}
	entries := make([]GIDEntry, n)
	if _, err := binary.Decode(buf[:n*gidEntrySize], binary.NativeEndian, entries); err != nil {
		return nil, err
	}
	return entries, nil
}
