//go:build e2eguest

package guest

// The fleet bed's own scenarios: every guest reaches every other, probes
// run concurrently between pairs, each fault helper has its effect (on
// the node or path it names only) and is gone afterwards, and the RDMA CM,
// UD and libfabric tools of the image run across two guests.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// TestFleetToolsPresent: every node of the fleet has its name, the others'
// names in /etc/hosts, the RDMA CM device, libfabric's verbs provider on
// rxe0, and the fault helpers' modules and tools.
func TestFleetToolsPresent(t *testing.T) {
	f := withFleet(t, allGuests)
	var names []string
	for _, nd := range f.Nodes() {
		names = append(names, nd.Addr+" "+nd.Name)
	}
	// One script per node, all at once: loading the modules takes seconds
	// in an emulated guest.
	script := fmt.Sprintf(`set -e
/bin/hostname
cat %s
test -c /dev/infiniband/rdma_cm
%s -p verbs -t FI_EP_MSG | grep 'domain:'
%s %s
%s -V
%s list tables`, layout.Hosts, layout.FiInfo, layout.LoadMod, strings.Join(layout.FaultModules, " "), layout.Tc, layout.Nft)
	if errs := f.each(func(nd *node) error {
		r, err := nd.exec(cmdTimeout, script)
		if err != nil {
			return err
		}
		out := strings.Join(strings.Fields(r.stdout), " ")
		if r.code != 0 || !strings.HasPrefix(out, nd.Name+" ") || !strings.Contains(out, "domain: "+f.Dev) {
			return fmt.Errorf("want its name first, rdma_cm, libfabric's verbs provider on %s and the fault tools:\n%s", f.Dev, r)
		}
		for _, want := range names {
			if !strings.Contains(out, want) {
				return fmt.Errorf("%s does not name %q:\n%s", layout.Hosts, want, r)
			}
		}
		return nil
	}); errs != "" {
		t.Error(errs)
	}
}

// TestFleetPing: every node pings every other node, all at once.
func TestFleetPing(t *testing.T) {
	f := withFleet(t, allGuests)
	var cmds []*remoteCmd
	for _, nd := range f.Nodes() {
		var script strings.Builder
		for _, other := range f.Nodes() {
			if other != nd {
				fmt.Fprintf(&script, "/bin/ping -c 2 -w 10 %[1]s >/dev/null || echo 'no reply from %[1]s'\n", other.Name)
			}
		}
		cmds = append(cmds, nd.on(t).Start(layout.Sh, "-c", script.String()))
	}
	for i, c := range cmds {
		if r := c.Wait(); r.code != 0 || r.stdout != "" {
			t.Errorf("%s:\n%s", f.Node(i+1).Name, r)
		}
	}
	t.Logf("%d nodes, %d pairs, each pinged both ways", f.Size(), f.Size()*(f.Size()-1)/2)
}

// TestFleetProbePairs: three `grdma probe ... bw write` pairs at once
// (nodes 1→2, 3→4, 5→6), each passing on both sides.
func TestFleetProbePairs(t *testing.T) {
	f := withFleet(t, 6)
	type pairRun struct {
		srv, cli *remoteCmd
		from, to *node
	}
	var runs []pairRun
	for i := 1; i <= 5; i += 2 {
		from, to := f.Node(i), f.Node(i+1)
		srv := to.on(t).Serve(probePort, grdma(), "-j", "probe", f.Dev, "listen")
		runs = append(runs, pairRun{srv: srv, from: from, to: to})
	}
	for i := range runs {
		r := &runs[i]
		r.cli = r.from.on(t).Start(grdma(), "-j", "probe", f.Dev, "peer", r.to.Addr, "bw", "write", "duration", "3s")
	}
	for _, r := range runs {
		cli, srv := r.cli.Wait(), r.srv.Wait()
		c, s := parseProbeJSON(t, "client", cli), parseProbeJSON(t, "server", srv)
		if cli.code != 0 || srv.code != 0 || !c.OK || !s.OK || len(c.Results) != 1 || c.Results[0].BWGbps <= 0 {
			t.Errorf("%s → %s: want both sides to pass:\nclient: %s\nserver: %s", r.from.Name, r.to.Name, cli, srv)
			continue
		}
		t.Logf("%s → %s: %.4f Gb/s", r.from.Name, r.to.Name, c.Results[0].BWGbps)
	}
}

