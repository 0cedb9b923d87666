//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/internal/ibvdevinfo"
)

// TestDevInfo checks `grdma -j dev info` field by field against
// `ibv_devinfo -v` for every device, port and GID: one device on a netdev
// with an IPv4 and an IPv6 address at MTU 9000, a device whose netdev is
// down, and 16 devices; then the netdev state against sysfs, the
// character devices against /dev, an unknown device, and a uverbs node
// that cannot be opened (the sysfs fallback and its note).
func TestDevInfo(t *testing.T) {
	cleanRDMA(t)
	if !moduleLoaded("ib_umad") {
		t.Cleanup(func() { run("/bin/rmmod", "ib_umad") }) // a user of ib_core, which ErrorCases unloads
	}
	loadModules(t, "ib_umad", "rdma_ucm")
	vethPairs(t, 18) // rxe0 on veth0, rxe1 on veth2, rxe2..rxe15 on veth3..veth16
	ip(t, "link", "set", layout.Veth0, "mtu", "9000")
	t.Cleanup(func() { run(layout.IP, "link", "set", layout.Veth0, "mtu", "1500") })
	ip(t, "addr", "add", "10.9.0.1/24", "dev", layout.Veth0)
	ip(t, "-6", "addr", "add", "fd00:9::1/64", "dev", layout.Veth0, "nodad")
	t.Cleanup(func() {
		run(layout.IP, "addr", "del", "10.9.0.1/24", "dev", layout.Veth0)
		run(layout.IP, "-6", "addr", "del", "fd00:9::1/64", "dev", layout.Veth0)
	})
	addRxe(t, "rxe0", layout.Veth0)
	t.Run("1_device_mtu_9000", func(t *testing.T) {
		objs := compareWithIbvDevinfo(t, 1)
		if p := port1(t, objs[0]); p["active_mtu"] != 4096.0 || p["netdev_operstate"] != "up" {
			t.Errorf("rxe0/1 at netdev MTU 9000: active_mtu %v, netdev_operstate %v; want 4096, up", p["active_mtu"], p["netdev_operstate"])
		}
	})

	// rxe1 on veth2, then veth2 down: the port goes DOWN.
	addRxe(t, "rxe1", "veth2")
	ip(t, "link", "set", "veth2", "down")
	t.Cleanup(func() { run(layout.IP, "link", "set", "veth2", "up") })
	if !eventually(5e9, func() bool { return strings.Contains(run(layout.Rdma, "link", "show", "rxe1/1").stdout, "state DOWN") }) {
		t.Fatalf("rxe1/1 did not go down:\n%s", run(layout.Rdma, "link"))
	}
	t.Run("netdev_down", func(t *testing.T) {
		objs := compareWithIbvDevinfo(t, 2)
		if p := port1(t, objs[1]); p["state"] != "PORT_DOWN" || p["netdev"] != "veth2" || p["netdev_operstate"] != "down" {
			t.Errorf("rxe1/1 on a down veth2: state %v netdev %v operstate %v", p["state"], p["netdev"], p["netdev_operstate"])
		}
	})
	ip(t, "link", "set", "veth2", "up")

	for i := 2; i < 16; i++ {
		addRxe(t, fmt.Sprintf("rxe%d", i), fmt.Sprintf("veth%d", i+1))
	}
	t.Run("16_devices", func(t *testing.T) {
		objs := compareWithIbvDevinfo(t, 16)
		for _, o := range objs {
			checkExtras(t, o)
		}
	})

	t.Run("unknown_device", func(t *testing.T) {
		r := run(grdma(), "dev", "info", "nosuch")
		if r.code != 1 || !strings.HasPrefix(r.stderr, "grdma: RDMA device nosuch not found (devices: ") || r.stdout != "" {
			t.Errorf("want exit 1 and the not-found message:\n%s", r)
		}
	})

	t.Run("uverbs_not_openable", func(t *testing.T) {
		node := "/dev/infiniband/uverbs0"
		st, err := os.Stat(node)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(node, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(node, st.Mode().Perm()) })
		r := runAs(nobody, grdma(), "-j", "dev", "info", "rxe0")
		if r.code != 0 {
			t.Fatalf("unprivileged dev info failed:\n%s", r)
		}
		var objs []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &objs); err != nil || len(objs) != 1 {
			t.Fatalf("output %v:\n%s", err, r)
		}
		d := objs[0]
		if d["source"] != "sysfs" || d["note"] != "open "+node+": permission denied" {
			t.Errorf("source %v note %v; want sysfs and the permission error", d["source"], d["note"])
		}
		// What sysfs gives agrees with ibv_devinfo (run as root).
		ibv := ibvDevinfo(t)
		for _, diff := range ibvdevinfo.CompareJSON(ibv[0], d) {
			// ibv_devinfo shows more than sysfs has; sysfs's must agree.
			if !strings.Contains(diff, "grdma has no such field") {
				t.Error(diff)
			}
		}
		text := runAs(nobody, grdma(), "dev", "info", "rxe0")
		if text.code != 0 || !strings.Contains(text.stdout, "source sysfs\n    note: open "+node+": permission denied") {
			t.Errorf("text output does not say where it comes from:\n%s", text)
		}
	})
}

