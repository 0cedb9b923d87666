package pingmesh

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// meshOf is a collector of n targets in n/25 ToRs, each with results.
func meshOf(b *testing.B, n int) *Mesh {
	b.Helper()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "- targets: [h%d]\n  labels: {rack: r%d, tor: tor%d}\n", i, i/25, i/25)
	}
	path := filepath.Join(b.TempDir(), "mesh.yml")
	os.WriteFile(path, []byte(sb.String()), 0o644)
	m := New(Config{}, newFakeProber(), &TargetsFile{Path: path})
	m.Reload()
	for i := range n {
		for _, size := range []int{64, 512, 1024, 4096} {
			m.record(reply(fmt.Sprintf("h%d", i), size, 20*time.Microsecond))
		}
	}
	return m
}

// BenchmarkRecord: the collector's cost of one probe's result (what it
// adds to the prober's per probe).
func BenchmarkRecord(b *testing.B) {
	m := meshOf(b, 1000)
	r := reply("h500", 512, 25*time.Microsecond)
	b.ReportAllocs()
	for b.Loop() {
		m.record(r)
	}
}

// BenchmarkCollect: a scrape of the pingmesh at 10 and 1,000 targets
// (per-target histograms up to 100; beyond, by ToR), and the collector's
// heap at 1,000.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m := meshOf(b, n)
			runtime.GC()
			runtime.ReadMemStats(&after)
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB-heap")
		})
	}
}
