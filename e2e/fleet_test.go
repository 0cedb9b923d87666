package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSwitchConsole: the switch's console answers one command at a time,
// and Ports shows a plugged port's counters (where vde2 is installed:
// make e2e installs it).
func TestSwitchConsole(t *testing.T) {
	if findTool(hostVdeSwitch) == "" {
		t.Skipf("%s not installed", hostVdeSwitch)
	}
	plug, err := exec.LookPath("vde_plug")
	if err != nil {
		t.Skip("vde_plug not installed")
	}
	sw, err := (&Bed{Logf: t.Logf}).startSwitch(2)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.stop()
	if out, err := sw.command("port/print 99"); err == nil || !strings.HasPrefix(err.Error(), "10") {
		t.Errorf("want a failure status for a port that does not exist, got %v:\n%s", err, out)
	}
	// A plug stays on the switch while its standard input is open.
	cmd := exec.Command(plug, sw.dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	var ports string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ports = sw.Ports(); strings.Contains(ports, "Port 0001") {
			break
		}
	}
	for _, want := range []string{"Port 0001", "IN:  pkts", "OUT: pkts", "vdeplug"} {
		if !strings.Contains(ports, want) {
			t.Errorf("Ports does not show %q:\n%s", want, ports)
		}
	}
}

// testMachine is a machine without QEMU: its console is fed by hand and
// killed says why it was killed.
func testMachine(t *testing.T) (m *machine, killed chan struct{}) {
	killed = make(chan struct{})
	var once sync.Once
	m = &machine{r: &Result{}, marks: map[string]time.Time{}, share: t.TempDir(), started: time.Now(),
		done: make(chan struct{}), running: make(chan struct{}), fault: make(chan struct{}),
		cancel: func() { once.Do(func() { close(killed) }) }}
	return m, killed
}

