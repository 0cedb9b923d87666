//go:build e2eguest

package guest

// grdma's probe between two hosts (issue 13), across the two-host bed:
// grdma on both sides, grdma against ibv_rc_pingpong both ways, and every
// error an operator meets. withPeer fails a test that leaves an RC QP on
// either guest.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// probePort is where `grdma probe ... listen` waits by default.
const probePort = 18515

func parseProbeJSON(t *testing.T, side string, r result) probeReport {
	t.Helper()
	var rep probeReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%s: probe JSON: %v\n%s", side, err, r)
	}
	return rep
}

// probeAcross runs `grdma -j probe rxe0 listen` on A and `grdma -j probe
// rxe0 peer A args...` here in B, and returns both results.
func probeAcross(t *testing.T, p *pair, listenArgs []string, args ...string) (server, client result) {
	t.Helper()
	srv := p.ServeOnA(t, probePort, grdma(), append([]string{"-j", "probe", p.Dev, "listen"}, listenArgs...)...)
	client = run(grdma(), append([]string{"-j", "probe", p.Dev, "peer", p.PeerAddr}, args...)...)
	return srv.Wait(), client
}

// TestPairProbe: every test of the probe between two hosts, grdma on
// both sides: both exit 0 with ok, each names the other, and the
// figures are there.
func TestPairProbe(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"traffic"},
		{"traffic", "size", "20000"},
		{"bw", "write", "iters", "200"},
		{"bw", "send", "size", "4096", "iters", "200"},
		{"bw", "read", "iters", "200"},
		{"bw", "write", "size", "4096", "duration", "2s"},
		{"lat", "write", "iters", "100"},
		{"lat", "send", "iters", "100"},
		{"lat", "read", "iters", "100"},
	} {
		t.Run(strings.Join(append([]string{"test"}, args...), "_"), func(t *testing.T) {
			p := withPeer(t)
			srv, cli := probeAcross(t, p, nil, args...)
			s, c := parseProbeJSON(t, "server", srv), parseProbeJSON(t, "client", cli)
			if srv.code != 0 || cli.code != 0 || !s.OK || !c.OK {
				t.Fatalf("want both sides to pass:\nserver: %s\nclient: %s", srv, cli)
			}
			if c.Role != "client" || s.Role != "server" || c.Peer == nil || s.Peer == nil ||
				c.Peer.QPN != s.QPN || s.Peer.QPN != c.QPN || c.Peer.GID != "::ffff:"+p.PeerAddr || s.Peer.GID != "::ffff:"+p.LocalAddr ||
				c.PathMTU != 1024 || !strings.HasPrefix(s.Peer.Host, p.LocalAddr+":") {
				t.Errorf("each side names the other: client %+v peer %+v; server %+v peer %+v", c, c.Peer, s, s.Peer)
			}
			// What each side pinned: nothing for the control path, four
			// parts of at least 8192 bytes for traffic, two messages else.
			// (whole pages).
			wantPinned := 0
			switch {
			case len(args) == 0:
			case args[0] == "traffic":
				wantPinned = 4 * max(c.Test.Size, 8192)
			default:
				wantPinned = 2 * c.Test.Size
			}
			wantPinned = (wantPinned + 4095) / 4096 * 4096
			if c.Pinned == nil || s.Pinned == nil || *c.Pinned != wantPinned || *s.Pinned != wantPinned {
				t.Errorf("pinned_bytes: client %s, server %s, want %d", cli.stdout, srv.stdout, wantPinned)
			}
			if len(args) == 0 || args[0] == "traffic" {
				for _, step := range []string{"send", "rdma_write", "rdma_read"} {
					if len(args) > 0 && (!c.step(step).OK || !s.step(step).OK) {
						t.Errorf("step %s: client %+v, server %+v", step, c.step(step), s.step(step))
					}
				}
				return
			}
			if len(c.Results) != 1 {
				t.Fatalf("client results: %+v\n%s", c.Results, cli)
			}
			m := c.Results[0]
			switch args[0] {
			case "bw":
				if m.Test != "bw" || m.Op != args[1] || m.BWGbps <= 0 || m.MsgRate <= 0 || m.Bytes != int64(m.Iters)*int64(m.Size) {
					t.Errorf("bw result %+v", m)
				}
				if args[1] == "send" && (len(s.Results) != 1 || s.Results[0].Iters != m.Iters) {
					t.Errorf("the server counted %+v SENDs, the client sent %d", s.Results, m.Iters)
				}
				t.Logf("%s: %.4f Gb/s, %.6f Mmsg/s, %d × %d bytes", strings.Join(args, " "), m.BWGbps, m.MsgRate, m.Iters, m.Size)
			case "lat":
				l := m.Lat
				if l == nil || m.Iters != 100 || l.Min <= 0 || l.Min > l.Median || l.Median > l.P99 || l.P99 > l.Max || l.Avg < l.Min || l.Avg > l.Max {
					t.Errorf("lat result %+v %+v", m, l)
				} else {
					t.Logf("%s: median %.1f µs, p99 %.1f µs", strings.Join(args, " "), l.Median, l.P99)
				}
			}
		})
	}
	// The other way round: the listener here in B, the client on A.
	t.Run("BServes", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnB(t, probePort, grdma(), "-j", "probe", p.Dev, "listen")
		cli := p.A.Run(grdma(), "-j", "probe", p.Dev, "peer", p.LocalAddr, "traffic")
		s := <-srv
		if s.code != 0 || cli.code != 0 {
			t.Fatalf("want both sides to pass:\nserver: %s\nclient: %s", s, cli)
		}
	})
}

