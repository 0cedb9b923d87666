package nldev

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
)

// recordedMessages returns the attribute bytes of every netlink message of
// a recorded reply (testdata/nldev), NLMSG_DONE and errors left out.
func recordedMessages(tb testing.TB, path ...string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "testdata", "nldev"}, path...)...))
	if err != nil {
		tb.Fatal(err)
	}
	var msgs [][]byte
	for len(b) >= 16 {
		n := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		if n < 16 || n > len(b) {
			tb.Fatalf("%v: bad message length %d", path, n)
		}
		if typ != uint16(netlink.Done) && typ != uint16(netlink.Error) {
			msgs = append(msgs, b[16:n])
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	if len(msgs) == 0 {
		tb.Fatalf("%v: no message", path)
	}
	return msgs
}

// BenchmarkDecodeRecorded decodes real replies of the 6.12 kernel: the
// device dump, a port dump and a port's counters (STAT_GET), as grdma dev,
// link and stat show do for each device.
func BenchmarkDecodeRecorded(b *testing.B) {
	for _, bench := range []struct {
		name   string
		file   []string
		decode func(ad *netlink.AttributeDecoder) error
	}{
		{"devices", []string{"6.12", "nl", "get_dump.bin"}, func(ad *netlink.AttributeDecoder) error { var d Device; return d.decode(ad) }},
		{"ports", []string{"6.12", "nl", "port_dump_dev0.bin"}, func(ad *netlink.AttributeDecoder) error { var p Port; return p.decode(ad) }},
		{"counters", []string{"6.12", "stat", "nl", "stat_get_dev0_port1.bin"}, func(ad *netlink.AttributeDecoder) error {
			var pc PortCounters
			return pc.decode(ad)
		}},
	} {
		msgs := recordedMessages(b, bench.file...)
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, m := range msgs {
					if err := decodeMessage(m, bench.decode); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