// consoleFile is a recorded console, one line at a time.
func consoleFile(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestKernelFaultStopsFleet: a node whose kernel oopses while QEMU runs on
// (main's full e2e, 6.12: rdma_rxe's NULL call in a kworker on the
// responder, node4; every later scenario then waited 3 min for its agent)
// stops the fleet at once, the node named with the oops's first line; a
// healthy console stops nothing. testdata/oops-6.12-rxe.console is node4's
// console tail from that run (the bed kept its last 40 lines) after the
// line the 6.12 kernel prints first for such a fault (arch/x86/mm/fault.c);
// healthy-6.12.console is node2's tail from the same run (rxe's EINVAL
// messages, the link's counters).
func TestKernelFaultStopsFleet(t *testing.T) {
	oops := consoleFile(t, "oops-6.12-rxe.console")
	var faults []string
	for _, l := range oops {
		if kernelFault(l) {
			faults = append(faults, l)
		}
	}
	if len(faults) != 1 || !strings.Contains(faults[0], "BUG: kernel NULL pointer dereference") {
		t.Errorf("kernel failure lines of the oops: %q, want its BUG line only", faults)
	}
	// The first lines of a soft lockup (kernel/watchdog.c) and of a task
	// stuck in the kernel (kernel/hung_task.c), as those print them.
	for _, l := range []string{"[  300.123456] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [kworker/u2:1:57]",
		"[  363.519017] INFO: task rdma:1203 blocked for more than 120 seconds.",
		// node2's console in a 6.1 fleet (TestFleetCMInterop, ib_read_bw -R
		// against grdma): its QEMU stopped taking frames from the switch.
		"[  446.883007] virtio_net virtio1 eth0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 227920 ms",
		// netbeat's word for the same stall (TestNetBeat).
		"e2e-net: eth0 transmit stalled: 89 frames handed to the driver in 60 s, none sent (tx 1049823)"} {
		if !kernelFault(l) {
			t.Errorf("not a kernel failure: %q", l)
		}
		if stall := strings.Contains(l, "transmit"); linkStall(l) != stall {
			t.Errorf("linkStall(%q) = %v", l, !stall)
		}
	}
	healthy := consoleFile(t, "healthy-6.12.console")
	for _, l := range append(healthy, "agent: 22:46:35 BUG: not a kernel line", "[   12.000001] WARNING: CPU: 0 PID: 1 at somewhere", "e2e-net: eth0 rx 306955 tx 1049823") {
		if kernelFault(l) {
			t.Errorf("a kernel failure in %q", l)
		}
	}

	t.Run("oops", func(t *testing.T) {
		driver, driverKilled := testMachine(t)
		node, nodeKilled := testMachine(t)
		var logs strings.Builder
		var mu sync.Mutex
		b := &Bed{Logf: func(format string, args ...any) { mu.Lock(); defer mu.Unlock(); fmt.Fprintf(&logs, format, args...) }}
		go watchNode(b, "node4", node, driver)
		for _, l := range append(healthy, oops...) {
			node.consoleLine(l)
		}
		for _, c := range []chan struct{}{driverKilled, nodeKilled} {
			select {
			case <-c:
			case <-time.After(time.Minute): // a hang guard, not a timed assertion
				t.Fatalf("the fleet was not stopped; driver: %q, node: %q", driver.r.killed, node.r.killed)
			}
		}
		if want := "node4 failed while the scenarios ran: its kernel failed: [  212.431006] BUG: kernel NULL pointer dereference"; !strings.HasPrefix(driver.r.killed, want) {
			t.Errorf("the driver killed for %q, want %q", driver.r.killed, want)
		}
		if !strings.HasPrefix(node.r.killed, "its kernel failed: ") {
			t.Errorf("node4 killed for %q", node.r.killed)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(logs.String(), "node4 stopped the scenarios") || !strings.Contains(logs.String(), "RIP: 0010:0x0") {
			t.Errorf("the bed's log does not name node4 and show its console's tail:\n%s", logs.String())
		}
	})
	// A guest whose heartbeat stops hangs (a kernel stuck with
	// interrupts off prints nothing): the fleet stops, naming it.
	t.Run("hang", func(t *testing.T) {
		driver, driverKilled := testMachine(t)
		node, nodeKilled := testMachine(t)
		node.linked, node.hangAfter = true, 50*time.Millisecond
		node.consoleLine("e2e-mark: run")
		node.consoleLine(heartbeatPrefix + "eth0 rx 10 tx 12")
		node.consoleLine("[  481.568917] eth0 speed is unknown, defaulting to 1000")
		var logs strings.Builder
		var mu sync.Mutex
		b := &Bed{Logf: func(format string, args ...any) { mu.Lock(); defer mu.Unlock(); fmt.Fprintf(&logs, format, args...) }}
		go watchNode(b, "node3", node, driver)
		for _, c := range []chan struct{}{driverKilled, nodeKilled} {
			select {
			case <-c:
			case <-time.After(time.Minute): // a hang guard, not a timed assertion
				t.Fatalf("the fleet was not stopped; driver: %q, node: %q", driver.r.killed, node.r.killed)
			}
		}
		if want := "node3 failed while the scenarios ran: it hangs: [e2e: its console's heartbeat"; !strings.HasPrefix(driver.r.killed, want) {
			t.Errorf("the driver killed for %q, want %q", driver.r.killed, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(logs.String(), "eth0 speed is unknown") {
			t.Errorf("the bed's log does not show node3's last console lines:\n%s", logs.String())
		}
	})
	// A guest without a link prints no heartbeat: never counted hung.
	t.Run("unlinked", func(t *testing.T) {
		node, _ := testMachine(t)
		node.hangAfter = time.Nanosecond
		node.consoleLine("e2e-mark: run")
		if node.checkHeartbeat(time.Now().Add(time.Hour)) {
			t.Error("a guest without a link counted as hung")
		}
	})
	t.Run("healthy", func(t *testing.T) {
		driver, _ := testMachine(t)
		node, _ := testMachine(t)
		for _, l := range healthy {
			node.consoleLine(l)
		}
		if err := os.MkdirAll(filepath.Join(node.share, "e2e"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(node.share, "e2e", "rc"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		close(node.done) // its agent was told to stop
		watchNode(&Bed{Logf: t.Logf}, "node2", node, driver)
		if driver.r.killed != "" || node.r.killed != "" {
			t.Errorf("a healthy node stopped the fleet: driver %q, node %q", driver.r.killed, node.r.killed)
		}
	})
}

// TestStopNodesKillsEveryLeftover: after the driver stops, nodes still
// running when the grace ends are all killed, not only the first (the
// 8-guest fleet of a make check hung 21 min on its second leftover node
// after a NETDEV WATCHDOG stopped the driver); a node that powered off
// is left alone.
func TestStopNodesKillsEveryLeftover(t *testing.T) {
	var nodes []*machine
	var killed []chan struct{}
	for range 4 {
		m, k := testMachine(t)
		nodes, killed = append(nodes, m), append(killed, k)
	}
	close(nodes[1].done) // powered off by itself
	done := make(chan struct{})
	go func() { stopNodes(nodes, 10*time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard, not a timed assertion
		t.Fatal("stopNodes did not return")
	}
	for i, m := range nodes {
		select {
		case <-killed[i]:
			if i == 1 {
				t.Errorf("node %d powered off, yet was killed (%q)", i+2, m.r.killed)
			}
		default:
			if i != 1 {
				t.Errorf("node %d still running after the grace, not killed", i+2)
			}
		}
	}
	if want := "still running 10ms after the driver stopped"; nodes[3].r.killed != want {
		t.Errorf("killed for %q, want %q", nodes[3].r.killed, want)
	}
}
