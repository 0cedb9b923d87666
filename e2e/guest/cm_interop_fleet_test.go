//go:build e2eguest

package guest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// interopReport is `grdma -j probe … cm rping|ucmatose`.
type interopReport struct {
	Mode   string `json:"mode"`
	Role   string `json:"role"`
	Ifname string `json:"ifname"`
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Count  int    `json:"count"`
	Size   int    `json:"size"`
	Sample string `json:"sample"`
	Steps  []struct {
		Name string  `json:"name"`
		OK   bool    `json:"ok"`
		Usec float64 `json:"usec"`
	} `json:"steps"`
	CM *struct {
		Ifname   string `json:"ifname"`
		GIDIndex int    `json:"gid_index"`
		RoCE     string `json:"roce"`
		PathMTU  int    `json:"path_mtu"`
		ToS      int    `json:"tos"`
		HopLimit int    `json:"hop_limit"`
	} `json:"cm"`
}

func parseInterop(t *testing.T, side string, r result) interopReport {
	t.Helper()
	var rep interopReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%s: JSON: %v\n%s", side, err, r)
	}
	return rep
}

// TestFleetCMInterop: grdma speaks rping's and ucmatose's protocols over
// the RDMA CM with the real tools (rdmacm-utils) across two guests, both
// directions: grdma against rping -s and ucmatose's server on node 2,
// and grdma listening on node 2 for rping -c and ucmatose -s from node 1.
// The CM chooses the device (none given). After each, no CM ID is left
// on either guest.
func TestFleetCMInterop(t *testing.T) {
	f := withFleet(t, 2)
	n2 := f.Node(2)
	clean := func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
	}
	checkCM := func(t *testing.T, side string, rep interopReport, out result) {
		t.Helper()
		if rep.CM == nil || rep.Ifname != f.Dev || rep.CM.Ifname != f.Dev || rep.CM.RoCE != "RoCE v2" ||
			rep.CM.GIDIndex != f.GIDIndex || rep.CM.PathMTU == 0 || rep.CM.HopLimit == 0 {
			t.Errorf("%s: what the CM chose: %+v on %q; want %s, GID %d, RoCE v2\n%s", side, rep.CM, rep.Ifname, f.Dev, f.GIDIndex, out)
		}
	}

	t.Run("to_rping_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(7174, layout.Rping, "-s", "-a", n2.Addr, "-S", "100", "-v")
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "rping", "count", "5", "size", "100")
		s := srv.Wait()
		rep := parseInterop(t, "grdma", cli)
		if cli.code != 0 || !rep.OK || rep.Count != 5 || rep.Role != "client" {
			t.Fatalf("grdma against rping -s:\n%s\nrping -s:\n%s", cli, s)
		}
		checkCM(t, "grdma", rep, cli)
		if !strings.Contains(s.stdout, "server ping data: rdma-ping-4: ") {
			t.Errorf("rping -s did not see ping 4:\n%s", s)
		}
	})

	t.Run("from_rping_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(7174, grdma(), "-j", "probe", "listen", "cm", "rping", n2.Addr)
		cli := run(layout.Rping, "-c", "-a", n2.Addr, "-C", "5", "-S", "200", "-v", "-V")
		s := srv.Wait()
		rep := parseInterop(t, "grdma", s)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Count != 5 || rep.Size != 200 || rep.Role != "server" {
			t.Fatalf("rping -c against grdma:\n%s\ngrdma:\n%s", cli, s)
		}
		if !strings.HasPrefix(rep.Sample, "rdma-ping-0: ") || strings.Count(cli.stdout, "ping data: rdma-ping-") != 5 {
			t.Errorf("sample %q; rping -c -v printed:\n%s", rep.Sample, cli.stdout)
		}
		checkCM(t, "grdma listen", rep, s)
	})

	t.Run("to_ucmatose_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(7471, layout.Ucmatose, "-b", n2.Addr, "-C", "10", "-S", "300")
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "ucmatose", "count", "10", "size", "300", "tos", "32")
		s := srv.Wait()
		rep := parseInterop(t, "grdma", cli)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Count != 10 {
			t.Fatalf("grdma against ucmatose:\n%s\nucmatose:\n%s", cli, s)
		}
		checkCM(t, "grdma", rep, cli)
		if rep.CM != nil && rep.CM.ToS != 32 {
			t.Errorf("ToS %d, want 32 (tos 32)", rep.CM.ToS)
		}
	})

	t.Run("from_ucmatose_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(7471, grdma(), "-j", "probe", "listen", "cm", "ucmatose", n2.Addr, "count", "10", "size", "300")
		cli := run(layout.Ucmatose, "-s", n2.Addr, "-C", "10", "-S", "300")
		s := srv.Wait()
		rep := parseInterop(t, "grdma", s)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Count != 10 || rep.Role != "server" {
			t.Fatalf("ucmatose -s against grdma:\n%s\ngrdma:\n%s", cli, s)
		}
		checkCM(t, "grdma listen", rep, s)
	})

	t.Run("rejected_nothing_listens", func(t *testing.T) {
		clean(t)
		cli := run(grdma(), "probe", "peer", n2.Addr, "cm", "rping", "count", "1")
		if cli.code != 1 || !strings.Contains(cli.stdout+cli.stderr, "REJECTED") {
			t.Fatalf("want exit 1 and REJECTED:\n%s", cli)
		}
	})
}
