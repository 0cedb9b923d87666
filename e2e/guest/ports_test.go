//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/ib"
)

// devinfoPort is one port of `ibv_devinfo -v`, the values as it prints
// them ("PORT_ACTIVE (4)", "4096 (5)", "1X (1)", "10.0 Gbps (8)").
type devinfoPort map[string]string

// devinfoGID is one "GID[  1]: ::ffff:10.9.0.1, RoCE v2" line.
type devinfoGID struct {
	index int
	gid   string
	typ   string
}

var gidLine = regexp.MustCompile(`^GID\[\s*(\d+)\]:\s+(\S+), (.+)$`)

// ibvDevinfoPort runs ibv_devinfo -v and returns port 1 of dev.
func ibvDevinfoPort(t *testing.T, dev string) (devinfoPort, []devinfoGID) {
	t.Helper()
	r := must(t, layout.IbvDevinfo, "-v", "-d", dev, "-i", "1")
	port := devinfoPort{}
	var gids []devinfoGID
	inPort := false
	for _, line := range strings.Split(r.stdout, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "port:") {
			inPort = true
			continue
		}
		if !inPort {
			continue
		}
		if m := gidLine.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			gids = append(gids, devinfoGID{i, m[2], m[3]})
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			port[k] = strings.TrimSpace(v)
		}
	}
	if port["state"] == "" {
		t.Fatalf("no port in ibv_devinfo -v output:\n%s", r)
	}
	return port, gids
}

// code is the number in parentheses ibv_devinfo prints after a value.
func code(v string) string {
	if i := strings.LastIndex(v, "("); i >= 0 {
		return strings.TrimSuffix(v[i+1:], ")")
	}
	return ""
}

// grdmaPort is what grdma -j port show prints for one port.
type grdmaPort struct {
	State         string  `json:"state"`
	PhysicalState string  `json:"physical_state"`
	LinkLayer     string  `json:"link_layer"`
	Width         string  `json:"width"`
	Speed         string  `json:"speed"`
	RateGbps      float64 `json:"rate_gbps"`
	ActiveMTU     int     `json:"active_mtu"`
	MaxMTU        int     `json:"max_mtu"`
	MTUSource     string  `json:"mtu_source"`
	Netdev        string  `json:"netdev"`
	NetdevMTU     int     `json:"netdev_mtu"`
}

