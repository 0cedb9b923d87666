package rdmacm

import (
	"net/netip"
	"path/filepath"
	"testing"
)

// TestReplay runs the scenarios against the fake kernel, which answers
// what the guest kernels answered when TestLive recorded them
// (testdata/rdmacm/KERNEL/recording.json): the same commands must go out, and the
// recorded answers must decode to what the scenarios check.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("../testdata/rdmacm/*/recording.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recordings in testdata/rdmacm (capture them: testdata/rdmacm/capture.sh)")
	}
	for _, file := range files {
		rec, err := readRecording(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					env := &scenarioEnv{addr: netip.MustParseAddr(rec.Addr), noRDMA: netip.MustParseAddr(rec.NoRDMA)}
					env.open = func(t *testing.T, name string) *Channel {
						tr, ok := rec.Channels[sc.name+"/"+name]
						if !ok {
							t.Fatalf("%s: no channel %s/%s recorded", file, sc.name, name)
						}
						c := newFakeKernel(t, sc.name+"/"+name, tr).channel(Options{})
						c.egress = func(dst netip.Addr) (string, netip.Addr) { e := rec.Egress[dst.String()]; return e.Netdev, e.Src }
						return c
					}
					sc.run(t, env)
				})
			}
		})
	}
}
