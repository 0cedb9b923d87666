package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/rdmacompat"
)

// sysfsFixture is a sysfs tree of the sysfs package's testdata: "rxe-6.1"
// and "rxe-6.12" were captured in the guest with the devices of the
// netlink recordings (rxe0 on veth0, rxe1 on veth1); "hca" is modelled
// mlx5 RoCE and InfiniBand hardware. It has no dev/, so port MTUs are
// derived.
func sysfsFixture(name string) string { return filepath.Join("..", "..", "sysfs", "testdata", name) }

// copyTree copies a captured tree, symbolic links kept, for a test to
// break.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", src, root).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return root
}

// TestPortGIDGolden pins the output of grdma port and grdma gid.
func TestPortGIDGolden(t *testing.T) {
	cases := []struct {
		fixture string // "" means the rxe capture of the kernel
		args    []string
	}{
		{"", []string{"port"}},
		{"", []string{"-d", "port"}},
		{"", []string{"-j", "port"}},
		{"", []string{"-j", "-p", "-d", "port", "show", "rxe1/1"}},
		{"", []string{"gid"}},
		{"", []string{"-j", "gid"}},
		{"", []string{"gid", "show", "rxe0/1", "type", "v2", "ipv4"}},
		{"hca", []string{"gid"}},
		{"hca", []string{"-j", "gid", "show", "mlx5_0/1", "ipv6"}},
		{"hca", []string{"gid", "show", "mlx5_0", "netdev", "ens1f0np0.100"}},
		{"hca", []string{"gid", "show", "mlx5_2"}},
	}
	for _, kv := range kernels {
		for _, c := range cases {
			fixture := c.fixture
			if fixture == "" {
				fixture = "rxe-" + kv
			} else if kv != kernels[0] {
				continue // the modelled tree is the same for every kernel
			}
			name := fixture + "_" + strings.NewReplacer("-", "", "/", "-").Replace(strings.Join(c.args, "_"))
			t.Run(name, func(t *testing.T) {
				args := append([]string{"--sysfs-root", sysfsFixture(fixture)}, c.args...)
				got, stderr, code := runGrdma(t, standardKernel(kv), args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				checkGolden(t, name, got)
			})
		}
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", "golden", name+".txt") // not .out: .gitignore drops those
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output changed:\n%s", rdmacompat.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")))
	}
}

// TestPortJSONKeys checks the keys scripts rely on (issue 4), with the
// values of the rxe capture: the MTU derived from veth0's 1500 bytes is
// what ibv_devinfo showed (1024), the max MTU 4096.
func TestPortJSONKeys(t *testing.T) {
	out, stderr, code := runGrdma(t, standardKernel("6.12"), "--sysfs-root", sysfsFixture("rxe-6.12"), "-j", "port", "show", "rxe0/1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var ports []map[string]any
	if err := json.Unmarshal([]byte(out), &ports); err != nil || len(ports) != 1 {
		t.Fatalf("%q: %v", out, err)
	}
	want := map[string]any{
		"ifname": "rxe0", "port": 1.0, "state": "ACTIVE", "physical_state": "LINK_UP", "link_layer": "Ethernet",
		"width": "1X", "speed": "FDR10", "rate_gbps": 10.0, "active_mtu": 1024.0, "max_mtu": 4096.0,
		"mtu_source": "derived", "netdev": "veth0", "netdev_mtu": 1500.0, "lid": 0.0, "sm_lid": 0.0,
	}
	for key, w := range want {
		if got, ok := ports[0][key]; !ok || got != w {
			t.Errorf("%q = %v (present %v), want %v", key, got, ok, w)
		}
	}
}

func TestGIDQuiet(t *testing.T) {
	cases := []struct {
		fixture string
		args    string
		want    string
	}{
		{"rxe-6.12", "gid show rxe0/1 type v2 ipv4 -q", "1\n"},
		{"rxe-6.12", "gid show rxe0/1 type v2 ipv6 -q", "2\n"},           // fd00:9::1 before link-local 0
		{"rxe-6.12", "gid show -q type v2 ipv4", "rxe0/1 1\nrxe1/1 1\n"}, // several ports: DEV/PORT INDEX
		{"rxe-6.12", "gid show rxe0 -q type v2 ipv4", "1\n"},             // one port: the bare index
		{"rxe-6.12", "gid show rxe1 ipv6 -q", "0\n"},                     // only link-local there
		{"hca", "gid show mlx5_0/1 type v2 ipv4 netdev ens1f0np0.100 -q", "11\n"},
		{"hca", "gid show mlx5_0/1 type v1 ipv4 -q", "2\n"},
		{"hca", "gid show mlx5_2/1 ty ib -q", "0\n"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			args := append([]string{"--sysfs-root", sysfsFixture(c.fixture)}, strings.Fields(c.args)...)
			got, stderr, code := runGrdma(t, standardKernel("6.12"), args...)
			if code != 0 || got != c.want {
				t.Errorf("exit %d, output %q (stderr %q); want %q", code, got, stderr, c.want)
			}
		})
	}
}

func TestPortGIDErrors(t *testing.T) {
	cases := []struct {
		fixture, args string
		code          int
		stderr        string
	}{
		{"rxe-6.12", "gid show rxe0/1 type v1 -q", exitFailed,
			"rxe0/1: no RoCE v1 GID; the table has: 0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0, 1 ::ffff:10.9.0.1 RoCE v2 veth0, 2 fd00:9::1 RoCE v2 veth0"},
		// Among several ports, the one without a match is named and the
		// exit status is 1; the others are still printed.
		{"rxe-6.12", "gid show -q netdev veth0", exitFailed, "rxe1/1: no GID on netdev veth0; the table has: 0 fe80::"},
		{"rxe-6.12", "gid show rxe0 type v3", exitUsage, `unknown GID type "v3": want ib, v1 or v2`},
		{"rxe-6.12", "gid show rxe0 vlan 5", exitUsage, `unknown gid show parameter "vlan"`},
		{"rxe-6.12", "gid show rxe0 netdev", exitUsage, "missing netdev name"},
		{"rxe-6.12", "gid show rxe9", exitFailed, "RDMA device rxe9 not found"},
		{"rxe-6.12", "gid show rxe0/2", exitFailed, "RDMA device rxe0 has no port 2"},
		{"rxe-6.12", "port show rxe9", exitFailed, "RDMA device rxe9 not found"},
		{"rxe-6.12", "port show rxe0/2", exitFailed, "RDMA device rxe0 has no port 2"},
		{"rxe-6.12", "port show rxe0/x", exitUsage, `invalid port "x"`},
		{"hca", "gid show mlx5_3", exitFailed, "RDMA device mlx5_3 not found"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			args := append([]string{"--sysfs-root", sysfsFixture(c.fixture)}, strings.Fields(c.args)...)
			out, stderr, code := runGrdma(t, standardKernel("6.12"), args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, stderr, out, c.code, c.stderr)
			}
		})
	}
}
