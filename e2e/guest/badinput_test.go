//go:build e2eguest

package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// badInput is one invalid invocation: its exit status (2 for a wrong
// command line, 1 for a failed operation) and what stderr must say.
type badInput struct {
	name   string
	args   []string
	exit   int
	stderr string
	setup  func(t *testing.T) // what the input needs beyond rxe0 on veth0
	skip   string             // why the case cannot run in the guest
}

// longName is one byte over the kernel's limit (IB_DEVICE_NAME_MAX, 64
// with the NUL).
var longName = strings.Repeat("r", 64)

func badNames(verb ...string) []badInput {
	named := func(name string) []string { return append(append([]string{}, verb...), name) }
	tail := []string{}
	if verb[0] == "link" {
		tail = []string{"type", "rxe", "netdev", "veth1"}
	}
	with := func(name string) []string { return append(named(name), tail...) }
	what := strings.Join(verb, "_")
	return []badInput{
		{name: what + "_empty", args: with(""), exit: 2, stderr: "RDMA device name is empty"},
		{name: what + "_64_bytes", args: with(longName), exit: 2, stderr: "is 64 bytes; the limit is 63"},
		{name: what + "_slash", args: with("rx/e1"), exit: 2, stderr: "contains '/'"},
		{name: what + "_space", args: with("rx e1"), exit: 2, stderr: "printable ASCII without spaces"},
		{name: what + "_non_ascii", args: with("rxé1"), exit: 2, stderr: "printable ASCII without spaces"},
		{name: what + "_percent", args: with("rxe%d"), exit: 2, stderr: "name templates"},
	}
}

