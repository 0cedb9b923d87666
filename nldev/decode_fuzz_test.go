package nldev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzDecodeCountersAndEvents feeds arbitrary attribute bytes to the
// decoders that FuzzDecode (devices, ports, system) and FuzzResDecode
// (resources) leave out: port counters, QP counters and their mode, char
// devices and monitor events. None may panic; seeds are the real replies
// recorded on 6.1 and 6.12.
func FuzzDecodeCountersAndEvents(f *testing.F) {
	for _, pattern := range []string{"*/stat/nl/*.bin", "6.12/monitor/*.bin"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", pattern))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil && len(b) > 16 {
				f.Add(b[16:]) // attributes after the first nlmsghdr
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pc PortCounters
		var mode QPCounterMode
		var qc QPCounter
		var ch Chardev
		var ev Event
		for _, fn := range []func(*netlink.AttributeDecoder) error{pc.decode, mode.decode, qc.decode, ch.decode, ev.decode} {
			_ = decodeMessage(b, fn)
		}
	})
}