// TestPairProbePingpong: grdma speaks ibv_rc_pingpong's exchange, as the
// client of its server and as the server of its client.
func TestPairProbePingpong(t *testing.T) {
	const iters = "50"
	t.Run("GrdmaClient", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, toolPort, layout.IbvRcPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", iters)
		cli := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "pingpong", "iters", iters)
		s := srv.Wait()
		c := parseProbeJSON(t, "grdma", cli)
		if s.code != 0 || cli.code != 0 || !strings.Contains(s.stdout, iters+" iters in") || !c.OK ||
			c.Peer == nil || c.Peer.Tool != "ibv_rc_pingpong" || len(c.Results) != 1 || c.Results[0].Iters != 50 {
			t.Fatalf("ibv_rc_pingpong server on A, grdma here:\nserver: %s\ngrdma: %s", s, cli)
		}
	})
	t.Run("GrdmaServer", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "listen", "pingpong", "iters", iters)
		cli := run(layout.IbvRcPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", iters, p.PeerAddr)
		s := srv.Wait()
		rep := parseProbeJSON(t, "grdma", s)
		if s.code != 0 || cli.code != 0 || !strings.Contains(cli.stdout, iters+" iters in") || !rep.OK || rep.Test.Kind != "pingpong" {
			t.Fatalf("grdma server on A, ibv_rc_pingpong here:\ngrdma: %s\nclient: %s", s, cli)
		}
	})
}

