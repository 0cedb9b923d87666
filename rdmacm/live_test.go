package rdmacm

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLive runs the scenarios against the running kernel. It needs an
// rxe (or RoCE) device whose netdev has the IPv4 address
// $RDMACM_LIVE_ADDR, and $RDMACM_LIVE_NO_RDMA, an address of a netdev
// without RDMA device; it is skipped elsewhere. With $RDMACM_RECORD it
// writes what the kernel answered to that file, for TestReplay (run in
// the guest by testdata/rdmacm/capture.sh).
func TestLive(t *testing.T) {
	addrText, noRDMAText := os.Getenv("RDMACM_LIVE_ADDR"), os.Getenv("RDMACM_LIVE_NO_RDMA")
	if addrText == "" || noRDMAText == "" {
		t.Skip("rdmacm: set RDMACM_LIVE_ADDR and RDMACM_LIVE_NO_RDMA to run the scenarios against this kernel")
	}
	env := &scenarioEnv{addr: netip.MustParseAddr(addrText), noRDMA: netip.MustParseAddr(noRDMAText)}
	var uts unix.Utsname
	unix.Uname(&uts)
	rec := &recording{Kernel: unix.ByteSliceToString(uts.Release[:]), Addr: addrText, NoRDMA: noRDMAText,
		Channels: map[string]transcript{}, Egress: map[string]egressRec{}}
	var mu sync.Mutex
	var recorders = map[string]*recorder{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			env.open = func(t *testing.T, name string) *Channel {
				r := &recorder{}
				c, err := openNode(Node{Path: DefaultPath, ABI: ABIVersion}, Options{}, r.trace)
				if err != nil {
					t.Fatal(err)
				}
				egress := c.egress
				c.egress = func(dst netip.Addr) (string, netip.Addr) {
					netdev, src := egress(dst)
					mu.Lock()
					rec.Egress[dst.String()] = egressRec{netdev, src}
					mu.Unlock()
					return netdev, src
				}
				t.Cleanup(func() { c.Close() })
				mu.Lock()
				recorders[sc.name+"/"+name] = r
				mu.Unlock()
				return c
			}
			sc.run(t, env)
		})
	}
	path := os.Getenv("RDMACM_RECORD")
	if path == "" || t.Failed() {
		return
	}
	for name, r := range recorders {
		rec.Channels[name] = r.tr
	}
	b, err := json.MarshalIndent(rec, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d channels of kernel %s to %s", len(rec.Channels), strings.TrimSpace(rec.Kernel), path)
}
