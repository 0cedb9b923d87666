package e2e

import (
	"os/exec"
	"strings"
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
