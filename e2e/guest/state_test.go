//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// rdmaDevices lists the RDMA device names `rdma -j dev` reports (none
// when ib_core is not loaded).
func rdmaDevices(t *testing.T) []string {
	t.Helper()
	if !moduleLoaded("ib_core") {
		return nil
	}
	r := must(t, layout.Rdma, "-j", "dev")
	var devs []struct {
		Ifname string `json:"ifname"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
		t.Fatalf("rdma -j dev: %v\n%s", err, r)
	}
	var names []string
	for _, d := range devs {
		names = append(names, d.Ifname)
	}
	return names
}

// deleteAllDevices removes every RDMA device with iproute2, so each
// scenario starts from a clean kernel whatever ran before it.
func deleteAllDevices(t *testing.T) {
	t.Helper()
	for _, name := range rdmaDevices(t) {
		must(t, layout.Rdma, "link", "delete", name)
	}
}

// addRxeAddr gives veth0 rxeAddr/24 until the test ends. Only that address
// goes then: a flush would take the IPv6 link-local address too, which
// later tests use.
func addRxeAddr(t *testing.T) {
	t.Helper()
	ip(t, "addr", "add", rxeAddr+"/24", "dev", "veth0")
	t.Cleanup(func() { run(layout.IP, "addr", "del", rxeAddr+"/24", "dev", "veth0") })
}

// addRxe creates an rxe device with iproute2 (not grdma), so scenarios
// that are not about `link add` do not depend on it.
func addRxe(t *testing.T, name, netdev string) {
	t.Helper()
	must(t, layout.Rdma, "link", "add", name, "type", "rxe", "netdev", netdev)
}

// cleanRDMA makes sure rdma_rxe is loaded and no device exists, now and
// when the test ends.
func cleanRDMA(t *testing.T) {
	t.Helper()
	loadModules(t, "rdma_rxe")
	deleteAllDevices(t)
	t.Cleanup(func() { loadModules(t, "rdma_rxe"); deleteAllDevices(t) })
}

func moduleLoaded(name string) bool {
	b, _ := os.ReadFile("/proc/modules")
	return strings.Contains("\n"+string(b), "\n"+name+" ")
}

// loadModules loads modules with their dependencies (the kernel itself
// cannot: see layout.ModprobeSysctl).
func loadModules(t *testing.T, names ...string) {
	t.Helper()
	must(t, layout.LoadMod, names...)
}

// rdmaModules are unloaded in this order to take RDMA out of the kernel.
var rdmaModules = []string{"rdma_ucm", "ib_umad", "rdma_cm", "iw_cm", "ib_cm", "rdma_rxe", "ib_uverbs", "ib_core"}

// unloadModules removes the named modules and everything in rdmaModules
// that stands before them (their users); the caller reloads what it needs.
func unloadModules(t *testing.T, names ...string) {
	t.Helper()
	deleteAllDevices(t)
	last := -1
	for i, m := range rdmaModules {
		for _, n := range names {
			if m == n {
				last = max(last, i)
			}
		}
	}
	for _, m := range rdmaModules[:last+1] {
		if moduleLoaded(m) {
			must(t, "/bin/rmmod", m)
		}
	}
	for _, n := range names {
		if moduleLoaded(n) {
			t.Fatalf("module %s still loaded", n)
		}
	}
}

// noAutoload points the kernel's module loader at /bin/false for the test,
// so a missing module stays missing.
func noAutoload(t *testing.T) {
	t.Helper()
	old, err := os.ReadFile(layout.ModprobeSysctl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layout.ModprobeSysctl, []byte("/bin/false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(layout.ModprobeSysctl, old, 0o644) })
}

// vethPairs creates veth pairs until veth0..veth(n-1) exist, all up, and
// removes the ones it made when the test ends. init makes veth0/veth1.
func vethPairs(t *testing.T, n int) {
	t.Helper()
	for i := 2; i < n; i += 2 {
		a, b := fmt.Sprintf("veth%d", i), fmt.Sprintf("veth%d", i+1)
		if _, err := os.Stat("/sys/class/net/" + a); err == nil {
			continue
		}
		ip(t, "link", "add", a, "type", "veth", "peer", "name", b)
		t.Cleanup(func() { run(layout.IP, "link", "del", a) })
		ip(t, "link", "set", a, "up")
		ip(t, "link", "set", b, "up")
	}
}
