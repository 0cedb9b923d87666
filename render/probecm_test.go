package render

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// A probe over the RDMA CM shows what the CM chose and its steps' times,
// in text and JSON; before the CM chose a device, neither.
func TestProbeResultCM(t *testing.T) {
	g, _ := gid.Parse("::ffff:10.0.0.2")
	d, _ := gid.Parse("::ffff:10.0.0.1")
	ci := &verbsprobe.CMInfo{Src: netip.MustParseAddrPort("10.0.0.2:49152"), Dst: netip.MustParseAddrPort("10.0.0.1:18515"),
		Device: "rxe0", Port: 1, GIDIndex: 1, GID: g, DGID: d, RoCE: "RoCE v2", PathMTU: ib.MTU1024, TrafficClass: 104, HopLimit: 64,
		Steps: []verbsprobe.CMStep{{Name: "resolve address", Duration: 310 * time.Microsecond}, {Name: "connect", Duration: 2 * time.Millisecond}}}
	r := &verbsprobe.Result{Device: "rxe0", Port: 1, GIDIndex: 1, GID: g, QPN: 17,
		Steps: []verbsprobe.Step{{Name: "resolve", OK: true, Duration: 400 * time.Microsecond}},
		Peer:  &verbsprobe.PeerResult{Role: verbsprobe.RoleClient, Host: "10.0.0.1:18515", Test: &verbsprobe.Test{Kind: verbsprobe.TestConnect}, CM: ci}}
	var b bytes.Buffer
	for _, j := range []bool{false, true} {
		p := output.New(&b, output.Options{JSON: j})
		s := &verbsprobe.Series{}
		s.Add(r)
		ProbeResult(p, r, s, 1)
		p.Flush()
	}
	for _, want := range []string{
		"rdma_cm: 10.0.0.1:18515 from 10.0.0.2:49152 via rxe0/1 GID 1 ::ffff:10.0.0.2 (RoCE v2), path MTU 1024, ToS 104, hop limit 64; resolve address 310µs, connect 2.00ms\n",
		`"cm":{"src":"10.0.0.2:49152","dst":"10.0.0.1:18515","ifname":"rxe0","port":1,"gid_index":1,"gid":"::ffff:10.0.0.2","dgid":"::ffff:10.0.0.1","roce":"RoCE v2","path_mtu":1024,"tos":104,"hop_limit":64,"steps":[{"name":"resolve address","usec":310},{"name":"connect","usec":2000}]}`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("want %s in:\n%s", want, &b)
		}
	}
	b.Reset()
	r = &verbsprobe.Result{Port: 1, GIDIndex: -1, Steps: []verbsprobe.Step{{Name: "resolve", Err: &verbsprobe.StepError{Step: "resolve", Err: bytes.ErrTooLarge}}},
		Peer: &verbsprobe.PeerResult{Role: verbsprobe.RoleClient, Host: "10.0.0.1:18515", CM: &verbsprobe.CMInfo{GIDIndex: -1}}}
	p := output.New(&b, output.Options{})
	ProbeResult(p, r, &verbsprobe.Series{Runs: 1}, 1)
	p.Flush()
	if got := b.String(); !strings.HasPrefix(got, "probe\n  peer 10.0.0.1:18515\n") || strings.Contains(got, "rdma_cm") {
		t.Errorf("before the CM chose:\n%s", got)
	}
}
