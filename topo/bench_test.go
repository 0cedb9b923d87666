package topo_test

import (
	"testing"

	"github.com/grdma/grdma/topo"
)

// BenchmarkRead reads the captured switch layout (25 functions, 2 GPUs,
// 6 NICs) as the exporter does at every scrape with --collector.pcie.
func BenchmarkRead(b *testing.B) {
	fsys := tree(b, "switch-6.12")
	gpus := switchGPUs(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := topo.Read(fsys, topo.Options{GPUs: gpus}); err != nil {
			b.Fatal(err)
		}
	}
}
