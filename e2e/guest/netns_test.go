//go:build e2eguest

package guest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/internal/rdmacompat"
)

// testNS is the named network namespace the netns scenario makes.
const testNS = "grdma-ns"

// TestNetns shows -n/--netns NETNS against the RDMA netlink of another
// network namespace, checked against iproute2's rdma run inside it
// (ip netns exec):
//
//   - shared mode: every namespace sees every device, -n included;
//   - exclusive mode (sys set netns exclusive): the new namespace sees no
//     device, and -n says so where plain grdma lists rxe0;
//   - dev set rxe0 netns NS: Debian's 6.1 and 6.12 rxe cannot move (it has
//     no disassociate_ucontext; rdma fails the same way), so grdma must fail
//     cleanly and leave rxe0 where it was; a kernel whose rxe can move must
//     show it under -n and no longer without;
//   - link add with -n resolves the netdev inside the namespace: veth1,
//     moved there, is unknown to plain grdma and found with -n;
//
// and leaves the guest as it found it: no namespace, veth1 back, shared mode.
func TestNetns(t *testing.T) {
	cleanRDMA(t)
	netnsMode(t, "shared")
	addRxe(t, "rxe0", layout.Veth0)

	// Shared mode: the namespace sees rxe0 too.
	addNetns(t)
	if got := grdmaDevs(t, "-n", testNS); !slices.Equal(got, []string{"rxe0"}) {
		t.Errorf("shared mode: grdma -n %s dev lists %q, want rxe0", testNS, got)
	}
	compareInNetns(t, "dev")
	for _, ns := range []string{"/run/netns/" + testNS, "1"} { // a path, a PID (init's)
		if got := grdmaDevs(t, "-n", ns); !slices.Equal(got, []string{"rxe0"}) {
			t.Errorf("grdma -n %s dev lists %q, want rxe0", ns, got)
		}
	}
	r := run(grdma(), "-n", "nosuch", "dev")
	if r.code != 1 || !strings.Contains(r.stderr, "network namespace nosuch not found") {
		t.Errorf("-n nosuch: want exit 1 and \"network namespace nosuch not found\":\n%s", r)
	}

	// The mode can only change while no other namespace exists.
	r = run(grdma(), "sys", "set", "netns", "exclusive")
	if r.code != 1 || !strings.Contains(r.stderr, "other network namespaces exist") {
		t.Errorf("sys set netns exclusive beside %s: want exit 1 and the reason:\n%s", testNS, r)
	}
	delNetns(t)
	setNetnsMode(t, "exclusive")
	addNetns(t)

	// Exclusive mode: the namespace has no device; -n sees that.
	if got := grdmaDevs(t); !slices.Equal(got, []string{"rxe0"}) {
		t.Errorf("exclusive mode: grdma dev lists %q, want rxe0", got)
	}
	if got := grdmaDevs(t, "-n", testNS); len(got) != 0 {
		t.Errorf("exclusive mode: grdma -n %s dev lists %q, want nothing", testNS, got)
	}
	compareInNetns(t, "dev")
	compareInNetns(t, "link")
	if r := must(t, grdma(), "-n", testNS, "sys"); !strings.HasPrefix(r.stdout, "netns exclusive ") {
		t.Errorf("grdma -n %s sys:\n%s", testNS, r)
	}
	batchNetnsPerLine(t)
	// -n reaches netlink only: commands that read /sys or /dev refuse it
	// (they used to show the initial namespace's rxe0 under -n).
	for _, cmd := range [][]string{{"port"}, {"gid"}, {"probe", "rxe0"}, {"check", "ports"}} {
		r := run(grdma(), append([]string{"-n", testNS}, cmd...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "-n "+testNS+" reaches RDMA netlink only, and "+cmd[0]+" also reads /sys and /dev") {
			t.Errorf("grdma -n %s %s: want exit 2 and the reason:\n%s", testNS, strings.Join(cmd, " "), r)
		}
	}

	// Moving rxe0 into the namespace.
	r = run(grdma(), "dev", "set", "rxe0", "netns", testNS)
	if r.code == 0 {
		t.Logf("this kernel's rxe moves between namespaces")
		t.Cleanup(func() { run(grdma(), "-n", testNS, "dev", "set", "rxe0", "netns", "1") })
		if got := grdmaDevs(t, "-n", testNS); !slices.Equal(got, []string{"rxe0"}) {
			t.Errorf("after dev set rxe0 netns %s: grdma -n %s dev lists %q, want rxe0", testNS, testNS, got)
		}
		if got := grdmaDevs(t); len(got) != 0 {
			t.Errorf("after dev set rxe0 netns %s: grdma dev lists %q, want nothing", testNS, got)
		}
		compareInNetns(t, "dev")
		must(t, grdma(), "-n", testNS, "dev", "set", "rxe0", "netns", "1")
	} else {
		rd := run(layout.Rdma, "dev", "set", "rxe0", "netns", testNS)
		if r.code != 1 || !strings.Contains(r.stderr, "cannot move devices between network namespaces") || rd.code == 0 {
			t.Errorf("dev set rxe0 netns %s: want exit 1 and why, as rdma fails:\n%s\n%s", testNS, r, rd)
		}
		t.Logf("rxe cannot move between namespaces on this kernel (rdma: %s)", strings.TrimSpace(rd.stderr))
	}
	if got := grdmaDevs(t); !slices.Equal(got, []string{"rxe0"}) {
		t.Errorf("rxe0 is not back in the initial namespace: grdma dev lists %q", got)
	}

	// link add -n: the netdev is looked up inside the namespace.
	ip(t, "link", "set", layout.Veth1, "netns", testNS)
	t.Cleanup(func() { // before the namespace goes: deleting it would destroy the veth pair
		run(layout.IP, "-n", testNS, "link", "set", layout.Veth1, "netns", "1")
		run(layout.IP, "link", "set", layout.Veth1, "up")
	})
	ip(t, "-n", testNS, "link", "set", layout.Veth1, "up")
	r = run(grdma(), "link", "add", "rxe1", "type", "rxe", "netdev", layout.Veth1)
	if r.code != 1 || !strings.Contains(r.stderr, "netdev veth1 not found") {
		t.Errorf("link add on a netdev of another namespace: want exit 1, not found:\n%s", r)
	}
	if r := run(grdma(), "-n", testNS, "link", "add", "rxe1", "type", "rxe", "netdev", layout.Veth1); r.code != 0 || r.stderr != "" {
		t.Fatalf("grdma -n %s link add rxe1 ... netdev veth1:\n%s", testNS, r)
	}
	inNS := slices.Contains(grdmaDevs(t, "-n", testNS), "rxe1")
	inInit := slices.Contains(grdmaDevs(t), "rxe1")
	if inNS == inInit {
		t.Errorf("rxe1 is in the namespace: %v, in the initial one: %v; want exactly one", inNS, inInit)
	}
	t.Logf("rxe1 made with -n lives in the %s namespace", map[bool]string{true: testNS, false: "initial"}[inNS])
	compareInNetns(t, "dev")
	where := []string{}
	if inNS {
		where = []string{"-n", testNS}
	}
	must(t, grdma(), append(where, "link", "delete", "rxe1")...)
}

// grdmaDevs lists the device names grdma -j [ARGS] dev prints.
// batchNetnsPerLine: in exclusive mode, a batch line's -n applies to that
// line only (grdma used to keep the socket of the first line's namespace
// for every line).
func batchNetnsPerLine(t *testing.T) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "batch")
	lines := "dev\n-n " + testNS + " dev\ndev\n-n " + testNS + " -j dev\n"
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r := must(t, grdma(), "-b", file)
	if n := strings.Count(r.stdout, ": rxe0: "); n != 2 || !strings.HasSuffix(r.stdout, "[]\n") {
		t.Errorf("batch %q: want rxe0 from lines 1 and 3, [] from line 4:\n%s", lines, r)
	}
	// -n on the command line is every line's namespace.
	if r := must(t, grdma(), "-n", testNS, "-b", file); strings.Contains(r.stdout, "rxe0") {
		t.Errorf("-n %s -b: a line saw rxe0 of the initial namespace:\n%s", testNS, r)
	}
}

