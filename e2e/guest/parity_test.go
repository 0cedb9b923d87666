//go:build e2eguest

package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// TestParityGIDWatch: grdma gid watch prints a JSON line when the RoCE v2
// IPv4 GID of rxe0 goes (its address removed from veth0) and when it
// comes back, at the index gid show -q gives.
func TestParityGIDWatch(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	idx := ipv4GID(t, "rxe0", rxeAddr)
	if got := must(t, grdma(), "gid", "show", "rxe0/1", "type", "v2", "ipv4", "-q").stdout; got != strconv.Itoa(idx)+"\n" {
		t.Fatalf("gid show -q: %q, want %d", got, idx)
	}

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	w := exec.CommandContext(ctx, grdma(), "-j", "gid", "watch", "rxe0/1", "type", "v2", "ipv4", "--count", "2")
	var out, errb bytes.Buffer
	w.Stdout, w.Stderr = &out, &errb
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { return routeGroupsSubscribed(w.Process.Pid) }) {
		t.Fatalf("grdma gid watch never subscribed to address events\nstderr:\n%s", errb.String())
	}
	time.Sleep(500 * time.Millisecond) // its first reading of the tables, most often
	oneLine := func() bool { return strings.Count(out.String(), "\n") >= 1 }
	ip(t, "addr", "del", rxeAddr+"/24", "dev", "veth0")
	swapped := false
	if !eventually(10*time.Second, oneLine) {
		// Its first reading came after the removal (nothing tells when it
		// is done; a loaded host can take longer than the pause): the
		// address coming back is then its first change, going its second.
		t.Logf("no line 10 s after the address was removed: gid watch read the tables after; adding it back, then removing it")
		ip(t, "addr", "add", rxeAddr+"/24", "dev", "veth0")
		if !eventually(20*time.Second, oneLine) {
			t.Fatalf("no line after the address was removed, nor after it came back\nstderr:\n%s", errb.String())
		}
		ip(t, "addr", "del", rxeAddr+"/24", "dev", "veth0")
		swapped = true
	} else {
		ip(t, "addr", "add", rxeAddr+"/24", "dev", "veth0")
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("grdma gid watch: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines:\n%s", out.String())
	}
	if swapped {
		ip(t, "addr", "add", rxeAddr+"/24", "dev", "veth0")
		lines[0], lines[1] = lines[1], lines[0]
	}
	var gone, back map[string]any
	if json.Unmarshal([]byte(lines[0]), &gone) != nil || json.Unmarshal([]byte(lines[1]), &back) != nil {
		t.Fatalf("not JSON:\n%s", out.String())
	}
	want := "::ffff:" + rxeAddr
	if gone["ifname"] != "rxe0" || gone["port"] != 1.0 || gone["old_index"] != float64(idx) || gone["old_gid"] != want || gone["index"] != nil {
		t.Errorf("address removed: %s", lines[0])
	}
	if back["index"] == nil || back["gid"] != want || back["old_index"] != nil {
		t.Errorf("address added back: %s", lines[1])
	}
}

// routeGroupsSubscribed reports whether process pid holds a NETLINK_ROUTE
// socket that joined the address groups (/proc/net/netlink: Pid, Groups).
func routeGroupsSubscribed(pid int) bool {
	b, err := os.ReadFile("/proc/net/netlink")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != "0" {
			continue
		}
		groups, err := strconv.ParseUint(f[3], 16, 64)
		owner, _ := strconv.Atoi(f[2])
		if err == nil && groups&0x110 == 0x110 && (owner == pid || owner > 0 && owner&0x3fffff == pid) {
			return true
		}
	}
	return false
}

// TestParityGIDQuietAndCheck: gid show -q over two ports prints DEV/PORT
// INDEX lines and names the port without a match (exit 1); check ports
// gid-index passes with that index and fails with another.
func TestParityGIDQuietAndCheck(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	addRxe(t, "rxe1", "veth1")
	idx := ipv4GID(t, "rxe0", rxeAddr)
	r := run(grdma(), "gid", "show", "type", "v2", "ipv4", "-q")
	if r.code != 1 || r.stdout != "rxe0/1 "+strconv.Itoa(idx)+"\n" || !strings.Contains(r.stderr, "rxe1/1: no RoCE v2 IPv4 GID") {
		t.Errorf("gid show -q over rxe0 and rxe1:\n%s", r)
	}
	r = run(grdma(), "check", "ports", "gid-index", strconv.Itoa(idx+1), "type", "v2", "ipv4")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL    ports  rxe0/1   GID index "+strconv.Itoa(idx)+" selected") ||
		!strings.Contains(r.stdout, "FAIL    ports  rxe1/1   GID index "+strconv.Itoa(idx+1)+" expected, but no RoCE v2 IPv4 GID") {
		t.Errorf("check gid-index %d:\n%s", idx+1, r)
	}
	// Both ports with an IPv4 address: the same index everywhere passes.
	ip(t, "addr", "add", "192.168.78.1/24", "dev", "veth1")
	t.Cleanup(func() { run(layout.IP, "addr", "del", "192.168.78.1/24", "dev", "veth1") })
	if idx1 := ipv4GID(t, "rxe1", "192.168.78.1"); idx1 != idx {
		t.Fatalf("rxe1's IPv4 GID is at %d, rxe0's at %d", idx1, idx)
	}
	if r := must(t, grdma(), "check", "ports", "gid-index", strconv.Itoa(idx), "type", "v2", "ipv4"); !strings.Contains(r.stdout, "PASS    ports  rxe0/1") ||
		!strings.Contains(r.stdout, "PASS    ports  rxe1/1") {
		t.Errorf("check gid-index %d:\n%s", idx, r)
	}
	if r := must(t, grdma(), "gid", "show", "-q", "type", "v2", "ipv4"); r.stdout != fmt.Sprintf("rxe0/1 %d\nrxe1/1 %d\n", idx, idx) {
		t.Errorf("gid show -q over both:\n%s", r)
	}
}

