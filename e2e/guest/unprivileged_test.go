//go:build e2eguest

package guest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// nobody is the unprivileged user of the guest's /etc/passwd.
const nobody = 65534

// privilegedCommands change the kernel's RDMA state: each needs
// CAP_NET_ADMIN and must say so.
var privilegedCommands = [][]string{
	{"link", "add", "rxe5", "type", "rxe", "netdev", "veth1"},
	{"link", "delete", "rxe0"},
	{"dev", "set", "rxe0", "name", "rxe_x"},
	{"dev", "set", "rxe0", "adaptive-moderation", "on"},
	{"sys", "set", "netns", "exclusive"},
	{"sys", "set", "privileged-qkey", "on"},
	{"stat", "unset", "link", "rxe0/1", "optional-counters"},
	{"stat", "qp", "set", "link", "rxe0/1", "auto", "type", "on"},
}

// readCommands work without privilege and print what root sees.
var readCommands = [][]string{
	{"dev"}, {"-j", "-d", "dev"}, {"link"}, {"-j", "link"}, {"sys"}, {"-j", "sys"},
	{"port"}, {"-j", "-d", "port"}, {"gid"}, {"-j", "gid"}, {"-j", "stat", "show"}, {"stat", "mode"},
}

// subtestName names a subtest after a command line; no "/", which would
// nest it.
func subtestName(args []string) string {
	return strings.ReplaceAll(strings.Join(args, "_"), "/", "_")
}

// TestUnprivileged runs grdma as nobody (uid 65534, no capabilities):
// every command that changes something fails with exit 1, names
// CAP_NET_ADMIN and changes nothing; every read works and prints what
// root's run prints.
func TestUnprivileged(t *testing.T) {
	cleanRDMA(t)
	addRxe(t, "rxe0", layout.Veth0)
	hasRes := strings.Contains(must(t, grdma(), "--help").stdout, "\n  res ")
	writes := privilegedCommands
	if hasRes {
		// The drivers' raw object dumps are privileged reads.
		writes = append(writes, []string{"res", "show", "qp", "-r"})
	}
	t.Run("Writes", func(t *testing.T) {
		for _, args := range writes {
			t.Run(subtestName(args), func(t *testing.T) {
				expectUnchanged(t, func() result { return runAs(nobody, grdma(), args...) }, 1,
					"permission denied: this needs CAP_NET_ADMIN")
			})
		}
		// nobody may not even open PID 1's namespace, which exists (it was
		// reported as "not found").
		t.Run("dev_set_rxe0_netns_1", func(t *testing.T) {
			expectUnchanged(t, func() result { return runAs(nobody, grdma(), "dev", "set", "rxe0", "netns", "1") }, 1,
				"network namespace 1: /proc/1/ns/net: permission denied: run as root")
		})
	})
	t.Run("Reads", func(t *testing.T) {
		for _, args := range readCommands {
			t.Run(subtestName(args), func(t *testing.T) {
				root := must(t, grdma(), args...)
				if r := runAs(nobody, grdma(), args...); r.code != 0 || r.stdout != root.stdout {
					t.Errorf("as nobody (- root, + nobody):\n%s%s", lineDiff(root.stdout, r.stdout), r)
				}
			})
		}
		if !hasRes {
			t.Log("this grdma has no res command: res is not read")
			return
		}
		// The kernel hides some object fields (keys) from the unprivileged,
		// so res is checked for a valid listing, not root's bytes.
		for _, args := range [][]string{{"-j", "res"}, {"-j", "res", "show", "qp"}, {"-j", "res", "show", "pd"}} {
			r := runAs(nobody, grdma(), args...)
			var records []map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &records); r.code != 0 || err != nil || len(records) == 0 {
				t.Errorf("as nobody: want a JSON listing (%v):\n%s", err, r)
			}
		}
	})
}