// startLocal starts a command here in B; it is killed when the test ends
// if still running.
func startLocal(t *testing.T, name string, args ...string) (*exec.Cmd, *strings.Builder, *strings.Builder) {
	t.Helper()
	c := exec.Command(name, args...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c, &out, &errb
}

func exitCode(c *exec.Cmd) int {
	err := c.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// trafficFlows waits until dev has sent packets since before.
func trafficFlows(t *testing.T, dev string, before uint64) {
	t.Helper()
	if !eventually(30*time.Second, func() bool { return sentPackets(t, dev) > before+100 }) {
		t.Fatal("no traffic started")
	}
}

// TestPairProbeErrors: no listener, an unknown host, a listener that is
// not grdma, incompatible ports, a listener nobody connects to, a peer
// killed mid-test and Ctrl-C on either side: exit 1 naming the address,
// step and cause, never a hang, nothing left behind (withPeer).
func TestPairProbeErrors(t *testing.T) {
	t.Run("NoListener", func(t *testing.T) {
		p := withPeer(t)
		r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "timeout", "2s")
		if r.code != 1 || !strings.Contains(r.stderr, "failed at connect: connecting to "+p.PeerAddr+":18515: connection refused for 2s") {
			t.Errorf("no listener on A:\n%s", r)
		}
	})
	t.Run("UnknownHost", func(t *testing.T) {
		p := withPeer(t)
		r := run(grdma(), "probe", p.Dev, "peer", "nosuchhost.invalid", "timeout", "2s")
		if r.code != 1 || !strings.Contains(r.stderr, "unknown host nosuchhost.invalid") {
			t.Errorf("unknown host:\n%s", r)
		}
	})
	t.Run("NotGrdma", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, toolPort, layout.IbvRcPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", "5")
		r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "traffic", "timeout", "3s")
		srv.Wait()
		if r.code != 1 || !strings.Contains(r.stderr, "failed at connect") || !strings.Contains(r.stderr, "pingpong") {
			t.Errorf("grdma against an ibv_rc_pingpong server without pingpong:\n%s", r)
		}
	})
	t.Run("Incompatible", func(t *testing.T) {
		p := withPeer(t)
		// A uses its IPv6 link-local GID (index 0), B its IPv4 GID.
		srv, cli := probeAcross(t, p, []string{"gid-index", "0"}, "traffic")
		for _, r := range []result{srv, cli} {
			if r.code != 1 || !strings.Contains(r.stderr, "address families differ") || !strings.Contains(r.stderr, "::ffff:"+p.LocalAddr) ||
				!strings.Contains(r.stderr, "fe80::") {
				t.Errorf("IPv6 GID on A, IPv4 on B: want exit 1 naming both:\n%s", r)
			}
		}
	})
	t.Run("NobodyComes", func(t *testing.T) {
		p := withPeer(t)
		r := run(grdma(), "probe", p.Dev, "listen", "timeout", "1s")
		if r.code != 1 || !strings.Contains(r.stderr, "failed at accept") || !strings.Contains(r.stderr, "no peer connected within 1s") {
			t.Errorf("a listener nobody connects to:\n%s", r)
		}
	})
	t.Run("ServerKilled", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "probe", p.Dev, "listen")
		before := sentPackets(t, p.Dev)
		cli, _, stderr := startLocal(t, grdma(), "probe", p.Dev, "peer", p.PeerAddr, "bw", "write", "size", "4096", "duration", "60s")
		trafficFlows(t, p.Dev, before)
		srv.Signal(syscall.SIGKILL)
		srv.Wait()
		if code := exitCode(cli); code != 1 || !strings.Contains(stderr.String(), "failed at bw_write") {
			t.Errorf("the listener killed mid-test: exit %d\n%s", code, stderr)
		}
	})
	for _, side := range []string{"Client", "Server"} {
		t.Run("Interrupt"+side, func(t *testing.T) {
			p := withPeer(t)
			srv := p.ServeOnA(t, probePort, grdma(), "probe", p.Dev, "listen")
			before := sentPackets(t, p.Dev)
			cli, _, stderr := startLocal(t, grdma(), "probe", p.Dev, "peer", p.PeerAddr, "lat", "write", "duration", "60s")
			trafficFlows(t, p.Dev, before)
			if side == "Client" {
				cli.Process.Signal(syscall.SIGINT)
			} else {
				srv.Signal(syscall.SIGINT)
			}
			s, code := srv.Wait(), exitCode(cli)
			interrupted, informed := stderr.String(), s.stderr
			if side == "Server" {
				interrupted, informed = informed, interrupted
			}
			if code != 1 || s.code != 1 || !strings.Contains(interrupted, "interrupted") ||
				!strings.Contains(informed, "the peer failed at lat_write: interrupted") {
				t.Errorf("Ctrl-C on the %s: client exit %d:\n%s\nserver: %s", strings.ToLower(side), code, stderr, s)
			}
		})
	}
	t.Run("BadKeywords", func(t *testing.T) {
		for _, args := range [][]string{{"listen", "bw"}, {"peer"}, {"peer", "h", "bw", "size", "0"}, {"peer", "h", "lat", "duration", "x"}} {
			r := run(grdma(), append([]string{"probe", "rxe0"}, args...)...)
			if r.code != 2 {
				t.Errorf("probe rxe0 %s: want exit 2:\n%s", strings.Join(args, " "), r)
			}
		}
	})
}

// listenerVmPin is the memory the listener on A has pinned (VmPin of
// /proc/PID/status), in bytes.
func listenerVmPin(t *testing.T, p *pair) int {
	t.Helper()
	return listenerStatus(t, p, "VmPin:")
}

// listenerStatus is a size of the grdma on A's /proc/PID/status ("VmPin:",
// "VmRSS:"), in bytes.
func listenerStatus(t *testing.T, p *pair, field string) int {
	t.Helper()
	r := p.A.Must("/bin/sh", "-c", "cat /proc/$(pidof grdma)/status")
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field && f[2] == "kB" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in the listener's status:\n%s", field, r)
	return 0
}