// TestParityKernelRefusals: the rdma 7.1 commands grdma added, against a
// kernel and driver that refuse them: the message says why, the exit
// status is 1 and nothing changed.
func TestParityKernelRefusals(t *testing.T) {
	cleanRDMA(t)
	addRxe(t, "rxe0", "veth0")
	var sub string // why dev add fails on this kernel
	if rel, _ := os.ReadFile("/proc/sys/kernel/osrelease"); strings.HasPrefix(string(rel), "6.1.") {
		sub = "this kernel has no sub-devices"
	} else {
		sub = "the driver of rxe0 cannot create sub-devices"
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"dev", "add", "smi0", "type", "smi", "parent", "rxe0"}, sub},
		{[]string{"dev", "delete", "rxe0"}, "dev delete rxe0: "},
		{[]string{"res", "show", "frmr_pools"}, "not supported by this kernel"},
		{[]string{"res", "set", "frmr_pools", "dev", "rxe0", "aging", "30"}, "not supported by this kernel"},
		{[]string{"stat", "qp", "unbind", "link", "rxe0/1", "cntn", "1"}, "no counter 1 on this port"},
	} {
		r := run(grdma(), c.args...)
		if r.code != 1 || !strings.Contains(r.stderr, c.msg) || r.stdout != "" {
			t.Errorf("want exit 1 and %q:\n%s", c.msg, r)
		}
	}
	if !inRdmaJSON(t, "rxe0") {
		t.Errorf("rxe0 is gone after dev delete was refused")
	}
	// stat mr lists rxe's MRs (without counters) as rdma does; none yet.
	if r := must(t, grdma(), "stat", "mr"); r.stdout != must(t, layout.Rdma, "stat", "mr").stdout {
		t.Errorf("stat mr differs from rdma:\n%s", r)
	}
}

// TestParityWordsAsRdma: abbreviations and help words give what Debian's
// rdma gives on the same kernel: the same output for the abbreviations,
// exit 0 for every help word.
func TestParityWordsAsRdma(t *testing.T) {
	cleanRDMA(t)
	addRxe(t, "rxe0", "veth0")
	for _, line := range []string{"s", "r", "l s rxe0/1", "dev s rxe0", "res s c", "st mo", "res show qp t gsi", "-j res show qp t gsi"} {
		if d := compareOutputs(grdma(), strings.Fields(line)...); d != "" {
			t.Error(d)
		}
	}
	// A device named like an object abbreviation: rdma looks for a device
	// first when res show has one word.
	addRxe(t, "c", "veth1")
	for _, line := range []string{"res show c", "-j res show c", "res show cq dev c"} {
		if d := compareOutputs(grdma(), strings.Fields(line)...); d != "" {
			t.Error(d)
		}
	}
	if r := must(t, grdma(), "res", "show", "c"); !strings.Contains(r.stdout, ": c: pd ") {
		t.Errorf("res show c is not device c's summary:\n%s", r)
	}
	// st is statistic show; rdma 6.1 printed it on one line.
	if g, rd := run(grdma(), "st"), run(layout.Rdma, "st"); g.code != 0 || !strings.HasPrefix(strings.ReplaceAll(g.stdout, "\n    ", ""), "link rxe0/1 sent_pkts ") ||
		!strings.HasPrefix(rd.stdout, "link rxe0/1 sent_pkts ") {
		t.Errorf("st:\ngrdma: %s\nrdma: %s", g, rd)
	}
	for _, line := range []string{"help", "dev help", "link help", "res help", "sys help", "sys set help", "stat help",
		"stat show help", "stat qp help", "stat qp show help", "stat qp mode help", "stat qp set help", "stat qp bind help",
		"stat qp unbind help", "stat mode help", "stat mode supported help", "stat set help", "stat unset help", "monitor help"} {
		if r := run(grdma(), strings.Fields(line)...); r.code != 0 || r.stdout == "" {
			t.Errorf("grdma %s: want exit 0 and a help text:\n%s", line, r)
		}
	}
}
