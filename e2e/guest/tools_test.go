//go:build e2eguest

package guest

import (
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// TestToolsPresent checks the image: every tool the scenarios exec is
// there and runs, and the kernel has what rxe needs. TestFleetToolsPresent
// checks what needs a link (names, rdma_cm, libfabric on rxe, modules
// loading).
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
	for _, tool := range []string{layout.IbvRcPingpong, layout.IbvUdPingpong, layout.IbWriteBw, layout.IbWriteLat,
		layout.IbReadBw, layout.IbReadLat, layout.IbSendBw, layout.IbSendLat,
		layout.Rping, layout.Ucmatose, layout.RdmaServer, layout.RdmaClient, layout.Udaddy,
		layout.FiPingpong, layout.LibgccS} {
		if _, err := os.Stat(tool); err != nil {
			t.Error(err)
		}
	}
	// What runs without a link (the scenarios across guests run the rest).
	// nft opens its netlink socket even for -v: nf_tables must be loaded
	// (the fault helpers load it on demand; earlier tests may not have).
	if !moduleLoaded("nf_tables") {
		loadModules(t, "nf_tables")
	}
	for _, c := range [][]string{
		{layout.Tc, "-V"},
		{layout.Nft, "-v"},
		{layout.FiInfo, "--version"},
	} {
		must(t, c[0], c[1:]...)
	}
	for _, m := range append([]string{"virtio_net", "rdma_ucm"}, layout.FaultModules...) {
		if _, err := os.Stat(layout.ModulesDir + "/" + m); err != nil {
			t.Errorf("module %s (linked guests, fault helpers) not in the image: %v", m, err)
		}
	}
	// Name lookups answer from files (librdmacm's rdma_getaddrinfo fails
	// with EAI_AGAIN without /etc/hosts).
	for _, name := range []string{layout.PeerAName, layout.FleetName(1), layout.FleetName(layout.FleetMax)} {
		if !strings.Contains(readFile(layout.Hosts), "\t"+name+"\n") {
			t.Errorf("%s does not name %s", layout.Hosts, name)
		}
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
