package nldev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzDecode feeds arbitrary attribute bytes to every reply decoder: none
// may panic, whatever a kernel (or a corrupted buffer) sends.
func FuzzDecode(f *testing.F) {
	for _, kv := range []string{"6.1", "6.12"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", kv, "nl", "*.bin"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err == nil && len(b) > 16 {
				f.Add(b[16:]) // attributes after the first nlmsghdr
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Device
		var p Port
		var s System
		for _, fn := range []func(*netlink.AttributeDecoder) error{d.decode, p.decode, s.decode} {
			_ = decodeMessage(b, fn)
		}
	})
}