// ibvDevinfo runs ibv_devinfo -v and parses it.
func ibvDevinfo(t *testing.T) []ibvdevinfo.Device {
	t.Helper()
	devs, err := ibvdevinfo.Parse(must(t, layout.IbvDevinfo, "-v").stdout)
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

// compareWithIbvDevinfo compares `grdma -j dev info` with `ibv_devinfo -v`
// for all n devices and returns grdma's objects.
func compareWithIbvDevinfo(t *testing.T, n int) []map[string]any {
	t.Helper()
	r := must(t, grdma(), "-j", "dev", "info")
	var objs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &objs); err != nil {
		t.Fatalf("grdma -j dev info: %v\n%s", err, r.stdout)
	}
	ibv := ibvDevinfo(t)
	if len(objs) != n || len(ibv) != n {
		t.Fatalf("grdma lists %d devices, ibv_devinfo %d; want %d", len(objs), len(ibv), n)
	}
	// ibv_devinfo lists devices in its own order: match by name.
	byName := map[string]ibvdevinfo.Device{}
	for _, d := range ibv {
		byName[d.Name] = d
	}
	compared := 0
	for _, o := range objs {
		name, _ := o["hca_id"].(string)
		if o["source"] != "verbs" {
			t.Errorf("%s: source %v, want verbs (as root)", name, o["source"])
		}
		for _, diff := range ibvdevinfo.CompareJSON(byName[name], o) {
			t.Error(diff)
		}
		compared += len(byName[name].Values)
		for _, p := range byName[name].Ports {
			compared += len(p.Values) + len(p.GIDs)
		}
	}
	t.Logf("%d devices, %d values of ibv_devinfo compared", n, compared)
	return objs
}

func port1(t *testing.T, dev map[string]any) map[string]any {
	t.Helper()
	ports, _ := dev["ports"].([]any)
	if len(ports) == 0 {
		t.Fatalf("%v has no ports", dev["hca_id"])
	}
	p, _ := ports[0].(map[string]any)
	return p
}

// checkExtras checks what ibv_devinfo does not show: the driver, no parent
// for rxe, the character devices against /dev/infiniband and
// /sys/class/infiniband_verbs, each port's netdev and its operstate
// against sysfs.
func checkExtras(t *testing.T, dev map[string]any) {
	name := dev["hca_id"]
	if dev["driver"] != "rxe" || dev["parent"] != nil || dev["rdma_cm"] != "/dev/infiniband/rdma_cm" {
		t.Errorf("%s: driver %v parent %v rdma_cm %v", name, dev["driver"], dev["parent"], dev["rdma_cm"])
	}
	uv, _ := dev["uverbs"].(string)
	ibdev, err := os.ReadFile("/sys/class/infiniband_verbs/" + strings.TrimPrefix(uv, "/dev/infiniband/") + "/ibdev")
	if err != nil || strings.TrimSpace(string(ibdev)) != name {
		t.Errorf("%s: uverbs %s serves %q (%v)", name, uv, ibdev, err)
	}
	p := port1(t, dev)
	netdev, _ := p["netdev"].(string)
	state, err := os.ReadFile("/sys/class/net/" + netdev + "/operstate")
	if err != nil || p["netdev_operstate"] != strings.TrimSpace(string(state)) {
		t.Errorf("%s: netdev %s operstate %v, sysfs %q (%v)", name, netdev, p["netdev_operstate"], state, err)
	}
	umad, _ := p["umad"].(string)
	if _, err := os.Stat(umad); err != nil || p["issm"] != nil {
		t.Errorf("%s/1: umad %q (%v), issm %v (none on RoCE)", name, umad, err, p["issm"])
	}
}