// minRTT pings to from the node count times and returns the smallest
// round trip in ms, or -1 with the output when no reply came.
func minRTT(t *testing.T, from, to *node, count int, args ...string) (float64, result) {
	t.Helper()
	r := from.on(t).Run("/bin/ping", append(append([]string{"-c", strconv.Itoa(count), "-i", "0.2", "-w", "20"}, args...), to.Addr)...)
	// busybox: round-trip min/avg/max = 1.873/4.366/7.704 ms
	_, stats, ok := strings.Cut(r.stdout, "min/avg/max = ")
	if !ok {
		return -1, r
	}
	min, _, _ := strings.Cut(stats, "/")
	v, err := strconv.ParseFloat(min, 64)
	if err != nil {
		return -1, r
	}
	return v, r
}

// Faults are judged against what this bed sees without one: ping RTTs
// between idle guests are 1-25 ms, healthy probe pairs 0.04-0.2 Gb/s.
const (
	faultDelay    = "200ms"
	faultDelayMs  = 200.0
	healthyRTTMax = 100.0 // ms: far above idle RTTs, far below a planted delay
)

// rtts checks the smallest RTTs from one node to others against what a
// delay fault should show: slow ones at least faultDelayMs, fast ones
// under healthyRTTMax.
func rtts(t *testing.T, from *node, slow, fast []*node) {
	t.Helper()
	for _, to := range slow {
		if ms, r := minRTT(t, from, to, 3); ms < faultDelayMs {
			t.Errorf("%s → %s: want RTTs of at least %v ms:\n%s", from.Name, to.Name, faultDelayMs, r)
		} else {
			t.Logf("%s → %s: min RTT %.1f ms (delayed)", from.Name, to.Name, ms)
		}
	}
	for _, to := range fast {
		if ms, r := minRTT(t, from, to, 3); ms < 0 || ms >= healthyRTTMax {
			t.Errorf("%s → %s: want RTTs under %v ms:\n%s", from.Name, to.Name, healthyRTTMax, r)
		} else {
			t.Logf("%s → %s: min RTT %.1f ms", from.Name, to.Name, ms)
		}
	}
}

// noFaultLeft checks that a node's eth0 has only its default qdisc and
// no nftables table.
func noFaultLeft(t *testing.T, nd *node) {
	t.Helper()
	h := nd.on(t)
	if r := h.Must(layout.Tc, "qdisc", "show", "dev", nd.f.Netdev); strings.Contains(r.stdout, "netem") || strings.Contains(r.stdout, "prio") ||
		strings.Contains(r.stdout, "ingress") {
		t.Errorf("%s: a qdisc of the fault is left:\n%s", nd.Name, r)
	}
	if r := h.Must(layout.Nft, "list", "tables"); strings.TrimSpace(r.stdout) != "" {
		t.Errorf("%s: an nftables table of the fault is left:\n%s", nd.Name, r)
	}
}