var badInputs = append(append(badNames("link", "add"), badNames("dev", "set", "rxe0", "name")...), []badInput{
	// link add
	{name: "unknown_type", args: []string{"link", "add", "rxe1", "type", "foo", "netdev", "veth1"}, exit: 1, stderr: "link type foo is not available"},
	{name: "missing_type", args: []string{"link", "add", "rxe1", "netdev", "veth1"}, exit: 2, stderr: "needs type TYPE and netdev NETDEV"},
	{name: "missing_netdev", args: []string{"link", "add", "rxe1", "type", "rxe"}, exit: 2, stderr: "needs type TYPE and netdev NETDEV"},
	{name: "netdev_value_missing", args: []string{"link", "add", "rxe1", "type", "rxe", "netdev"}, exit: 2, stderr: "missing netdev value"},
	{name: "netdev_not_found", args: []string{"link", "add", "rxe1", "type", "rxe", "netdev", "eth9"}, exit: 1, stderr: "netdev eth9 not found"},
	{name: "netdev_name_too_long", args: []string{"link", "add", "rxe1", "type", "rxe", "netdev", "veth0123456789abc"}, exit: 2, stderr: "the limit is 15"},
	{name: "netdev_has_rxe", args: []string{"link", "add", "rxe1", "type", "rxe", "netdev", "veth0"}, exit: 1, stderr: "netdev veth0 already has an rxe device"},
	{name: "name_taken", args: []string{"link", "add", "rxe0", "type", "rxe", "netdev", "veth1"}, exit: 1, stderr: "an RDMA device named rxe0 already exists"},
	{name: "vlan_netdev", args: []string{"link", "add", "rxe1", "type", "rxe", "netdev", "veth1.10"}, exit: 1,
		stderr: "rxe refuses netdev veth1.10: it must be a real device, not a VLAN", setup: vlanOnVeth1},
	{name: "unknown_keyword", args: []string{"link", "add", "rxe1", "typo", "rxe", "netdev", "veth1"}, exit: 2, stderr: `unknown link add parameter "typo"`},
	// link delete
	{name: "delete_unknown", args: []string{"link", "delete", "nosuch"}, exit: 1, stderr: "RDMA device nosuch not found (devices: rxe0)"},
	{name: "delete_no_name", args: []string{"link", "delete"}, exit: 2, stderr: "missing device name"},
	{name: "delete_not_a_soft_link", skip: "the guest's only RDMA devices are rxe, which are soft links: no hardware device to refuse (nldev TestDeleteHardwareDevice checks the message on the kernel's EINVAL)"},
	// dev set
	{name: "rename_unknown", args: []string{"dev", "set", "nosuch", "name", "rxe7"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "rename_to_taken", args: []string{"dev", "set", "rxe0", "name", "rxe1"}, exit: 1, stderr: "an RDMA device named rxe1 already exists", setup: rxe1OnVeth1},
	{name: "unknown_attribute", args: []string{"dev", "set", "rxe0", "colour", "blue"}, exit: 2, stderr: `unknown attribute "colour"`},
	{name: "moderation_not_on_off", args: []string{"dev", "set", "rxe0", "adaptive-moderation", "maybe"}, exit: 2, stderr: `must be on or off, not "maybe"`},
	{name: "netns_unknown", args: []string{"dev", "set", "rxe0", "netns", "nosuchns"}, exit: 1, stderr: "network namespace nosuchns not found"},
	// DEV/PORT
	{name: "show_unknown_dev", args: []string{"dev", "show", "nosuch"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "link_unknown_dev", args: []string{"link", "show", "nosuch/1"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "link_unknown_port", args: []string{"link", "show", "rxe0/2"}, exit: 1, stderr: "RDMA device rxe0 has no port 2"},
	{name: "link_port_0", args: []string{"link", "show", "rxe0/0"}, exit: 2, stderr: "ports are numbered from 1"},
	{name: "link_port_not_a_number", args: []string{"link", "show", "rxe0/x"}, exit: 2, stderr: `invalid port "x"`},
	{name: "link_port_negative", args: []string{"link", "show", "rxe0/-1"}, exit: 2, stderr: `invalid port "-1"`},
	{name: "link_port_too_big", args: []string{"link", "show", "rxe0/4294967296"}, exit: 2, stderr: `invalid port "4294967296"`},
	{name: "link_no_dev", args: []string{"link", "show", "/1"}, exit: 2, stderr: "missing device name"},
	{name: "port_unknown_dev", args: []string{"port", "show", "nosuch"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "port_unknown_port", args: []string{"port", "show", "rxe0/3"}, exit: 1, stderr: "RDMA device rxe0 has no port 3"},
	{name: "port_port_0", args: []string{"port", "show", "rxe0/0"}, exit: 2, stderr: "ports are numbered from 1"},
	{name: "gid_unknown_dev", args: []string{"gid", "show", "nosuch"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "gid_unknown_port", args: []string{"gid", "show", "rxe0/9"}, exit: 1, stderr: "RDMA device rxe0 has no port 9"},
	{name: "gid_port_0", args: []string{"gid", "show", "rxe0/0"}, exit: 2, stderr: "ports are numbered from 1"},
	{name: "stat_unknown_dev", args: []string{"stat", "show", "link", "nosuch/1"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "stat_unknown_port", args: []string{"stat", "show", "link", "rxe0/2"}, exit: 1, stderr: "RDMA device rxe0 has no port 2"},
	{name: "stat_port_0", args: []string{"stat", "show", "link", "rxe0/0"}, exit: 2, stderr: "ports are numbered from 1"},
	// gid filters
	{name: "gid_unknown_type", args: []string{"gid", "show", "type", "v3"}, exit: 2, stderr: `unknown GID type "v3"`},
	{name: "gid_type_missing", args: []string{"gid", "show", "type"}, exit: 2, stderr: "missing type value"},
	{name: "gid_netdev_missing", args: []string{"gid", "show", "rxe0", "netdev"}, exit: 2, stderr: "missing netdev name"},
	{name: "gid_unknown_filter", args: []string{"gid", "show", "rxe0", "vlan", "10"}, exit: 2, stderr: `unknown gid show parameter "vlan"`},
	// stat options
	{name: "stat_interval_garbage", args: []string{"stat", "show", "-i", "soon"}, exit: 2, stderr: "invalid argument \"soon\""},
	{name: "stat_count_without_show", args: []string{"stat", "mode", "-c", "3"}, exit: 2, stderr: "go with stat show"},
	{name: "stat_count_negative", args: []string{"stat", "show", "-i", "1s", "-c", "-3"}, exit: 2, stderr: "-c must be a number of samples from 1, not -3"},
	{name: "stat_interval_zero", args: []string{"stat", "show", "-i", "0s"}, exit: 2, stderr: "-i must be a positive interval such as 1s, not 0s"},
	{name: "monitor_count_negative", args: []string{"monitor", "--count", "-1"}, exit: 2, stderr: "--count must be a number of events from 1, not -1"},
	{name: "check_min_rate_nan", args: []string{"check", "ports", "min-rate", "NaN"}, exit: 2, stderr: `min-rate must be a positive number of Gb/s, not "NaN"`},
	{name: "check_min_rate_inf", args: []string{"check", "ports", "min-rate", "Inf"}, exit: 2, stderr: `min-rate must be a positive number of Gb/s, not "Inf"`},
	// whole command line
	{name: "unknown_object", args: []string{"frobnicate"}, exit: 2, stderr: `unknown object "frobnicate"`},
	{name: "unknown_flag", args: []string{"--frobnicate", "dev"}, exit: 2, stderr: "unknown flag: --frobnicate"},
	{name: "unknown_command", args: []string{"dev", "explode"}, exit: 2, stderr: `unknown command "explode"`},
	{name: "extra_argument", args: []string{"dev", "show", "rxe0", "extra"}, exit: 2, stderr: `unexpected argument "extra"`},
	{name: "batch_missing_file", args: []string{"-b", "/nonexistent/batch"}, exit: 1, stderr: "/nonexistent/batch"},
}...)

// resBadInputs are the malformed res filters and ranges; they run only
// with a grdma that has res.
var resBadInputs = []badInput{
	{name: "res_range_backwards", args: []string{"res", "show", "qp", "lqpn", "5-3"}, exit: 2, stderr: `range "5-3" runs backwards`},
	{name: "res_range_open", args: []string{"res", "show", "qp", "lqpn", "1-"}, exit: 2, stderr: `"" is not a number`},
	{name: "res_not_a_number", args: []string{"res", "show", "qp", "lqpn", "abc"}, exit: 2, stderr: `"abc" is not a number`},
	{name: "res_number_too_big", args: []string{"res", "show", "qp", "lqpn", "18446744073709551616"}, exit: 2, stderr: "does not fit in 64 bits"},
	{name: "res_no_number", args: []string{"res", "show", "qp", "lqpn", ","}, exit: 2, stderr: "holds no number"},
	{name: "res_filter_value_missing", args: []string{"res", "show", "qp", "lqpn"}, exit: 2, stderr: "missing"},
	{name: "res_unknown_filter", args: []string{"res", "show", "qp", "colour", "red"}, exit: 2, stderr: `"colour"`},
	{name: "res_unknown_object", args: []string{"res", "show", "widget"}, exit: 2, stderr: `"widget"`},
	{name: "res_unknown_dev", args: []string{"res", "show", "qp", "link", "nosuch/1"}, exit: 1, stderr: "RDMA device nosuch not found"},
	{name: "res_unknown_port", args: []string{"res", "show", "qp", "link", "rxe0/2"}, exit: 1, stderr: "RDMA device rxe0 has no port 2"},
	{name: "res_port_0", args: []string{"res", "show", "qp", "link", "rxe0/0"}, exit: 2, stderr: "ports are numbered from 1"},
}

// TestBadInput: every kind of invalid input gets its message and exit
// status and changes nothing: the RDMA devices (rdma -j dev) and the
// netdevs (ip -j link) are the same after as before.
func TestBadInput(t *testing.T) {
	cleanRDMA(t)
	addRxe(t, "rxe0", layout.Veth0)
	cases := badInputs
	if strings.Contains(must(t, grdma(), "--help").stdout, "\n  res ") {
		cases = append(cases, resBadInputs...)
	} else {
		t.Log("this grdma has no res command: res filters are not tried")
	}
	batch := filepath.Join(t.TempDir(), "unterminated")
	if err := os.WriteFile(batch, []byte("dev show \"rxe0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, badInput{name: "batch_unterminated_quote", args: []string{"-b", batch}, exit: 1, stderr: "unterminated quote"})
	nested := filepath.Join(t.TempDir(), "nested")
	if err := os.WriteFile(nested, []byte("dev show rxe0\n-b "+nested+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		badInput{name: "batch_nested", args: []string{"-f", "-b", nested}, exit: 2, stderr: "a batch line cannot use -b"},
		badInput{name: "batch_with_command", args: []string{"-b", nested, "dev", "show"}, exit: 2, stderr: "-b " + nested + " runs the commands of the file: give no command with it"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			if c.setup != nil {
				c.setup(t)
			}
			expectUnchanged(t, func() result { return run(grdma(), c.args...) }, c.exit, c.stderr)
		})
	}
}

// expectUnchanged runs a command that must fail with exit status exit and
// a stderr holding want, and checks that the RDMA devices and the netdevs
// are as they were.
func expectUnchanged(t *testing.T, cmd func() result, exit int, want string) {
	t.Helper()
	before := deviceState(t)
	r := cmd()
	if r.code != exit {
		t.Errorf("want exit %d:\n%s", exit, r)
	}
	if !strings.Contains(r.stderr, want) || !strings.HasPrefix(r.stderr, "grdma: ") {
		t.Errorf("stderr lacks \"grdma: ...%s\":\n%s", want, r)
	}
	if after := deviceState(t); after != before {
		t.Errorf("state changed (- before, + after):\n%s", lineDiff(before, after))
	}
}

// deviceState is what a failed command must leave alone.
func deviceState(t *testing.T) string {
	t.Helper()
	return must(t, layout.Rdma, "-j", "dev").stdout + must(t, layout.IP, "-j", "link").stdout
}

// rxe1OnVeth1 makes a second device, for names already taken.
func rxe1OnVeth1(t *testing.T) {
	t.Helper()
	addRxe(t, "rxe1", layout.Veth1)
	t.Cleanup(func() { run(layout.Rdma, "link", "delete", "rxe1") })
}

// vlanOnVeth1 makes veth1.10, a VLAN on veth1, or skips the test when the
// image has no 8021q module.
func vlanOnVeth1(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(layout.ModulesDir, "8021q")); err != nil {
		t.Skip("this guest image has no 8021q module, so no VLAN netdev can be made")
	}
	loadModules(t, "8021q")
	ip(t, "link", "add", "link", layout.Veth1, "name", "veth1.10", "type", "vlan", "id", "10")
	t.Cleanup(func() { run(layout.IP, "link", "del", "veth1.10") })
	ip(t, "link", "set", "veth1.10", "up")
}
