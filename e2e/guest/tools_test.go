//go:build e2eguest

package guest

import (
	"os"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// TestToolsPresent checks the image: every tool the scenarios exec is
// there and runs, and the kernel has what rxe needs.
func TestToolsPresent(t *testing.T) {
	t.Logf("kernel %s", must(t, "/bin/uname", "-r").stdout)
	for _, c := range [][]string{
		{layout.Rdma, "-V"},
		{layout.IP, "-V"},
		{layout.IbvDevinfo, "-l"},
		{layout.Strace, "-V"},
		{layout.Busybox, "true"},
	} {
		must(t, c[0], c[1:]...)
	}
	for _, tool := range []string{layout.IbvRcPingpong, layout.IbWriteBw, layout.IbWriteLat,
		layout.IbReadBw, layout.IbReadLat, layout.IbSendBw, layout.IbSendLat} {
		if _, err := os.Stat(tool); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(layout.ModulesDir + "/virtio_net"); err != nil {
		t.Errorf("virtio_net (the pair's NIC) not in the image: %v", err)
	}
	if _, err := os.Stat(grdma()); err != nil {
		t.Errorf("grdma missing: %v", err)
	}
	for _, m := range []string{"ib_core", "ib_uverbs", "rdma_rxe", "crc32_generic", "veth"} {
		if !moduleLoaded(m) {
			t.Errorf("module %s not loaded at boot", m)
		}
	}
	for _, n := range []string{layout.Veth0, layout.Veth1} {
		if _, err := os.Stat("/sys/class/net/" + n); err != nil {
			t.Errorf("netdev %s: %v", n, err)
		}
	}
}