// TestPairProbeListenerPolicy: the listener decides what it pins and
// whom it serves (issue 23). A raw TCP client asking for 256 MiB of
// traffic is refused, told both values, and the listener pins nothing for
// it; garbage and a port scan do not spend the listener: the real peer
// after them is served.
func TestPairProbeListenerPolicy(t *testing.T) {
	t.Run("Refuses256MiB", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "listen", "timeout", "60s")
		c, err := net.Dial("tcp", net.JoinHostPort(p.PeerAddr, strconv.Itoa(probePort)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hello := fmt.Sprintf(`{"type":"hello","grdma_probe":2,"test":{"kind":"traffic","size":%d},"seed":1,`+
			`"endpoint":{"ifname":"rxe0","port":1,"driver":"rxe","link_layer":"Ethernet","gid_index":1,"gid":"::ffff:%s",`+
			`"gid_type":"RoCE v2","qpn":17,"psn":1,"active_mtu":1024,"rd_atomic":1}}`+"\n", 256<<20, p.LocalAddr)
		if _, err := c.Write([]byte(hello)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		reply, err := bufio.NewReader(c).ReadString('\n')
		const want = "refused: the test asks for size 268435456 bytes; the listener allows at most 16777216 bytes (its size)"
		if err != nil || !strings.Contains(reply, `"type":"failed"`) || !strings.Contains(reply, want) {
			t.Fatalf("the listener answered %q, %v; want a failed message saying %q", reply, err, want)
		}
		const limit = 4 * 16 << 20 // four messages of its size
		if pinned := listenerVmPin(t, p); pinned >= limit {
			t.Errorf("the listener pins %d bytes, its cap is %d", pinned, limit)
		} else {
			t.Logf("the listener's VmPin after the refusal: %d bytes", pinned)
		}
		if !p.A.Listening(probePort) {
			t.Fatal("the refusal spent the listener")
		}
		cli := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "traffic", "size", "1048576")
		s := srv.Wait()
		if cli.code != 0 || s.code != 0 || !strings.Contains(s.stderr, "refused "+p.LocalAddr+":") || !strings.Contains(s.stderr, want[len("refused: "):]) {
			t.Fatalf("after the refusal, a real peer:\nserver: %s\nclient: %s", s, cli)
		}
		if rep := parseProbeJSON(t, "server", s); rep.Pinned == nil || *rep.Pinned != 4<<20 {
			t.Errorf("the server pinned %v bytes for 1 MiB traffic, want %d", rep.Pinned, 4<<20)
		}
	})
	t.Run("GarbageThenPeer", func(t *testing.T) {
		p := withPeer(t)
		srv := p.ServeOnA(t, probePort, grdma(), "-j", "probe", p.Dev, "listen", "timeout", "60s")
		addr := net.JoinHostPort(p.PeerAddr, strconv.Itoa(probePort))
		for _, junk := range []string{"", "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", strings.Repeat("\x16\x03\x01\x00", 20)} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte(junk))
			c.Close()
		}
		cli := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "traffic")
		s := srv.Wait()
		if cli.code != 0 || s.code != 0 || strings.Count(s.stderr, "refused "+p.LocalAddr+":") != 3 {
			t.Fatalf("a port scan, an HTTP GET and garbage, then a real peer:\nserver: %s\nclient: %s", s, cli)
		}
		if !parseProbeJSON(t, "client", cli).OK {
			t.Errorf("client: %s", cli)
		}
	})
	t.Run("From", func(t *testing.T) {
		p := withPeer(t)
		// Only an address that is not B's may connect: B's probe is
		// refused unread and A gives up after its timeout.
		srv := p.ServeOnA(t, probePort, grdma(), "probe", p.Dev, "listen", "timeout", "5s", "from", "10.99.0.0/16")
		cli := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "timeout", "3s")
		s := srv.Wait()
		if cli.code != 1 || s.code != 1 || !strings.Contains(s.stderr, "not in the allowed networks (from)") ||
			!strings.Contains(s.stderr, "connection refused") {
			t.Fatalf("a listener from 10.99.0.0/16, a peer from %s:\nserver: %s\nclient: %s", p.LocalAddr, s, cli)
		}
		srv = p.ServeOnA(t, probePort, grdma(), "probe", p.Dev, "listen", p.PeerAddr, "from", p.LocalAddr+"/32")
		cli = run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "traffic")
		if s := srv.Wait(); cli.code != 0 || s.code != 0 {
			t.Fatalf("a listener on %s from %s/32:\nserver: %s\nclient: %s", p.PeerAddr, p.LocalAddr, s, cli)
		}
	})
}
