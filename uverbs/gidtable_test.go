package uverbs

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

func TestQueryGIDTable(t *testing.T) {
	c, _ := newFakeContext(t)
	fakeIoctl(t, c, func(msg []byte) error {
		// Header: object DEVICE (0), method QUERY_GID_TABLE (5), 3 attributes.
		if binary.NativeEndian.Uint16(msg[2:]) != 0 || binary.NativeEndian.Uint16(msg[4:]) != 5 || binary.NativeEndian.Uint16(msg[6:]) != 3 {
			t.Fatalf("header % x", msg[:24])
		}
		attr := func(i int) (id, length, flags uint16, data uint64) {
			a := msg[24+16*i:]
			return binary.NativeEndian.Uint16(a), binary.NativeEndian.Uint16(a[2:]), binary.NativeEndian.Uint16(a[4:]), binary.NativeEndian.Uint64(a[8:])
		}
		if id, l, f, d := attr(0); id != 0 || l != 8 || f != 1 || d != 32 {
			t.Errorf("ENTRY_SIZE %d %d %d %d", id, l, f, d)
		}
		id, l, _, entries := attr(1)
		if id != 2 || l != 2*32 {
			t.Errorf("RESP_ENTRIES id %d len %d, want 2 and room for 2 entries", id, l)
		}
		// One entry: ::ffff:10.9.0.1, index 1, port 1, RoCE v2, ifindex 3.
		out := unsafe.Slice((*byte)(unsafe.Add(nil, uintptr(entries))), 32) // the mmapped answer buffer
		copy(out[10:], []byte{0xff, 0xff, 10, 9, 0, 1})
		binary.NativeEndian.PutUint32(out[16:], 1)
		binary.NativeEndian.PutUint32(out[20:], 1)
		binary.NativeEndian.PutUint32(out[24:], GIDTypeRoCEv2)
		binary.NativeEndian.PutUint32(out[28:], 3)
		binary.NativeEndian.PutUint64(c.arena[ioctlOutOffset:], 1) // RESP_NUM_ENTRIES
		return nil
	})
	got, err := c.QueryGIDTable(14, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := GIDEntry{Index: 1, Port: 1, Type: GIDTypeRoCEv2, NetdevIfindex: 3}
	copy(want.GID[10:], []byte{0xff, 0xff, 10, 9, 0, 1})
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := c.QueryGIDTable(14, 4096); err == nil {
		t.Error("4096 entries (131072 bytes) do not fit a 16-bit attribute length: want an error")
	}
}