// TestPortsAgreeWithIbvDevinfo: for each netdev MTU, grdma port and
// ibv_devinfo -v agree on state, physical state, active and max MTU,
// width, speed and link layer; grdma gid lists exactly the GIDs
// ibv_devinfo lists, with sysfs's netdev and the IPv4 form where mapped.
func TestPortsAgreeWithIbvDevinfo(t *testing.T) {
	cleanRDMA(t)
	ip(t, "addr", "add", rxeAddr+"/24", "dev", "veth0")
	ip(t, "addr", "add", "fd00:77::1/64", "dev", "veth0", "nodad")
	t.Cleanup(func() {
		run(layout.IP, "addr", "flush", "dev", "veth0")
		run(layout.IP, "link", "set", "veth0", "mtu", "1500")
		run(layout.IP, "link", "set", "veth1", "mtu", "1500")
	})
	addRxe(t, "rxe0", "veth0")
	ipv4GID(t, "rxe0", rxeAddr) // waits for the IPv4 GID

	active := map[int]int{} // netdev MTU -> active MTU, as both tools agree
	for _, mtu := range []int{1500, 4200, 9000} {
		t.Run(fmt.Sprintf("mtu%d", mtu), func(t *testing.T) {
			ip(t, "link", "set", "veth0", "mtu", strconv.Itoa(mtu))
			ip(t, "link", "set", "veth1", "mtu", strconv.Itoa(mtu))
			want, _ := ibvDevinfoPort(t, "rxe0")
			var got []grdmaPort
			r := must(t, grdma(), "-j", "port", "show", "rxe0/1")
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 {
				t.Fatalf("grdma -j port show rxe0/1 (%v):\n%s", err, r)
			}
			g := got[0]
			speed, _ := ib.ParseSpeed(g.Speed)
			checks := []struct {
				field, grdma, devinfo string
			}{
				{"state", "PORT_" + g.State, strings.Fields(want["state"])[0]},
				{"physical_state", g.PhysicalState, strings.Fields(want["phys_state"])[0]},
				{"active_mtu", strconv.Itoa(g.ActiveMTU), strings.Fields(want["active_mtu"])[0]},
				{"max_mtu", strconv.Itoa(g.MaxMTU), strings.Fields(want["max_mtu"])[0]},
				{"width", g.Width, strings.Fields(want["active_width"])[0]},
				{"speed code", strconv.Itoa(int(speed)), code(want["active_speed"])},
				{"link_layer", g.LinkLayer, want["link_layer"]},
			}
			for _, c := range checks {
				if c.grdma != c.devinfo {
					t.Errorf("%s: grdma %q, ibv_devinfo %q", c.field, c.grdma, c.devinfo)
				}
			}
			active[mtu] = g.ActiveMTU
			if g.MTUSource != "verbs" || g.NetdevMTU != mtu || g.Netdev != "veth0" {
				t.Errorf("mtu_source %q netdev %q netdev_mtu %d; want verbs, veth0, %d", g.MTUSource, g.Netdev, g.NetdevMTU, mtu)
			}
		})
	}

	// The netdev MTU moves the active MTU (1024 at 1500, 4096 at 9000).
	if active[1500] >= active[9000] {
		t.Errorf("active MTU did not follow the netdev MTU: %v", active)
	}
	t.Logf("active MTU by netdev MTU: %v", active)

	t.Run("GIDs", func(t *testing.T) {
		_, want := ibvDevinfoPort(t, "rxe0")
		var got []struct {
			Index  int    `json:"index"`
			GID    string `json:"gid"`
			IPv4   string `json:"ipv4"`
			Type   string `json:"type"`
			Netdev string `json:"netdev"`
		}
		r := must(t, grdma(), "-j", "gid", "show", "rxe0/1")
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		if len(got) != len(want) || len(want) < 3 {
			t.Fatalf("grdma lists %d GIDs, ibv_devinfo %d (want link-local, IPv4 and IPv6 at least):\n%s\n%v", len(got), len(want), r.stdout, want)
		}
		dir := "/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs"
		for i, w := range want {
			g := got[i]
			if g.Index != w.index || g.GID != w.gid || g.Type != w.typ {
				t.Errorf("GID %d: grdma %d %s %s, ibv_devinfo %d %s %s", i, g.Index, g.GID, g.Type, w.index, w.gid, w.typ)
			}
			ndev, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(w.index)))
			if g.Netdev != strings.TrimSpace(string(ndev)) {
				t.Errorf("GID %d netdev: grdma %q, sysfs %q", w.index, g.Netdev, strings.TrimSpace(string(ndev)))
			}
			addr := netip.MustParseAddr(w.gid)
			if wantV4 := ""; addr.Is4In6() {
				wantV4 = addr.Unmap().String()
				if g.IPv4 != wantV4 {
					t.Errorf("GID %d ipv4: grdma %q, want %q", w.index, g.IPv4, wantV4)
				}
			} else if g.IPv4 != "" {
				t.Errorf("GID %d: ipv4 %q on a GID that is not IPv4-mapped", w.index, g.IPv4)
			}
		}
		// The selector's answer is the IPv4 GID's index.
		q := must(t, grdma(), "gid", "show", "rxe0/1", "type", "v2", "ipv4", "-q")
		if strings.TrimSpace(q.stdout) != strconv.Itoa(ipv4GID(t, "rxe0", rxeAddr)) {
			t.Errorf("gid -q printed %q", q.stdout)
		}
	})
}
