//go:build e2eguest

package guest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// outputCommands are compared between grdma and rdma; each must print the
// same bytes (JSON: same values, key order and bytes).
var outputCommands = [][]string{
	{"dev"}, {"link"}, {"-d", "dev"}, {"-d", "link"},
	{"-j", "dev"}, {"-j", "link"}, {"-j", "-d", "dev"}, {"-j", "-d", "link"},
	{"dev", "show", "rxe0"}, {"link", "show", "rxe0/1"}, {"-j", "link", "show", "rxe0/1"},
}

// TestOutputMatchesRdma: grdma's dev and link output equals rdma's for
// the same state, with 1 and with 16 devices (made with rdma, so this does
// not depend on grdma's link add).
func TestOutputMatchesRdma(t *testing.T) {
	if v, err := rdmaVersion(); err == nil {
		t.Logf("reference: iproute2 rdma %d.%d", v.Major, v.Minor)
	}
	for _, n := range []int{1, 16} {
		t.Run(fmt.Sprintf("%d_devices", n), func(t *testing.T) {
			cleanRDMA(t)
			vethPairs(t, n)
			for i := range n {
				addRxe(t, fmt.Sprintf("rxe%d", i), fmt.Sprintf("veth%d", i))
			}
			if got := len(rdmaDevices(t)); got != n {
				t.Fatalf("rdma lists %d devices, want %d", got, n)
			}
			for _, args := range outputCommands {
				t.Run(strings.ReplaceAll(strings.Join(args, "_"), "/", "_"), func(t *testing.T) {
					if msg := compareOutputs(grdma(), args...); msg != "" {
						t.Error(msg)
					}
				})
			}
		})
	}
}

// TestComparisonCatchesWrongKey proves the bed itself: a grdma that prints
// rdma's output with one JSON key renamed must fail the comparison with a
// diff naming both keys, while its untouched output must pass.
func TestComparisonCatchesWrongKey(t *testing.T) {
	cleanRDMA(t)
	addRxe(t, "rxe0", "veth0")
	msg := compareOutputs(layout.FakeGrdmaWrongKey, "-j", "dev")
	t.Logf("what a broken grdma looks like:\n%s", msg)
	if !strings.Contains(msg, `-     "node_guid"`) || !strings.Contains(msg, `+     "node_gwid"`) {
		t.Errorf("the comparison did not report the renamed key readably:\n%s", msg)
	}
	for _, args := range [][]string{{"-j", "link"}, {"dev"}} {
		if msg := compareOutputs(layout.FakeGrdmaWrongKey, args...); msg != "" {
			t.Errorf("identical output reported as different:\n%s", msg)
		}
	}
}