func grdmaDevs(t *testing.T, args ...string) []string {
	t.Helper()
	r := must(t, grdma(), append([]string{"-j"}, append(args, "dev")...)...)
	var devs []struct {
		Ifname string `json:"ifname"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	names := []string{}
	for _, d := range devs {
		names = append(names, d.Ifname)
	}
	return names
}

// compareInNetns compares grdma -n NS -j ARGS with rdma -j ARGS run inside
// the namespace by ip netns exec (fields the guest's older rdma lacks are
// dropped from grdma's output first, as in compareOutputs).
func compareInNetns(t *testing.T, args ...string) {
	t.Helper()
	g := must(t, grdma(), append([]string{"-n", testNS, "-j"}, args...)...)
	r := must(t, layout.IP, append([]string{"netns", "exec", testNS, layout.Rdma, "-j"}, args...)...)
	ver, err := rdmaVersion()
	if err != nil {
		t.Fatal(err)
	}
	want, err := rdmacompat.Parse([]byte(r.stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	got, err := rdmacompat.Parse([]byte(g.stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
	if w, g := encodeJSON(want), encodeJSON(rdmacompat.NormalizeJSON(got, ver)); w != g {
		t.Errorf("grdma -n %s -j %s differs from rdma inside the namespace (- rdma, + grdma):\n%s",
			testNS, strings.Join(args, " "), lineDiff(indentJSON(w), indentJSON(g)))
	}
}

// addNetns makes testNS (ip netns add; /run/netns gets a tmpfs if it
// cannot be made on the guest's root) and removes it when the test ends.
func addNetns(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		t.Fatal(err)
	}
	if r := run(layout.IP, "netns", "add", testNS); r.code != 0 {
		t.Logf("ip netns add failed, retrying over a tmpfs:\n%s", r)
		must(t, "/bin/mount", "-t", "tmpfs", "tmpfs", "/run/netns")
		t.Cleanup(func() { run("/bin/umount", "/run/netns") })
		ip(t, "netns", "add", testNS)
	}
	t.Cleanup(func() { run(layout.IP, "netns", "del", testNS) })
}

// delNetns deletes testNS now.
func delNetns(t *testing.T) {
	t.Helper()
	ip(t, "netns", "del", testNS)
}

// netnsMode checks the RDMA netns mode and restores shared mode when the
// test ends (after the namespaces are gone: cleanups run last-in first-out).
func netnsMode(t *testing.T, want string) {
	t.Helper()
	if r := must(t, grdma(), "sys"); !strings.HasPrefix(r.stdout, "netns "+want+" ") {
		t.Fatalf("want netns %s mode at the start:\n%s", want, r)
	}
	t.Cleanup(func() { setNetnsMode(t, "shared") })
}

// setNetnsMode sets the netns mode, retrying while a deleted namespace is
// still being torn down by the kernel (EBUSY: "other network namespaces
// exist").
func setNetnsMode(t *testing.T, mode string) {
	t.Helper()
	var r result
	if !eventually(20*time.Second, func() bool {
		r = run(grdma(), "sys", "set", "netns", mode)
		return r.code == 0
	}) {
		t.Fatalf("sys set netns %s:\n%s", mode, r)
	}
	if r := must(t, layout.Rdma, "sys"); !strings.Contains(r.stdout, "netns "+mode) {
		t.Errorf("rdma sys after grdma sys set netns %s:\n%s", mode, r)
	}
}
