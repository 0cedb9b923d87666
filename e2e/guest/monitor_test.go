//go:build e2eguest

package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// TestMonitor: where the kernel sends RDMA events (SYS_GET says monitor
// on: Debian's 6.12), grdma monitor prints the events of link add and
// delete; elsewhere it says why and exits 2.
func TestMonitor(t *testing.T) {
	cleanRDMA(t)
	var sys struct {
		Monitor bool `json:"monitor"`
	}
	if err := json.Unmarshal([]byte(must(t, grdma(), "-j", "sys").stdout), &sys); err != nil {
		t.Fatal(err)
	}
	if !sys.Monitor {
		r := run(grdma(), "monitor")
		if r.code != 2 || !strings.Contains(r.stderr, "monitor needs Linux 6.13 or newer") {
			t.Fatalf("kernel without monitor support: want exit 2 and the reason:\n%s", r)
		}
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	mon := exec.CommandContext(ctx, grdma(), "-j", "monitor", "--count", "3")
	var out, errb bytes.Buffer
	mon.Stdout, mon.Stderr = &out, &errb
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, rdmaGroupSubscribed) {
		t.Fatalf("grdma monitor never joined the RDMA netlink group\nstderr:\n%s", errb.String())
	}
	addRxe(t, "rxe0", "veth0")
	must(t, layout.Rdma, "link", "delete", "rxe0")
	if err := mon.Wait(); err != nil {
		t.Fatalf("grdma monitor: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	want := []string{
		`{"event_type":"[REGISTER]","rdma_index":`,
		`{"event_type":"[NETDEV_ATTACH]","rdma_index":`,
		`{"event_type":"[UNREGISTER]","rdma_index":`,
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 JSON lines, got:\n%s", out.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) || !strings.Contains(l, `"rdma_dev":"rxe0"`) {
			t.Errorf("event %d: %s, want %s... rxe0", i, l, want[i])
		}
	}
}

// rdmaGroupSubscribed reports whether a NETLINK_RDMA (20) socket has
// joined a multicast group: /proc/net/netlink's Eth and Groups columns.
// Only the monitor under test subscribes, so events sent after this are
// seen.
func rdmaGroupSubscribed() bool {
	b, err := os.ReadFile("/proc/net/netlink")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 4 && f[1] == "20" && strings.Trim(f[3], "0") != "" {
			return true
		}
	}
	return false
}
