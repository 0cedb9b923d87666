//go:build e2eguest

package guest

import (
	"encoding/json"
	"github.com/grdma/grdma/e2e/layout"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cmReport is `grdma -j probe … cm`: the probe's JSON and its "cm" object.
type cmReport struct {
	probeReport
	CM *struct {
		Src, Dst    string
		Ifname      string `json:"ifname"`
		Port        int    `json:"port"`
		GIDIndex    int    `json:"gid_index"`
		GID         string `json:"gid"`
		RoCE        string `json:"roce"`
		PathMTU     int    `json:"path_mtu"`
		ToS         int    `json:"tos"`
		HopLimit    int    `json:"hop_limit"`
		ControlPort int    `json:"control_port"`
		Steps       []struct {
			Name string  `json:"name"`
			Usec float64 `json:"usec"`
		} `json:"steps"`
	} `json:"cm"`
}

func parseCMReport(t *testing.T, side string, r result) cmReport {
	t.Helper()
	var rep cmReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%s: probe JSON: %v\n%s", side, err, r)
	}
	return rep
}

const cmProbePort = 18515

// TestFleetProbeCM: grdma's probe over the RDMA CM across two guests, the
// client's device left for the CM to choose: connect, traffic, bw and
// lat against `probe listen cm` (one peer each) and against `probe DEV
// serve cm`; what the CM chose in the output (and cm set's ToS and RoCE
// mode seen there); each error with exit 1 and no CM ID left on either
// guest; bad words exit 2.
func TestFleetProbeCM(t *testing.T) {
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	clean := func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
	}

	for _, test := range [][]string{nil, {"traffic"}, {"bw", "write", "iters", "2000"}, {"bw", "send", "iters", "500"},
		{"bw", "read", "iters", "500"}, {"lat", "send", "iters", "200"}, {"lat", "write", "iters", "200"}} {
		name := "connect"
		if test != nil {
			name = strings.Join(test[:min(2, len(test))], "_")
		}
		t.Run("listen_"+name, func(t *testing.T) {
			clean(t)
			srv := n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
			cli := n1.on(t).Run(grdma(), append([]string{"-j", "probe", "peer", n2.Addr, "cm"}, test...)...)
			s := srv.Wait()
			c, sr := parseCMReport(t, "client", cli), parseCMReport(t, "server", s)
			if cli.code != 0 || s.code != 0 || !c.OK || !sr.OK {
				t.Fatalf("want both sides to pass:\nclient: %s\nserver: %s", cli, s)
			}
			if c.CM == nil || c.Ifname != f.Dev || c.CM.Ifname != f.Dev || c.CM.RoCE != "RoCE v2" || c.CM.GIDIndex != f.GIDIndex ||
				c.CM.PathMTU == 0 || c.CM.HopLimit == 0 || !strings.HasPrefix(c.CM.Dst, n2.Addr+":") || len(c.CM.Steps) < 4 {
				t.Errorf("what the CM chose: %+v (device %q; want %s, GID %d, RoCE v2)\n%s", c.CM, c.Ifname, f.Dev, f.GIDIndex, cli)
			}
			if sr.CM == nil || sr.CM.Ifname != f.Dev {
				t.Errorf("server's CM: %+v", sr.CM)
			}
			if len(test) > 0 && test[0] != "traffic" && (len(c.Results) != 1 || c.Results[0].Iters == 0) {
				t.Errorf("client results %+v", c.Results)
			}
			for _, st := range c.CM.Steps {
				t.Logf("%s %.1f µs", st.Name, st.Usec)
			}
		})
	}

	t.Run("serve", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", f.Dev, "serve", "cm")
		for _, test := range [][]string{nil, {"bw", "write", "iters", "1000"}, {"lat", "send", "iters", "100"}} {
			cli := n1.on(t).Run(grdma(), append([]string{"-j", "probe", "peer", n2.Addr, "cm"}, test...)...)
			if c := parseCMReport(t, "client", cli); cli.code != 0 || !c.OK || c.CM == nil {
				t.Errorf("%v against serve cm:\n%s", test, cli)
			}
		}
		srv.Signal(syscall.SIGTERM)
		s := srv.Wait()
		if s.code != 0 || strings.Count(s.stdout, `"result":"pass"`) != 3 {
			t.Errorf("want serve to log 3 passes and exit 0:\n%s", s)
		}
	})

	t.Run("serve_without_dev", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "serve", "cm", n2.Addr)
		cli := n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "traffic")
		srv.Signal(syscall.SIGTERM)
		s := srv.Wait()
		if cli.code != 0 || s.code != 0 || !strings.Contains(s.stderr, "probe "+f.Dev+"/1 serving") {
			t.Errorf("want serve cm ADDR to find %s and serve:\nclient: %s\nserver: %s", f.Dev, cli, s)
		}
	})

	t.Run("cm_set_visible", func(t *testing.T) {
		clean(t)
		n1.on(t).Must(grdma(), "cm", "set", f.Dev+"/1", "tos", "32")
		defer n1.on(t).Run(grdma(), "cm", "set", f.Dev+"/1", "tos", "0")
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
		cli := n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm")
		srv.Wait()
		if c := parseCMReport(t, "client", cli); cli.code != 0 || c.CM == nil || c.CM.ToS != 32 {
			t.Errorf("want ToS 32 (cm set) in the probe's output:\n%s", cli)
		}
		// tos N on the command line wins over the port's default.
		srv = n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
		cli = n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "tos", "104")
		srv.Wait()
		if c := parseCMReport(t, "client", cli); cli.code != 0 || c.CM == nil || c.CM.ToS != 104 {
			t.Errorf("want ToS 104 (tos 104):\n%s", cli)
		}
		// RoCE v1 as the port's default: rxe has RoCE v2 GIDs only, so
		// configfs refuses it, and cm set says why; the probe stays on v2.
		if r := n1.on(t).Run(grdma(), "cm", "set", f.Dev+"/1", "roce-mode", "v1"); r.code != 1 || !strings.Contains(r.stderr, "no RoCE v1 GIDs") {
			t.Errorf("want cm set roce-mode v1 refused on rxe, naming why:\n%s", r)
		}
		srv = n2.on(t).ServeCM(cmProbePort, grdma(), "-j", "probe", "listen", "cm", n2.Addr)
		cli = n1.on(t).Run(grdma(), "-j", "probe", "peer", n2.Addr, "cm")
		srv.Wait()
		if c := parseCMReport(t, "client", cli); cli.code != 0 || c.CM == nil || c.CM.RoCE != "RoCE v2" {
			t.Errorf("want RoCE v2:\n%s", cli)
		}
	})

	t.Run("rejected_nothing_listens", func(t *testing.T) {
		clean(t)
		cli := n1.on(t).Run(grdma(), "probe", "peer", n2.Addr+":18600", "cm")
		if cli.code != 1 || !strings.Contains(cli.stdout+cli.stderr, "REJECTED") || !strings.Contains(cli.stdout+cli.stderr, "FAIL at connect") {
			t.Errorf("want exit 1, REJECTED at connect:\n%s", cli)
		}
		t.Log(cli.stdout)
	})

	t.Run("refused_over_limits", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "probe", "listen", "cm", n2.Addr, "size", "4096", "timeout", "5s")
		cli := n1.on(t).Run(grdma(), "probe", "peer", n2.Addr, "cm", "bw", "size", "1048576")
		s := srv.Wait()
		if cli.code != 1 || !strings.Contains(cli.stdout, "refused") || s.code != 1 {
			t.Errorf("want the client refused (exit 1) and the listener to time out:\nclient: %s\nserver: %s", cli, s)
		}
		t.Log(cli.stdout)
	})

	t.Run("addr_error_no_rdma_device", func(t *testing.T) {
		clean(t)
		n1.on(t).Must(layout.IP, "addr", "add", "10.77.0.1/32", "dev", "lo")
		defer n1.on(t).Run(layout.IP, "addr", "del", "10.77.0.1/32", "dev", "lo")
		cli := n1.on(t).Run(grdma(), "probe", "peer", "10.77.0.1", "cm")
		if cli.code != 1 || !strings.Contains(cli.stdout, "ADDR_ERROR") || !strings.Contains(cli.stdout, "lo") {
			t.Errorf("want exit 1, ADDR_ERROR naming lo:\n%s", cli)
		}
		t.Log(cli.stdout)
	})

	t.Run("roce_dropped_timeout", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "probe", "listen", "cm", n2.Addr, "timeout", "8s")
		n2.DropRoCE(t)
		cli := n1.on(t).Run(grdma(), "probe", "peer", n2.Addr, "cm", "timeout", "3s")
		srv.Wait()
		if cli.code != 1 || !strings.Contains(cli.stdout, "RoCE v2, ToS 0") {
			t.Errorf("want exit 1 naming RoCE v2 and ToS 0:\n%s", cli)
		}
		t.Log(cli.stdout)
	})

	t.Run("interrupted", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(cmProbePort, grdma(), "probe", "listen", "cm", n2.Addr, "timeout", "8s")
		n2.DropRoCE(t)
		cli := n1.on(t).Start(grdma(), "probe", "peer", n2.Addr, "cm", "timeout", "20s")
		time.Sleep(2 * time.Second)
		cli.Signal(syscall.SIGINT)
		c := cli.Wait()
		srv.Wait()
		if c.code != 1 || !strings.Contains(c.stdout+c.stderr, "interrupt") && !strings.Contains(c.stdout+c.stderr, "canceled") {
			t.Errorf("want exit 1, interrupted:\n%s", c)
		}
		t.Log(c.stdout)
	})

	t.Run("bad_words", func(t *testing.T) {
		for _, args := range [][]string{{"peer", "node2", "cm"}, {"peer", n2.Addr, "cm", "pingpong"}, {"serve", "cm"}, {"peer", n2.Addr, "cm", "tos", "300"}} {
			if r := n1.on(t).Run(grdma(), append([]string{"probe"}, args...)...); r.code != 2 {
				t.Errorf("%v: want exit 2:\n%s", args, r)
			}
		}
	})
}