// TestFleetFaults: each fault helper's effect shows on what it names only,
// and is gone when the subtest that planted it ends.
func TestFleetFaults(t *testing.T) {
	t.Run("Netem", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		t.Run("planted", func(t *testing.T) {
			n3.Netem(t, "delay", faultDelay)
			// Node 3's replies are late to everyone, node 2's to no one.
			rtts(t, n1, []*node{n3}, []*node{n2})
			rtts(t, n2, []*node{n3}, nil)
		})
		rtts(t, n1, nil, []*node{n2, n3})
		noFaultLeft(t, n3)
	})
	t.Run("NetemIngress", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		t.Run("planted", func(t *testing.T) {
			n3.NetemIngress(t, "delay", faultDelay)
			rtts(t, n1, []*node{n3}, []*node{n2})
		})
		rtts(t, n1, nil, []*node{n3})
		noFaultLeft(t, n3)
		if r := n3.on(t).Run(layout.IP, "link", "show", faultIfb); r.code == 0 {
			t.Errorf("%s is left:\n%s", faultIfb, r)
		}
	})
	t.Run("NetemTo", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		t.Run("planted", func(t *testing.T) {
			n1.NetemTo(t, n3, "delay", faultDelay)
			// Only node 1's packets to node 3 wait: other paths, to node 3
			// too, do not.
			rtts(t, n1, []*node{n3}, []*node{n2})
			rtts(t, n2, nil, []*node{n3})
		})
		rtts(t, n1, nil, []*node{n3})
		noFaultLeft(t, n1)
	})
	t.Run("ImpairPathRate", func(t *testing.T) {
		// A slow path as the sweep plants it: bandwidth on it is a
		// fraction of another path's from the same node.
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		bw := func(t *testing.T, to *node) float64 {
			t.Helper()
			srv := to.on(t).Serve(probePort, grdma(), "-j", "probe", f.Dev, "listen")
			cli := n1.on(t).Run(grdma(), "-j", "probe", f.Dev, "peer", to.Addr, "bw", "write", "size", "4096", "duration", "2s")
			s := srv.Wait()
			c := parseProbeJSON(t, "client", cli)
			if cli.code != 0 || s.code != 0 || len(c.Results) != 1 {
				t.Fatalf("%s → %s:\nclient: %s\nserver: %s", n1.Name, to.Name, cli, s)
			}
			return c.Results[0].BWGbps
		}
		t.Run("planted", func(t *testing.T) {
			f.ImpairPath(t, n1, n3, "rate", "4mbit")
			slow, fast := bw(t, n3), bw(t, n2)
			t.Logf("node1 → node3 (4 Mbit/s): %.4f Gb/s; node1 → node2: %.4f Gb/s", slow, fast)
			if slow > 0.008 || fast < 4*slow {
				t.Errorf("want node1 → node3 at most 0.008 Gb/s and a quarter of node1 → node2")
			}
		})
		noFaultLeft(t, n1)
		noFaultLeft(t, n3)
	})
	t.Run("DropRoCE", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		probe := func(t *testing.T, to *node) (cli, srv result) {
			t.Helper()
			s := to.on(t).Serve(probePort, grdma(), "-j", "probe", f.Dev, "listen", "timeout", "5s")
			cli = n1.on(t).Run(grdma(), "-j", "probe", f.Dev, "peer", to.Addr, "traffic", "timeout", "5s")
			return cli, s.Wait()
		}
		t.Run("planted", func(t *testing.T) {
			n3.DropRoCE(t)
			cli, srv := probe(t, n3)
			c := parseProbeJSON(t, "client", cli)
			// TCP works: the exchange over it brought the peer's QP number.
			if cli.code != 1 || c.OK || c.Peer == nil || c.Peer.QPN == 0 {
				t.Errorf("want the probe to node 3 to fail after the exchange:\nclient: %s\nserver: %s", cli, srv)
			} else {
				t.Logf("probe to node 3 failed as it should: %s", failedStep(c))
			}
			if cli, srv := probe(t, n2); cli.code != 0 || srv.code != 0 {
				t.Errorf("want the probe to node 2 to pass:\nclient: %s\nserver: %s", cli, srv)
			}
			if ms, r := minRTT(t, n1, n3, 2); ms < 0 {
				t.Errorf("ping to node 3 must still work:\n%s", r)
			}
		})
		if cli, srv := probe(t, n3); cli.code != 0 || srv.code != 0 {
			t.Errorf("want the probe to node 3 to pass again:\nclient: %s\nserver: %s", cli, srv)
		}
		noFaultLeft(t, n3)
	})
	t.Run("DropLarger", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n2, n3 := f.Node(1), f.Node(2), f.Node(3)
		// IP length: 20 header + 8 ICMP + payload.
		small, large := []string{"-s", "100"}, []string{"-s", "1400"}
		t.Run("planted", func(t *testing.T) {
			n1.DropLarger(t, n3, 1000)
			if ms, r := minRTT(t, n1, n3, 2, large...); ms >= 0 {
				t.Errorf("node1 → node3: large pings must be dropped:\n%s", r)
			}
			if ms, r := minRTT(t, n1, n3, 2, small...); ms < 0 {
				t.Errorf("node1 → node3: small pings must pass:\n%s", r)
			}
			for _, c := range [][2]*node{{n1, n2}, {n2, n3}} {
				if ms, r := minRTT(t, c[0], c[1], 2, large...); ms < 0 {
					t.Errorf("%s → %s: large pings must pass:\n%s", c[0].Name, c[1].Name, r)
				}
			}
		})
		if ms, r := minRTT(t, n1, n3, 2, large...); ms < 0 {
			t.Errorf("node1 → node3: large pings must pass again:\n%s", r)
		}
		noFaultLeft(t, n1)
	})
	t.Run("DeleteRxe", func(t *testing.T) {
		f := withFleet(t, 3)
		n1, n3 := f.Node(1), f.Node(3)
		t.Run("planted", func(t *testing.T) {
			n3.DeleteRxe(t)
			if r := n3.on(t).Must(layout.Rdma, "-j", "dev"); strings.Contains(r.stdout, f.Dev) {
				t.Errorf("%s still there:\n%s", f.Dev, r)
			}
			if r := n1.on(t).Run(grdma(), "probe", f.Dev, "peer", n3.Addr, "timeout", "3s"); r.code != 1 {
				t.Errorf("want a probe to node 3 (nothing can listen there) to fail:\n%s", r)
			}
		})
		if r := n3.on(t).Must("cat", "/sys/class/infiniband/"+f.Dev+"/ports/1/state"); !strings.Contains(r.stdout, "ACTIVE") {
			t.Errorf("%s not back:\n%s", f.Dev, r)
		}
	})
}

