//go:build e2eguest

package guest

// grdma probe DEV serve (issue 25) across the pair bed: a responder on A
// answering peers from B, several at once, within its limits, with a
// shared secret, an ibv_rc_pingpong client, fifty peers in a row, bad
// connections and peers that stop or die mid-test, run unprivileged as
// its systemd unit runs it, and SIGTERM under load. withPeer fails a test that leaves an RC QP on
// either guest.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/e2e/layout"
)

// servedLine is one line of a responder's -j output.
type servedLine struct {
	Peer   string `json:"peer"`
	Result string `json:"result"`
	Error  string `json:"error"`
	Step   string `json:"step"`
	Test   *struct {
		Kind string `json:"kind"`
		Op   string `json:"op"`
	} `json:"test"`
	Pinned  int   `json:"pinned_bytes"`
	Results []any `json:"results"`
}

// servedLines parses a responder's -j output.
func servedLines(t *testing.T, stdout string) []servedLine {
	t.Helper()
	var lines []servedLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var s servedLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("a line of serve -j is not JSON: %v\n%s", err, l)
		}
		lines = append(lines, s)
	}
	return lines
}

// serveOnA starts grdma probe DEV serve ARGS... on A, with a time limit
// past any scenario's (the agent's default is a minute), and returns once
// it listens.
func serveOnA(t *testing.T, p *pair, args ...string) *remoteCmd {
	t.Helper()
	return p.A.WithTimeout(10*time.Minute).Serve(probePort, grdma(), append([]string{"-j", "probe", p.Dev, "serve"}, args...)...)
}

// stopServe sends SIGTERM to the responder on A and returns its result.
func stopServe(t *testing.T, srv *remoteCmd) result {
	t.Helper()
	srv.Signal(syscall.SIGTERM)
	r := srv.Wait()
	if r.code != 0 || !strings.Contains(r.stderr, "stopped serving") {
		t.Errorf("the responder after SIGTERM:\n%s", r)
	}
	return r
}

// count tallies the results of a responder's lines.
func count(lines []servedLine) map[string]int {
	n := map[string]int{}
	for _, l := range lines {
		n[l.Result]++
	}
	return n
}

