package main

import (
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
)

// TestResShowSkipsVanishedDevice: found by the e2e churn, where
// `grdma -j res show qp` printed the QPs of the first devices and then
// failed with "no RDMA device with index 9" for a device deleted after the
// device dump. Listing every device, it is skipped like the other
// listings skip it; asked for by name, it is still an error.
func TestResShowSkipsVanishedDevice(t *testing.T) {
	gone := func() *nlfixture.Kernel {
		k := resKernel("6.12")
		for _, r := range []nlfixture.Request{
			{Cmd: nldev.CmdGet, Dev: 1, Port: -1},
			{Cmd: nldev.CmdResQPGet, Dump: true, Dev: 1, Port: -1},
		} {
			k.On(r, "get_doit_bad_index.bin")
		}
		return k
	}
	out, stderr, code := runRes(t, gone(), "6.12", "-j", "res", "show", "qp")
	if code != 0 || stderr != "" || !strings.Contains(out, `"ifname":"rxe0"`) || strings.Contains(out, `"ifname":"rxe1"`) {
		t.Fatalf("res show qp: exit %d, stdout %q, stderr %q; want rxe0's QPs alone", code, out, stderr)
	}
	if _, _, code := runRes(t, gone(), "6.12", "res", "show", "qp", "dev", "rxe1"); code != exitFailed {
		t.Fatalf("res show qp dev rxe1: exit %d, want 1", code)
	}
}
