//go:build e2eguest

package guest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// interopReport is `grdma -j probe … cm rping|ucmatose|perftest|fabtests`.
type interopReport struct {
	Mode   string `json:"mode"`
	Role   string `json:"role"`
	Ifname string `json:"ifname"`
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Count  int    `json:"count"`
	Size   int    `json:"size"`
	Sample string `json:"sample"`
	// Usec is the exchange's time (µs).
	Usec float64 `json:"usec"`
	// perftest's
	Test        string `json:"test"`
	Op          string `json:"op"`
	PeerVersion string `json:"peer_version"`
	Results     []struct {
		Size   int     `json:"size"`
		Iters  int     `json:"iters"`
		BWGbps float64 `json:"bw_gbps"`
		Lat    *struct {
			Median float64 `json:"median"`
			P99    float64 `json:"p99"`
		} `json:"lat_usec"`
	} `json:"results"`
	PeerReport *struct {
		Iters    int     `json:"iters"`
		BWAvgMBs float64 `json:"bw_avg_mbs"`
	} `json:"peer_report"`
	Steps []struct {
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

	// perftest -R: grdma against ib_write_bw -R and ib_send_lat -R on
	// node 2, and grdma serving their clients from node 1. FIGURE lines
	// put grdma's figures next to perftest's own (a perftest pair in the
	// same guests first).
	const bwIters, latIters = "2000", "1000"
	perftestTable := func(t *testing.T, who string, r result) []string {
		t.Helper()
		lines := strings.Split(r.stdout, "\n")
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "#bytes") && i+1 < len(lines) {
				return strings.Fields(lines[i+1])
			}
		}
		t.Errorf("%s: no #bytes result table:\n%s", who, r)
		return nil
	}
	field := func(f []string, i int) string {
		if i < len(f) {
			return f[i]
		}
		return "?"
	}
	t.Run("perftest_reference", func(t *testing.T) {
		clean(t)
		// pair runs tool's server on node 2 and its client here, and
		// returns the client's result line.
		pair := func(tool, iters string) []string {
			t.Helper()
			s, pc := perftestRetry(t, func() (result, result) {
				ps := n2.on(t).ServeCM(toolPort, tool, "-d", f.Dev, "-R", "-n", iters)
				pc := run(tool, "-d", f.Dev, "-R", "-n", iters, n2.Addr)
				return ps.Wait(), pc
			}, n2.on(t))
			if s.code != 0 || pc.code != 0 {
				// The first line says what failed: CI shows a log's first lines.
				t.Fatalf("%s -R pair: server %s; client %s\n%s\n%s", tool, brief(s), brief(pc), s, pc)
			}
			return perftestTable(t, tool, pc)
		}
		t.Logf("FIGURE perftest pair bw write 65536 × %s: ib_write_bw -R client %s MB/s", bwIters, field(pair(layout.IbWriteBw, bwIters), 3))
		t.Logf("FIGURE perftest pair lat send 2 × %s: ib_send_lat -R client t_typical %s µs", latIters, field(pair(layout.IbSendLat, latIters), 4))
		t.Logf("FIGURE perftest pair bw read 65536 × %s: ib_read_bw -R client %s MB/s", latIters, field(pair(layout.IbReadBw, latIters), 3))
	})

	t.Run("to_ib_write_bw_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, layout.IbWriteBw, "-d", f.Dev, "-R", "-n", bwIters)
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "perftest", "bw", "write", "iters", bwIters)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", cli)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Role != "client" || len(rep.Results) != 1 || rep.Results[0].Iters != 2000 ||
			rep.Results[0].Size != 65536 || rep.Results[0].BWGbps <= 0 || rep.PeerVersion == "" {
			t.Fatalf("grdma against ib_write_bw -R:\n%s\nib_write_bw -R:\n%s", cli, s)
		}
		checkCM(t, "grdma", rep, cli)
		// perftest's server prints the client's report: grdma's.
		f := perftestTable(t, "ib_write_bw -R server", s)
		if field(f, 1) != bwIters || !positive(field(f, 3)) {
			t.Errorf("ib_write_bw -R printed %q for grdma's report\n%s", f, s)
		}
		t.Logf("FIGURE grdma cm perftest bw write (client) against ib_write_bw -R: %.3f Gb/s (%.1f MB/s); ib_write_bw -R server printed %s MB/s",
			rep.Results[0].BWGbps, rep.Results[0].BWGbps*1e9/8/(1<<20), field(f, 3))
	})

	t.Run("from_ib_write_bw_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, grdma(), "-j", "probe", "listen", "cm", "perftest", "bw", "write", n2.Addr)
		cli := run(layout.IbWriteBw, "-d", f.Dev, "-R", "-n", bwIters, n2.Addr)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", s)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Role != "server" || rep.PeerReport == nil || rep.PeerReport.Iters != 2000 || len(rep.Results) != 1 {
			t.Fatalf("ib_write_bw -R against grdma:\n%s\ngrdma:\n%s", cli, s)
		}
		checkCM(t, "grdma listen", rep, s)
		f := perftestTable(t, "ib_write_bw -R client", cli)
		t.Logf("FIGURE ib_write_bw -R client against grdma listen cm perftest bw write: perftest %s MB/s; grdma reports the client's %.1f MB/s, its own view %.3f Gb/s",
			field(f, 3), rep.PeerReport.BWAvgMBs, rep.Results[0].BWGbps)
	})

	t.Run("to_ib_send_lat_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, layout.IbSendLat, "-d", f.Dev, "-R", "-n", latIters)
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "perftest", "lat", "send", "iters", latIters)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", cli)
		if cli.code != 0 || s.code != 0 || !rep.OK || len(rep.Results) != 1 || rep.Results[0].Lat == nil || rep.Results[0].Iters != 1000 || rep.Results[0].Size != 2 {
			t.Fatalf("grdma against ib_send_lat -R:\n%s\nib_send_lat -R:\n%s", cli, s)
		}
		checkCM(t, "grdma", rep, cli)
		f := perftestTable(t, "ib_send_lat -R server", s)
		t.Logf("FIGURE grdma cm perftest lat send (client) against ib_send_lat -R: median %.2f µs, p99 %.2f µs; ib_send_lat -R server t_typical %s µs",
			rep.Results[0].Lat.Median, rep.Results[0].Lat.P99, field(f, 4))
	})

	t.Run("from_ib_send_lat_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, grdma(), "-j", "probe", "listen", "cm", "perftest", "lat", "send", n2.Addr, "iters", latIters)
		cli := run(layout.IbSendLat, "-d", f.Dev, "-R", "-n", latIters, n2.Addr)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", s)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Role != "server" || len(rep.Results) != 1 || rep.Results[0].Lat == nil {
			t.Fatalf("ib_send_lat -R against grdma:\n%s\ngrdma:\n%s", cli, s)
		}
		checkCM(t, "grdma listen", rep, s)
		f := perftestTable(t, "ib_send_lat -R client", cli)
		t.Logf("FIGURE ib_send_lat -R client against grdma listen cm perftest lat send: perftest t_typical %s µs; grdma median %.2f µs, p99 %.2f µs",
			field(f, 4), rep.Results[0].Lat.Median, rep.Results[0].Lat.P99)
	})

	t.Run("to_ib_read_bw_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, layout.IbReadBw, "-d", f.Dev, "-R", "-n", latIters)
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "perftest", "bw", "read", "iters", latIters)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", cli)
		if cli.code != 0 || s.code != 0 || !rep.OK || len(rep.Results) != 1 || rep.Results[0].Iters != 1000 || rep.Results[0].BWGbps <= 0 {
			t.Fatalf("grdma against ib_read_bw -R:\n%s\nib_read_bw -R:\n%s", cli, s)
		}
		checkCM(t, "grdma", rep, cli)
		t.Logf("FIGURE grdma cm perftest bw read (client) against ib_read_bw -R: %.3f Gb/s; ib_read_bw -R server printed %s MB/s",
			rep.Results[0].BWGbps, field(perftestTable(t, "ib_read_bw -R server", s), 3))
	})

	t.Run("from_ib_read_lat_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).ServeCM(toolPort, grdma(), "-j", "probe", "listen", "cm", "perftest", "lat", "read", n2.Addr, "iters", latIters)
		cli := run(layout.IbReadLat, "-d", f.Dev, "-R", "-n", latIters, n2.Addr)
		s := srv.Wait()
		rep := parseInterop(t, "grdma", s)
		if cli.code != 0 || s.code != 0 || !rep.OK || rep.Role != "server" {
			t.Fatalf("ib_read_lat -R against grdma:\n%s\ngrdma:\n%s", cli, s)
		}
		checkCM(t, "grdma listen", rep, s)
		t.Logf("FIGURE ib_read_lat -R client against grdma listen cm perftest lat read: perftest t_typical %s µs",
			field(perftestTable(t, "ib_read_lat -R client", cli), 4))
	})

	// The other directions and operations: both sides exit 0 and grdma
	// measured (or, serving a READ client, served).
	for _, c := range []struct {
		name, tool, test, op string
		listen               bool
	}{
		{"to_ib_send_bw_server", layout.IbSendBw, "bw", "send", false},
		{"from_ib_send_bw_client", layout.IbSendBw, "bw", "send", true},
		{"from_ib_read_bw_client", layout.IbReadBw, "bw", "read", true},
		{"to_ib_write_lat_server", layout.IbWriteLat, "lat", "write", false},
		{"from_ib_write_lat_client", layout.IbWriteLat, "lat", "write", true},
		{"to_ib_read_lat_server", layout.IbReadLat, "lat", "read", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clean(t)
			var g, p result
			if c.listen {
				srv := n2.on(t).ServeCM(toolPort, grdma(), "-j", "probe", "listen", "cm", "perftest", c.test, c.op, n2.Addr, "iters", latIters)
				p = run(c.tool, "-d", f.Dev, "-R", "-n", latIters, n2.Addr)
				g = srv.Wait()
			} else {
				srv := n2.on(t).ServeCM(toolPort, c.tool, "-d", f.Dev, "-R", "-n", latIters)
				g = run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "perftest", c.test, c.op, "iters", latIters)
				p = srv.Wait()
			}
			rep := parseInterop(t, "grdma", g)
			if g.code != 0 || p.code != 0 || !rep.OK || (c.op != "read" || !c.listen) && (len(rep.Results) != 1 || rep.Results[0].Iters != 1000) {
				t.Fatalf("grdma:\n%s\n%s:\n%s", g, c.tool, p)
			}
			checkCM(t, "grdma", rep, g)
			if c.name == "from_ib_read_bw_client" { // grdma serves READs and measures nothing: the client's figure
				t.Logf("FIGURE from_ib_read_bw_client: ib_read_bw -R client against grdma printed %s MB/s", field(perftestTable(t, c.tool, p), 3))
			}
			if len(rep.Results) == 1 && c.name != "to_ib_read_lat_server" { // ib_read_lat's server prints no result
				r := rep.Results[0]
				if r.Lat != nil {
					t.Logf("FIGURE %s: grdma median %.2f µs, p99 %.2f µs; perftest (%s) t_typical %s µs", c.name, r.Lat.Median, r.Lat.P99,
						map[bool]string{true: "client", false: "server"}[c.listen], field(perftestTable(t, c.tool, p), 4))
				} else {
					t.Logf("FIGURE %s: grdma %.3f Gb/s; perftest printed %s MB/s", c.name, r.BWGbps, field(perftestTable(t, c.tool, p), 3))
				}
			}
		})
	}

	// fabtests: libfabric's fi_pingpong -e msg -p verbs (control
	// connection on TCP 47592, data over the RDMA CM). A fi_pingpong pair
	// first, then grdma against its server and serving its client; FIGURE
	// lines put grdma's time a transfer (half a round trip) next to
	// fi_pingpong's usec/xfer.
	const fiIters, fiSize = "100", "64"
	fiArgs := []string{"-e", "msg", "-p", "verbs", "-I", fiIters, "-S", fiSize}
	// fiUsec is fi_pingpong's usec/xfer: the result line after its
	// "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec" head.
	fiUsec := func(t *testing.T, who string, r result) string {
		t.Helper()
		lines := strings.Split(r.stdout, "\n")
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "bytes") && i+1 < len(lines) {
				return field(strings.Fields(lines[i+1]), 6)
			}
		}
		t.Errorf("%s: no fi_pingpong result line:\n%s", who, r)
		return "?"
	}
	perXfer := func(rep interopReport) float64 {
		if rep.Count == 0 {
			return 0
		}
		return rep.Usec / float64(rep.Count) / 2
	}
	// fiCheck: grdma (g, in role) and fi_pingpong (p) both exit 0, and
	// each counted every message of the size given.
	fiCheck := func(t *testing.T, role string, g, p result) interopReport {
		t.Helper()
		rep := parseInterop(t, "grdma", g)
		if g.code != 0 || p.code != 0 || !rep.OK || rep.Role != role || rep.Count != 100 || rep.Size != 64 || !strings.Contains(p.stdout, "=100 ") {
			t.Fatalf("grdma (%s):\n%s\nfi_pingpong:\n%s", role, g, p)
		}
		checkCM(t, "grdma "+role, rep, g)
		return rep
	}
	t.Run("fi_pingpong_reference", func(t *testing.T) {
		clean(t)
		ps := n2.on(t).Serve(fiPingpongPort, layout.FiPingpong, fiArgs...)
		pc := run(layout.FiPingpong, append(fiArgs, n2.Addr)...)
		s := ps.Wait()
		if s.code != 0 || pc.code != 0 {
			t.Fatalf("fi_pingpong pair:\n%s\n%s", s, pc)
		}
		t.Logf("FIGURE fi_pingpong pair -e msg -p verbs %s × %s: client %s usec/xfer, server %s usec/xfer", fiSize, fiIters,
			fiUsec(t, "fi_pingpong client", pc), fiUsec(t, "fi_pingpong server", s))
	})

	t.Run("to_fi_pingpong_server", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).Serve(fiPingpongPort, layout.FiPingpong, fiArgs...)
		cli := run(grdma(), "-j", "probe", "peer", n2.Addr, "cm", "fabtests", "size", fiSize, "iters", fiIters)
		s := srv.Wait()
		rep := fiCheck(t, "client", cli, s)
		t.Logf("FIGURE grdma cm fabtests (client) against fi_pingpong -e msg -p verbs: %.2f µs a transfer (round trip / 2); fi_pingpong server %s usec/xfer",
			perXfer(rep), fiUsec(t, "fi_pingpong server", s))
	})

	t.Run("from_fi_pingpong_client", func(t *testing.T) {
		clean(t)
		srv := n2.on(t).Serve(fiPingpongPort, grdma(), "-j", "probe", "listen", "cm", "fabtests", n2.Addr, "size", fiSize, "iters", fiIters)
		cli := run(layout.FiPingpong, append(fiArgs, n2.Addr)...)
		s := srv.Wait()
		rep := fiCheck(t, "server", s, cli)
		t.Logf("FIGURE fi_pingpong -e msg -p verbs client against grdma listen cm fabtests: fi_pingpong %s usec/xfer; grdma %.2f µs a transfer (round trip / 2)",
			fiUsec(t, "fi_pingpong client", cli), perXfer(rep))
	})

	t.Run("rejected_nothing_listens", func(t *testing.T) {
		clean(t)
		cli := run(grdma(), "probe", "peer", n2.Addr, "cm", "rping", "count", "1")
		if cli.code != 1 || !strings.Contains(cli.stdout+cli.stderr, "REJECTED") {
			t.Fatalf("want exit 1 and REJECTED:\n%s", cli)
		}
	})
}
