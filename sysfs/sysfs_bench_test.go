package sysfs

import "testing"

// BenchmarkReadRecorded reads what grdma port and gid show read of one
// device, from the tree captured on 6.12 (testdata/rxe-6.12): the device,
// its ports, and the GID table of port 1 (1024 slots, 3 populated).
func BenchmarkReadRecorded(b *testing.B) {
	fsys := mustFS(b, "testdata/rxe-6.12")
	for _, bench := range []struct {
		name string
		read func() error
	}{
		{"device", func() error { _, err := fsys.Device("rxe0"); return err }},
		{"ports", func() error { _, err := fsys.Ports("rxe0"); return err }},
		{"gid_table", func() error { _, err := fsys.GIDAttrs("rxe0", 1); return err }},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bench.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