// failedStep names the step a probe failed at, with its error.
func failedStep(r probeReport) string {
	for _, s := range r.Steps {
		if !s.OK {
			return s.Name + ": " + s.Error
		}
	}
	return "(no failed step)"
}

// TestFleetRping: librdmacm's rping across two guests, the client finding
// the server by host name.
func TestFleetRping(t *testing.T) {
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	const rpingPort = 7174
	srv := n2.ServeCM(rpingPort, layout.Rping, "-s", "-a", n2.Addr, "-C", "3", "-v")
	cli := n1.Run(layout.Rping, "-c", "-a", n2.Name, "-C", "3", "-v", "-V")
	s := srv.Wait()
	if cli.code != 0 || s.code != 0 || strings.Count(cli.stdout, "ping data: rdma-ping-") != 3 || strings.Count(s.stdout, "ping data: rdma-ping-") != 3 {
		t.Fatalf("want 3 verified pings on both sides:\nclient: %s\nserver: %s", cli, s)
	}
}

// TestFleetPerftestCM: perftest over the RDMA CM (-R) across two guests.
func TestFleetPerftestCM(t *testing.T) {
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	args := []string{"-d", f.Dev, "-R", "-n", "100"}
	srv, cli := perftestRetry(t, func() (result, result) {
		srv := n2.ServeCM(toolPort, layout.IbWriteBw, args...)
		cli := n1.Run(layout.IbWriteBw, append(args, n2.Addr)...)
		return srv.Wait(), cli
	}, n2.peerHost)
	res := perftestFigures(t, srv, cli, 100)
	if len(res) < 5 || !positive(res[3]) || !strings.Contains(cli.stdout, "Data ex. method : rdma_cm") {
		t.Fatalf("want a positive average bandwidth, exchanged by rdma_cm:\n%s", cli)
	}
	t.Logf("%s bytes x %s: average %s MB/s", res[0], res[1], res[3])
}

// TestFleetUdPingpong: ibv_ud_pingpong (UD send/recv) across two guests.
func TestFleetUdPingpong(t *testing.T) {
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	args := []string{"-d", f.Dev, "-g", strconv.Itoa(f.GIDIndex), "-n", "100"}
	srv := n2.Serve(toolPort, layout.IbvUdPingpong, args...)
	cli := n1.Run(layout.IbvUdPingpong, append(args, n2.Addr)...)
	s := srv.Wait()
	if cli.code != 0 || s.code != 0 || !strings.Contains(cli.stdout, "100 iters in") || !strings.Contains(s.stdout, "100 iters in") {
		t.Fatalf("want 100 iterations on both sides:\nclient: %s\nserver: %s", cli, s)
	}
	t.Logf("client: %s", lastLine(cli.stdout))
}

// fiPingpongPort is fi_pingpong's out-of-band TCP port.
const fiPingpongPort = 47592

// TestFleetFiPingpong: libfabric's fi_pingpong over its verbs provider
// (MSG endpoints, connected through the RDMA CM) across two guests.
func TestFleetFiPingpong(t *testing.T) {
	f := withFleet(t, 2)
	n1, n2 := f.Node(1), f.Node(2)
	args := []string{"-e", "msg", "-p", "verbs", "-I", "2", "-S", "64"}
	srv := n2.Serve(fiPingpongPort, layout.FiPingpong, args...)
	cli := n1.Run(layout.FiPingpong, append(args, n2.Addr)...)
	s := srv.Wait()
	// bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	if cli.code != 0 || s.code != 0 || !strings.Contains(cli.stdout, "=2 ") || !strings.Contains(s.stdout, "=2 ") {
		t.Fatalf("want 2 transfers acknowledged on both sides:\nclient: %s\nserver: %s", cli, s)
	}
	t.Logf("client: %s", lastLine(cli.stdout))
}
