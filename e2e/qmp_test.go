package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNICQueues asks a real QEMU (paused before its first instruction, its
// NIC on a hub with nothing else on it) for its NIC's queues, as the bed
// does when a guest's link stalls.
func TestNICQueues(t *testing.T) {
	qemu := findTool(hostQemu)
	if qemu == "" {
		t.Skip("qemu-system-x86_64 not installed")
	}
	dir, err := os.MkdirTemp("", "e2e-qmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m := &machine{qmp: filepath.Join(dir, "qmp")}
	cmd := exec.Command(qemu, "-S", "-nodefaults", "-no-user-config", "-display", "none", "-machine", "pc", "-m", "64",
		"-netdev", "hubport,id=n0,hubid=0", "-device", "virtio-net-pci,id="+nicID+",netdev=n0",
		"-qmp", "unix:"+m.qmp+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(m.qmp); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("QEMU made no QMP socket")
		}
	}
	got := m.nicQueues()
	t.Logf("QEMU: the NIC's queues:\n%s", got)
	for _, want := range []string{"rx: QEMU took 0 (shadow avail 0), in use 0, used 0", "tx: QEMU took 0", "guest avail 0, used_event 0; QEMU's avail_event 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("nicQueues lacks %q:\n%s", want, got)
		}
	}
	if s := (&machine{}).nicQueues(); s != "(no QMP socket)" {
		t.Errorf("without a socket: %q", s)
	}
}
