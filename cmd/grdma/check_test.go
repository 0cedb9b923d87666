package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkOn runs grdma check against the recorded 6.12 kernel and the rxe
// sysfs captured with it.
func checkOn(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runGrdma(t, standardKernel("6.12"), append([]string{"--sysfs-root", sysfsFixture("rxe-6.12"), "check"}, args...)...)
}

func TestCheckPortsOnRxe(t *testing.T) {
	out, stderr, code := checkOn(t, "ports")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	want := "STATUS  CHECK  SUBJECT  MESSAGE\n" +
		"PASS    ports  rxe0/1   ACTIVE LINK_UP, 10 Gb/s, MTU 1024 on veth0\n" +
		"PASS    ports  rxe1/1   ACTIVE LINK_UP, 10 Gb/s, MTU 1024 on veth1\n"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

func TestCheckExpectationsFail(t *testing.T) {
	out, _, code := checkOn(t, "-j", "ports", "min-rate", "100", "netdev-mtu", "9000", "gid-type", "v2")
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Status, Subject, Message string
			Signals                        []map[string]string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if code != exitFailed || rep.OK || len(rep.Checks) != 2 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	c := rep.Checks[0]
	// rxe0 has RoCE v2 GIDs; its veth0 MTU is 1500 and rate 10 Gb/s.
	if c.Status != "FAIL" || c.Subject != "rxe0/1" || c.Message != "rate 10 Gb/s, expected at least 100; netdev veth0 MTU 1500, expected 9000" || len(c.Signals) == 0 {
		t.Fatalf("check %+v", c)
	}
}

func TestCheckAllOnRxeNode(t *testing.T) {
	// No /dev in the capture, no /proc: devices fail (no accessible
	// uverbs node), gdr only warns (nothing to decide with).
	out, _, code := checkOn(t)
	if code != exitFailed {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The probe cannot open the captured tree's missing /dev/infiniband.
	for _, line := range []string{"FAIL    devices  rxe0", "PASS    ports    rxe0/1", "FAIL    probe    rxe0/1   open:", "WARN    gdr      node"} {
		if !strings.Contains(out, line) {
			t.Errorf("no %q in\n%s", line, out)
		}
	}
}

// TestCheckUsage: a wrong word exits 2 pointing at the help (the words
// themselves: health.TestParseArgs).
func TestCheckUsage(t *testing.T) {
	for args, msg := range map[string]string{
		"ports mtu 1000": "mtu must be an IB MTU",
		"frob":           `unknown check or expectation "frob"`,
	} {
		_, stderr, code := checkOn(t, strings.Fields(args)...)
		if code != exitUsage || !strings.Contains(stderr, msg) || !strings.Contains(stderr, "Try 'grdma check --help'") {
			t.Errorf("check %s: exit %d, stderr %q; want 2 and %q", args, code, stderr, msg)
		}
	}
}

// TestCheckGIDTableUnreadable: a GID table that cannot be read fails the
// gid-type expectation with the read error; it used to be reported as
// "no RoCE v2 GID", as if the table had been read and had none.
func TestCheckGIDTableUnreadable(t *testing.T) {
	root := copyTree(t, sysfsFixture("rxe-6.12"))
	gids := filepath.Join(root, "sys/devices/virtual/infiniband/rxe0/ports/1/gids")
	os.RemoveAll(gids)
	os.WriteFile(gids, []byte("not a directory\n"), 0o644)
	out, _, code := runGrdma(t, standardKernel("6.12"), "--sysfs-root", root, "check", "ports", "gid-type", "v2")
	if code != exitFailed || !strings.Contains(out, "FAIL    ports  rxe0/1   cannot read the GID table to find a RoCE v2 GID: ") ||
		!strings.Contains(out, "not a directory") || !strings.Contains(out, "PASS    ports  rxe1/1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestCheckGIDIndex: the index gid show -q chooses must be gid-index N
// on every port (recorded rxe sysfs: index 1 holds each port's IPv4 RoCE
// v2 GID, index 0 the link-local one).
func TestCheckGIDIndex(t *testing.T) {
	out, stderr, code := checkOn(t, "ports", "gid-index", "1", "type", "v2", "ipv4")
	if code != 0 || !strings.Contains(out, "PASS    ports  rxe0/1") || !strings.Contains(out, "PASS    ports  rxe1/1") {
		t.Fatalf("gid-index 1: exit %d:\n%s%s", code, out, stderr)
	}
	out, _, code = checkOn(t, "ports", "gid-index", "3", "type", "v2", "ipv4")
	if code != exitFailed || !strings.Contains(out, "FAIL    ports  rxe0/1   GID index 1 selected (1 ::ffff:10.9.0.1 RoCE v2 veth0), expected 3") {
		t.Fatalf("gid-index 3: exit %d:\n%s", code, out)
	}
	out, _, code = checkOn(t, "-j", "ports", "gid-index", "0", "ipv6")
	// rxe0 has a global IPv6 GID (2), chosen before link-local 0; rxe1
	// has only the link-local one.
	if code != exitFailed || !strings.Contains(out, `"subject":"rxe0/1","message":"GID index 2 selected`) ||
		!strings.Contains(out, `{"name":"gid_index","value":"0"}`) {
		t.Fatalf("gid-index 0 ipv6: exit %d:\n%s", code, out)
	}
	out, _, code = checkOn(t, "ports", "gid-index", "1", "type", "v1")
	if code != exitFailed || !strings.Contains(out, "GID index 1 expected, but no RoCE v1 GID; the table has:") {
		t.Fatalf("gid-index 1 type v1: exit %d:\n%s", code, out)
	}
	for args, msg := range map[string]string{
		"ports gid-index x1":        "gid-index must be a GID table index",
		"ports type v2":             "give gid-index",
		"ports gid-index 1 type v9": `unknown GID type "v9"`,
	} {
		_, stderr, code := checkOn(t, strings.Fields(args)...)
		if code != exitUsage || !strings.Contains(stderr, msg) {
			t.Errorf("check %s: exit %d, %q; want 2 and %q", args, code, stderr, msg)
		}
	}
}
