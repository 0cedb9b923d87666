package rdmacm

import (
	"encoding/binary"
	"testing"
)

// FuzzDecode feeds arbitrary kernel answers to the decoders of events,
// socket addresses and packed path records: whatever the bytes, they
// return values (private data within its buffer), never panic.
func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, binary.Size(eventResp{})))
	ev := eventResp{Event: uint32(EventConnectRequest)}
	ev.Param[264] = 255
	b, _ := binary.Append(nil, binary.NativeEndian, ev)
	f.Add(b)
	f.Add([]byte{2, 0, 0x1c, 0x06, 10, 0, 0, 1})
	f.Add([]byte{10, 0, 0, 1, 0, 0, 0, 0, 0xfe, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r eventResp
		if _, err := binary.Decode(b, binary.NativeEndian, &r); err == nil {
			ev := decodeEvent(&r)
			if len(ev.Conn.PrivateData) > len(connParam{}.PrivateData) {
				t.Fatalf("private data of %d bytes", len(ev.Conn.PrivateData))
			}
		}
		decodeSockaddr(b)
		if len(b) >= packedPathRecSize {
			unpackPath(b[:packedPathRecSize])
		}
	})
}
