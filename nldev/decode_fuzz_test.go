package nldev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzDecodeCountersAndResources feeds arbitrary attribute bytes to the
// decoders FuzzDecode does not cover: counters, QP counter modes, the
// resource summary, every resource table (plain and raw), char devices and
// monitor events. None may panic; seeds are the real replies recorded on
// 6.1 and 6.12.
func FuzzDecodeCountersAndResources(f *testing.F) {
	for _, pattern := range []string{"*/stat/nl/*.bin", "res/*/nl/*.bin", "6.12/monitor/*.bin"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", pattern))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil && len(b) > 16 {
				f.Add(b[16:]) // attributes after the first nlmsghdr
			}
		}
	}
	objects := []ResObject{&QP{}, &CMID{}, &CQ{}, &MR{}, &PD{}, &Ctx{}, &SRQ{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pc PortCounters
		var mode QPCounterMode
		var qc QPCounter
		var ch Chardev
		var ev Event
		for _, fn := range []func(*netlink.AttributeDecoder) error{pc.decode, mode.decode, qc.decode, ch.decode, ev.decode} {
			_ = decodeMessage(b, fn)
		}
		var in interner
		var sum ResSummary
		_ = sum.decode(b, &in)
		for _, obj := range objects {
			_ = resTable(b, obj.ResType().kind(), &in, func(dev uint32, name string, entry []byte) error {
				_ = decodeResEntry(obj, dev, name, entry, &in)
				var raw RawEntry
				_ = raw.decode(dev, name, entry, &in)
				return nil
			})
		}
	})
}
