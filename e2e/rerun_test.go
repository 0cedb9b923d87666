//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRxeFault: a 6.12 fleet node's oops in rdma_rxe counts as the rxe
// defect, and so does a double fault in the slab allocator in another
// task; a QEMU link stall (NETDEV WATCHDOG) and an oops elsewhere, whose
// "Modules linked in" still name rdma_rxe, do not.
func TestRxeFault(t *testing.T) {
	oops := consoleFile(t, "oops-6.12-rxe.console")
	if !rxeFault(oops) {
		t.Error("the 6.12 rdma_rxe oops is not an rxe fault")
	}
	elsewhere := []string{
		"[  811.543843] Oops: general protection fault, probably for non-canonical address 0x579ec04584edaa45: 0000 [#1] PREEMPT SMP NOPTI",
		"[  811.560535] Workqueue: events_unbound flush_to_ldisc",
		"[  811.572946] RIP: 0010:kmem_cache_alloc_noprof+0xa6/0x2f0",
		"[  811.584850]  __build_skb+0x23/0x60",
		"[  811.585153]  page_to_skb+0x99/0x4d0 [virtio_net]",
		"[  811.586000] Modules linked in: rdma_ucm rdma_cm iw_cm ib_cm configfs virtio_net rdma_rxe ib_uverbs ib_core",
	}
	if rxeFault(elsewhere) {
		t.Error("an oops outside rdma_rxe counts as an rxe fault")
	}
	// The defect met by another task: a grdma thread's open(2) double-faulted
	// in the slab allocator (make check, 2026-11-28, the third 6.12 fleet).
	if !rxeFault(consoleFile(t, "oops-6.12-doublefault-slab.console")) {
		t.Error("a double fault in the slab allocator is not counted as the rxe defect")
	}
	other := []string{
		"[  708.427052] Oops: double fault: 0000 [#1] PREEMPT SMP NOPTI",
		"[  708.427765] RIP: 0010:do_sys_openat2+0xab/0xe0",
	}
	if rxeFault(other) {
		t.Error("a double fault outside the slab allocator counts as an rxe fault")
	}
	stall := []string{"[  446.883007] virtio_net virtio1 eth0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 227920 ms"}
	if rxeFault(stall) {
		t.Error("a link stall counts as an rxe fault")
	}
}

// TestRerunPolicy: which runs were stopped by the 6.12 rxe defect, what a
// rerun skips, and what is marked skipped once the reruns are spent.
func TestRerunPolicy(t *testing.T) {
	driver := func(rc int) *FleetResult {
		return &FleetResult{Nodes: []*Result{{RC: rc}}}
	}
	crashed := driver(-1)
	crashed.Faults, crashed.RxeFaults = []string{"node2: [ 14.03] Oops: double fault"}, 1
	stall := driver(-1)
	stall.Faults, stall.LinkStalls = []string{"node4: [ 446.88] virtio_net virtio1 eth0: NETDEV WATCHDOG"}, 1
	tail := driver(0) // a node failed after the driver finished every scenario
	tail.Faults, tail.RxeFaults = []string{"node3: [ 99.1] BUG: kernel NULL pointer dereference"}, 1

	cut := &TestNode{Name: "TestFleetCMInterop", Children: []*TestNode{
		{Name: "TestFleetCMInterop/to_rping_server", Action: "pass"},
		{Name: "TestFleetCMInterop/perftest_reference"},
	}}
	first := &fleetRun{f: crashed, nodes: []*TestNode{{Name: "TestFleetCM", Action: "pass"}, {Name: "TestFleetPing", Action: "fail"}, cut}}
	clean := &fleetRun{f: driver(0), nodes: []*TestNode{{Name: "TestFleetRping", Action: "skip"}}}

	if !first.stopped() || clean.stopped() || (&fleetRun{f: tail, nodes: []*TestNode{{Name: "TestFleetCM", Action: "pass"}}}).stopped() {
		t.Error("stopped: want a run cut short by a fault only")
	}
	if !rxeDefect("6.12", []*fleetRun{first, clean}) {
		t.Error("a 6.12 fleet stopped by rdma_rxe alone is not the rxe defect")
	}
	if rxeDefect("6.1", []*fleetRun{first}) {
		t.Error("a 6.1 fleet's rxe oops counts as the 6.12 defect")
	}
	if rxeDefect("6.12", []*fleetRun{first, {f: stall}}) {
		t.Error("a link stall counts as the rxe defect")
	}
	// Link stalls and 6.12's rxe defect get a second rerun; a 6.1 oops
	// does not.
	if !knownFaults("6.1", []*fleetRun{{f: stall}, {f: stall}}) || !knownFaults("6.12", []*fleetRun{first, {f: stall}}) {
		t.Error("link stalls (and 6.12's rxe defect) are not known faults")
	}
	if knownFaults("6.1", []*fleetRun{{f: stall}, first}) {
		t.Error("a 6.1 kernel oops counts as a known fault")
	}
	// A rerun skips what passed or skipped anywhere; failed and cut short
	// scenarios run again.
	if got := passed([]*fleetRun{first, clean}); !slices.Equal(got, []string{"TestFleetCM", "TestFleetRping"}) {
		t.Errorf("passed = %q", got)
	}
	skipCutShort(cut, "why")
	if cut.Action != "skip" || cut.Children[0].Action != "pass" || cut.Children[1].Action != "skip" ||
		cut.Children[1].Output[0] != "why" || cut.Output[0] != "why" {
		t.Errorf("skipCutShort: %+v %+v %+v", cut, cut.Children[0], cut.Children[1])
	}
	failed := &TestNode{Action: "fail"}
	if skipCutShort(failed, "why"); failed.Action != "fail" {
		t.Error("skipCutShort hid a failure")
	}
}

// TestListScenarios lists a test binary's tests by a -test.run pattern's
// top-level element, as the bed does to name the scenarios a stopped fleet
// never reached.
func TestListScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary")
	}
	dir := t.TempDir()
	src := "package x\nimport \"testing\"\nfunc TestFleetA(t *testing.T) {}\nfunc TestFleetB(t *testing.T) {}\nfunc TestPairC(t *testing.T) {}\nfunc Example() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "x.test")
	b := &Bed{}
	if _, err := b.run(context.Background(), dir, []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, "go", "test", "-c", "-o", bin, "."); err != nil {
		t.Fatal(err)
	}
	got, err := listScenarios(context.Background(), bin, "^TestFleet/sub")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "TestFleetA,TestFleetB" {
		t.Errorf("listScenarios = %q, want TestFleetA, TestFleetB", got)
	}
}