func TestPairProbeServe(t *testing.T) {
	// Peers at once: three tests from B at the same time, then a burst of
	// six against peers 2, whose extra peers are told busy and ask again.
	t.Run("Concurrent", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p, "peers", "2", "timeout", "30s")
		tests := [][]string{{"traffic"}, {"bw", "write", "iters", "200"}, {"lat", "send", "iters", "50"},
			{"traffic", "size", "20000"}, {"bw", "read", "iters", "100"}, {"lat", "write", "iters", "50"}}
		results := make([]result, len(tests))
		var wg sync.WaitGroup
		for i, args := range tests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = run(grdma(), append([]string{"-j", "probe", p.Dev, "peer", p.PeerAddr}, append(args, "timeout", "60s")...)...)
			}()
		}
		wg.Wait()
		for i, r := range results {
			if r.code != 0 || !parseProbeJSON(t, "client", r).OK {
				t.Errorf("%s:\n%s", strings.Join(tests[i], " "), r)
			}
		}
		s := stopServe(t, srv)
		lines := servedLines(t, s.stdout)
		n := count(lines)
		if n["pass"] != len(tests) || n["fail"] != 0 {
			t.Errorf("the responder's lines: %v\n%s", n, s)
		}
		t.Logf("%d peers served by a responder of 2 at once, %d busy answers on the way", n["pass"], n["busy"])
	})
	t.Run("Limits", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p, "size", "1048576", "duration", "10s")
		for args, want := range map[string]string{
			"bw size 2097152":   "the test asks for size 2097152 bytes; the listener allows at most 1048576 bytes (its size)",
			"bw duration 1m":    "the test asks for duration 1m0s; the listener allows at most 10s (its duration)",
			"traffic size 4096": "",
		} {
			r := run(grdma(), append([]string{"probe", p.Dev, "peer", p.PeerAddr}, strings.Fields(args)...)...)
			if want == "" && r.code != 0 || want != "" && (r.code != 1 || !strings.Contains(r.stderr, want)) {
				t.Errorf("%s: want %q:\n%s", args, want, r)
			}
		}
		s := stopServe(t, srv)
		if n := count(servedLines(t, s.stdout)); n["refused"] != 2 || n["pass"] != 1 {
			t.Errorf("the responder's lines: %v\n%s", n, s)
		}
	})
	t.Run("Pingpong", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p, "pingpong", "iters", "50")
		for range 2 {
			cli := run(layout.IbvRcPingpong, "-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", "50", p.PeerAddr)
			if cli.code != 0 || !strings.Contains(cli.stdout, "50 iters in") {
				t.Errorf("ibv_rc_pingpong against the responder:\n%s", cli)
			}
		}
		s := stopServe(t, srv)
		if n := count(servedLines(t, s.stdout)); n["pass"] != 2 {
			t.Errorf("the responder's lines: %v\n%s", n, s)
		}
	})
	// Fifty peers in a row: each passes, the responder's own objects stay
	// what they were (its context and PD: no QP, CQ or MR left).
	t.Run("FiftyInARow", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p)
		before := p.A.Must(layout.Rdma, "-j", "res").stdout
		// The responder's own objects while it idles: those of its UD
		// ping answerer (a UD QP, its two CQs and MR), which live as long as it.
		own := map[string][]string{}
		for _, kind := range []string{"qp", "cq", "mr"} {
			own[kind] = grdmaObjects(t, p, kind)
		}
		var rss5 int
		for i := range 50 {
			args := []string{"probe", p.Dev, "peer", p.PeerAddr}
			if i%5 == 0 {
				args = append(args, "traffic")
			}
			if r := run(grdma(), args...); r.code != 0 {
				t.Fatalf("peer %d:\n%s", i+1, r)
			}
			if i == 4 {
				rss5 = listenerStatus(t, p, "VmRSS:")
			}
		}
		// Memory stays what it was after the first peers.
		if rss50 := listenerStatus(t, p, "VmRSS:"); rss50-rss5 > 8<<20 {
			t.Errorf("the responder's RSS grew from %d to %d bytes over 45 peers", rss5, rss50)
		} else {
			t.Logf("the responder's RSS after 5 peers %d kB, after 50 %d kB", rss5>>10, rss50>>10)
		}
		if after := p.A.Must(layout.Rdma, "-j", "res").stdout; after != before {
			t.Errorf("A's resources while the responder idles, before the 50 peers:\n%s\nafter:\n%s", before, after)
		}
		for _, kind := range []string{"qp", "cq", "mr"} {
			if after := grdmaObjects(t, p, kind); !slices.Equal(after, own[kind]) {
				t.Errorf("A: grdma's %ss while it idles, before the 50 peers %v, after %v", kind, own[kind], after)
			}
		}
		s := stopServe(t, srv)
		if n := count(servedLines(t, s.stdout)); n["pass"] != 50 {
			t.Errorf("the responder's lines: %v", n)
		}
	})
	t.Run("Auth", func(t *testing.T) {
		p := withPeer(t)
		const key = "/tmp/probe.key"
		write := fmt.Sprintf("umask 077 && echo 0123456789abcdef-fleet-secret > %s", key)
		p.A.Must("/bin/sh", "-c", write)
		must(t, "/bin/sh", "-c", write)
		srv := serveOnA(t, p, "auth", key)
		if r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "traffic", "auth", key); r.code != 0 {
			t.Errorf("with the key:\n%s", r)
		}
		if r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "traffic"); r.code != 1 || !strings.Contains(r.stderr, "give auth FILE") {
			t.Errorf("without the key:\n%s", r)
		}
		s := stopServe(t, srv)
		if n := count(servedLines(t, s.stdout)); n["pass"] != 1 || n["refused"] != 1 {
			t.Errorf("the responder's lines: %v\n%s", n, s)
		}
	})
	// Faults: a hundred connections at once from B that are not valid peers
	// (garbage, a line over the protocol's bound, a hello over the
	// responder's size, silence, a valid hello sent a byte at a time more
	// slowly than the timeout allows) while a real peer is served; then a
	// peer stopped (SIGSTOP) mid-test, cut off when it has been silent for
	// the timeout, and one killed mid-test. Each is refused or cut off
	// with its reason, A's resources come back to what they were, and the
	// responder's RSS stays within 16 MiB of what it was after one peer.
	t.Run("Faults", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p, "timeout", "3s")
		if r := run(grdma(), "probe", p.Dev, "peer", p.PeerAddr, "traffic"); r.code != 0 {
			t.Fatalf("the first peer:\n%s", r)
		}
		before := p.A.Must(layout.Rdma, "-j", "res").stdout
		rss0 := listenerStatus(t, p, "VmRSS:")
		addr := net.JoinHostPort(p.PeerAddr, strconv.Itoa(probePort))
		hello := fmt.Sprintf(`{"type":"hello","grdma_probe":2,"test":{"kind":"traffic","size":%d},"seed":1,`+
			`"endpoint":{"ifname":"rxe0","port":1,"driver":"rxe","link_layer":"Ethernet","gid_index":1,"gid":"::ffff:%s",`+
			`"gid_type":"RoCE v2","qpn":17,"psn":1,"active_mtu":1024,"rd_atomic":1}}`+"\n", 256<<20, p.LocalAddr)
		kinds := []struct {
			name string
			send func(net.Conn) error
		}{
			{"garbage", func(c net.Conn) error { _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); return err }},
			{"oversized", func(c net.Conn) error {
				_, err := c.Write([]byte(`{"type":"hello","x":"` + strings.Repeat("a", 80<<10)))
				return err
			}},
			{"over the limits", func(c net.Conn) error { _, err := c.Write([]byte(hello)); return err }},
			{"silent", func(net.Conn) error { return nil }},
			{"slow", func(c net.Conn) error {
				for i := range 8 { // 8 bytes of a hello in 4 s: past the 3 s timeout
					if _, err := c.Write([]byte{hello[i]}); err != nil {
						return err
					}
					time.Sleep(500 * time.Millisecond)
				}
				return nil
			}},
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		answers := map[string][]string{}
		for i := range 100 {
			k := kinds[i%len(kinds)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Errorf("%s: %v", k.name, err)
					return
				}
				defer c.Close()
				k.send(c) // a write may fail: the responder cut it off
				// The responder answers (a hello over its limits) or
				// closes; nothing keeps a connection past its timeout.
				c.SetReadDeadline(time.Now().Add(60 * time.Second))
				reply, err := io.ReadAll(bufio.NewReader(c))
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("%s: still open after 60 s", k.name)
				}
				mu.Lock()
				answers[k.name] = append(answers[k.name], strings.TrimSpace(string(reply)))
				mu.Unlock()
			}()
		}
		// A real peer while they are there.
		if r := run(grdma(), "-j", "probe", p.Dev, "peer", p.PeerAddr, "traffic", "timeout", "60s"); r.code != 0 {
			t.Errorf("a peer among a hundred bad connections:\n%s", r)
		}
		wg.Wait()
		for _, a := range answers["over the limits"] {
			if !strings.Contains(a, "the listener allows at most 16777216 bytes (its size)") {
				t.Errorf("a hello over the limits was answered %q", a)
			}
		}
		// Stopped mid-test: silent for the timeout, then cut off.
		stopped, _, _ := startLocal(t, grdma(), "probe", p.Dev, "peer", p.PeerAddr, "bw", "write", "size", "4096", "duration", "60s")
		trafficFlows(t, p.Dev, sentPackets(t, p.Dev))
		stopped.Process.Signal(syscall.SIGSTOP)
		// Killed mid-test: once the responder has its queue pair (the
		// stopped peer's queued writes keep B's counters going, so
		// packets alone do not say this one started).
		had := grdmaObjects(t, p, "qp")
		killed, _, _ := startLocal(t, grdma(), "probe", p.Dev, "peer", p.PeerAddr, "bw", "send", "size", "4096", "duration", "60s")
		newQP := func() bool {
			for _, qp := range grdmaObjects(t, p, "qp") {
				if strings.HasPrefix(qp, "RC ") && !slices.Contains(had, qp) {
					return true
				}
			}
			return false
		}
		if !eventually(30*time.Second, newQP) {
			t.Fatalf("the peer to kill never got its queue pair on A: %v (before: %v)", grdmaObjects(t, p, "qp"), had)
		}
		trafficFlows(t, p.Dev, sentPackets(t, p.Dev))
		killed.Process.Kill()
		killed.Wait()
		// Both peers' queue pairs go (the silent one after the timeout);
		// the UD ping answerer's stays with the responder.
		noQP := func() bool {
			for _, qp := range grdmaObjects(t, p, "qp") {
				if !strings.HasPrefix(qp, "UD ") {
					return false
				}
			}
			return true
		}
		if !eventually(30*time.Second, noQP) {
			t.Errorf("A still has grdma's queue pairs 30 s after its peers went silent and died:\n%s",
				p.A.Must(layout.Rdma, "-j", "res", "show", "qp").stdout)
		}
		stopped.Process.Kill()
		stopped.Wait()
		if after := p.A.Must(layout.Rdma, "-j", "res").stdout; after != before {
			t.Errorf("A's resources before the faults:\n%s\nafter:\n%s", before, after)
		}
		if rss := listenerStatus(t, p, "VmRSS:"); rss-rss0 > 16<<20 {
			t.Errorf("the responder's RSS grew from %d to %d bytes", rss0, rss)
		} else {
			t.Logf("the responder's RSS after one peer %d kB, after the faults %d kB", rss0>>10, rss>>10)
		}
		s := stopServe(t, srv)
		lines := servedLines(t, s.stdout)
		n := count(lines)
		if n["pass"] != 2 || n["fail"] != 2 || n["refused"] != 100 {
			t.Errorf("the responder's lines: %v (want 2 pass, 2 fail, 100 refused)\n%s", n, s)
		}
		for _, l := range lines {
			if l.Result == "fail" {
				t.Logf("a peer cut off: %s at %s: %s", l.Peer, l.Step, l.Error)
			}
		}
	})
	// Deployed as the systemd unit runs it: no privileges (uid 65534, no
	// capabilities) and RLIMIT_MEMLOCK sized to its memory (LimitMEMLOCK
	// 288M): a peer's 16 MiB is pinned and served. With a memory lock
	// limit of 8 MiB (the kernel's default) the same peer fails at reg_mr,
	// the responder's line saying why, and it serves on.
	t.Run("Unprivileged", func(t *testing.T) {
		p := withPeer(t)
		for _, c := range []struct {
			memlock uint64
			ok      bool
		}{{288 << 20, true}, {8 << 20, false}} {
			cmd := exec.Command(grdma(), "-j", "probe", p.Dev, "serve", p.LocalAddr, "timeout", "30s")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			lim := unix.Rlimit{Cur: c.memlock, Max: c.memlock}
			if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_MEMLOCK, &lim, nil); err != nil {
				t.Fatal(err)
			}
			if !eventually(serverListenWait, func() bool { return listening(probePort) }) {
				t.Fatalf("the responder as uid 65534 never listened:\n%s", &errb)
			}
			r := p.A.Run(grdma(), "probe", p.Dev, "peer", p.LocalAddr, "traffic", "size", "4194304", "timeout", "30s")
			if c.ok && r.code != 0 || !c.ok && (r.code != 1 || !strings.Contains(r.stderr, "reg_mr")) {
				t.Errorf("memlock %d MiB: a peer pinning 16 MiB:\n%s", c.memlock>>20, r)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if code := exitCode(cmd); code != 0 {
				t.Errorf("memlock %d MiB: the responder exited %d:\n%s", c.memlock>>20, code, &errb)
			}
			lines := servedLines(t, out.String())
			switch {
			case len(lines) != 1:
				t.Errorf("memlock %d MiB: the responder's lines:\n%s", c.memlock>>20, &out)
			case c.ok && (lines[0].Result != "pass" || lines[0].Pinned != 16<<20):
				t.Errorf("memlock %d MiB: want pass, pinned 16 MiB:\n%s", c.memlock>>20, &out)
			case !c.ok && (lines[0].Result != "fail" || lines[0].Step != "reg_mr" || !strings.Contains(out.String(), "RLIMIT_MEMLOCK")):
				t.Errorf("memlock %d MiB: want a failure at reg_mr naming RLIMIT_MEMLOCK:\n%s", c.memlock>>20, &out)
			}
		}
	})
	// SIGTERM under load: a test that would run 60 s is cut off after the
	// grace period, told why; the responder exits 0 and leaves nothing.
	t.Run("SigtermUnderLoad", func(t *testing.T) {
		p := withPeer(t)
		srv := serveOnA(t, p, "grace", "1s")
		before := sentPackets(t, p.Dev)
		cli, _, stderr := startLocal(t, grdma(), "probe", p.Dev, "peer", p.PeerAddr, "bw", "write", "size", "4096", "duration", "60s")
		trafficFlows(t, p.Dev, before)
		start := time.Now()
		s := stopServe(t, srv)
		took := time.Since(start)
		if code := exitCode(cli); code != 1 || !strings.Contains(stderr.String(), "the peer failed at bw_write: interrupted") {
			t.Errorf("the client cut off: exit %d\n%s", code, stderr)
		}
		if n := count(servedLines(t, s.stdout)); n["fail"] != 1 {
			t.Errorf("the responder's lines: %v\n%s", n, s)
		}
		t.Logf("SIGTERM to exit with a test running, grace 1s: %v", took.Round(10*time.Millisecond))
	})
}

// grdmaObjects lists grdma's objects of a kind ("qp", "cq", "mr") on A
// from rdma res, each as "TYPE NUMBER" (qp) or its number, sorted.
func grdmaObjects(t *testing.T, p *pair, kind string) []string {
	t.Helper()
	var objs []struct {
		Comm string `json:"comm"`
		Type string `json:"type"`
		QPN  *int   `json:"lqpn"`
		CQN  *int   `json:"cqn"`
		MRN  *int   `json:"mrn"`
	}
	out := p.A.Must(layout.Rdma, "-j", "res", "show", kind).stdout
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		t.Fatalf("rdma -j res show %s: %v\n%s", kind, err, out)
	}
	var ids []string
	for _, o := range objs {
		if o.Comm != "grdma" {
			continue
		}
		switch {
		case o.QPN != nil:
			ids = append(ids, fmt.Sprintf("%s %d", o.Type, *o.QPN))
		case o.CQN != nil:
			ids = append(ids, strconv.Itoa(*o.CQN))
		case o.MRN != nil:
			ids = append(ids, strconv.Itoa(*o.MRN))
		}
	}
	slices.Sort(ids)
	return ids
}
