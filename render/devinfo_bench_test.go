package render

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/internal/devinfofixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/uverbs"
)

// BenchmarkDevInfoJSON renders the two recorded devices as JSON: the
// CPU grdma -j dev info spends per device besides its system calls.
func BenchmarkDevInfoJSON(b *testing.B) {
	rec := devinfofixture.Dir(filepath.Join("..", "devinfo", "testdata", "6.12"))
	fsys, err := rec.Sysfs(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	nl := nldev.NewClient(rec.Kernel().Conn())
	r := &devinfo.Reader{Sysfs: fsys, Netlink: nl,
		OpenVerbs: func(dev string, _ uverbs.Node) (devinfo.Verbs, error) { return rec.Verbs(dev), nil }}
	devs, err := r.Read("")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p := output.New(io.Discard, output.Options{JSON: true})
		p.StartList()
		for i := range devs {
			DevInfo(p, &devs[i])
		}
		p.EndList()
		p.Flush()
	}
}
