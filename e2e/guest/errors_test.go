//go:build e2eguest

package guest

import (
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// errorCase is one failing grdma invocation: its exit status, what stderr
// must say, and the state it starts from.
type errorCase struct {
	name    string
	devices [][2]string // rxe devices made first with rdma: {name, netdev}
	unload  string      // module to take out of the kernel first (with its users)
	uid     int         // run as this user; 0 = root
	args    []string
	exit    int
	stderr  []string // substrings; usage errors only need some stderr
}

var errorCases = []errorCase{
	{name: "netdev_not_found", args: []string{"link", "add", "rxe0", "type", "rxe", "netdev", "eth9"},
		exit: 1, stderr: []string{"netdev eth9 not found"}},
	{name: "duplicate_name", devices: [][2]string{{"rxe0", "veth0"}},
		args: []string{"link", "add", "rxe0", "type", "rxe", "netdev", "veth1"},
		exit: 1, stderr: []string{"an RDMA device named rxe0 already exists"}},
	{name: "netdev_has_rxe", devices: [][2]string{{"rxe0", "veth0"}},
		args: []string{"link", "add", "rxe1", "type", "rxe", "netdev", "veth0"},
		exit: 1, stderr: []string{"netdev veth0 already has an rxe device"}},
	{name: "unknown_link_type", args: []string{"link", "add", "rxe9", "type", "foo", "netdev", "veth1"},
		exit: 1, stderr: []string{"link type foo is not available"}},
	{name: "delete_unknown_device", devices: [][2]string{{"rxe0", "veth0"}},
		args: []string{"link", "delete", "nosuch"},
		exit: 1, stderr: []string{"RDMA device nosuch not found", "rxe0"}},
	{name: "missing_netdev", args: []string{"link", "add", "rxe0", "type", "rxe"}, exit: 2},
	{name: "unknown_command", args: []string{"frobnicate"}, exit: 2},
	{name: "unprivileged", uid: 65534, args: []string{"link", "add", "rxe5", "type", "rxe", "netdev", "veth1"},
		exit: 1, stderr: []string{"CAP_NET_ADMIN"}},
	{name: "rdma_rxe_not_loaded", unload: "rdma_rxe", args: []string{"link", "add", "rxe0", "type", "rxe", "netdev", "veth0"},
		exit: 1, stderr: []string{"link type rxe is not available: load rdma_rxe"}},
	{name: "ib_core_not_loaded", unload: "ib_core", args: []string{"dev"},
		exit: 1, stderr: []string{"the kernel has no RDMA netlink support; load ib_core"}},
}

// TestErrorCases: each failure gives its message and exit status, and
// leaves the kernel's RDMA state as it found it (nothing half-done).
func TestErrorCases(t *testing.T) {
	for _, c := range errorCases {
		t.Run(c.name, func(t *testing.T) {
			cleanRDMA(t)
			for _, d := range c.devices {
				addRxe(t, d[0], d[1])
			}
			if c.unload != "" {
				noAutoload(t)
				unloadModules(t, c.unload)
			}
			before := run(layout.Rdma, "-j", "dev")
			uid := -1
			if c.uid != 0 {
				uid = c.uid
			}
			r := runAs(uid, grdma(), c.args...)
			if r.code != c.exit {
				t.Errorf("want exit %d:\n%s", c.exit, r)
			}
			for _, s := range c.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r)
				}
			}
			if len(c.stderr) == 0 && strings.TrimSpace(r.stderr) == "" {
				t.Errorf("want a usage message on stderr:\n%s", r)
			}
			if after := run(layout.Rdma, "-j", "dev"); after.stdout != before.stdout || after.code != before.code {
				t.Errorf("RDMA state changed (- before, + after):\n%s", lineDiff(before.String(), after.String()))
			}
		})
	}
}
