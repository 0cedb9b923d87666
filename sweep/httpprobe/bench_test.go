package httpprobe

import (
	"context"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
)

// BenchmarkProbe: one test through a fake exporter on loopback, the
// request made, the answer read and parsed: the coordinator's cost per
// test beside the exporter's and the test's own.
func BenchmarkProbe(b *testing.B) {
	e := &exporterFake{t: b, bw: func(c, s string) float64 { return 97 }, latUsec: func(c, s string) float64 { return 2 }}
	nodes := e.fleetB(b, 2)
	p := &Prober{Nodes: nodes}
	for name, test := range map[string]verbsprobe.Test{"bw": bwTest, "lat": latTest} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := p.Probe(context.Background(), 0, 1, test, 5*time.Second); r.Outcome != sweep.OutcomeOK {
					b.Fatal(r)
				}
			}
		})
	}
}
