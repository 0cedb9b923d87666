//go:build e2eguest

package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/e2e/peer"
)

// TestMain makes the test binary serve as a peer agent when
// layout.PeerAgentEnv is set (guest A of the pair, nodes 2..N of the
// fleet); otherwise it runs the tests, and in guest B (node 1) stops A's
// agent (the other nodes' agents) afterwards so that they power off.
func TestMain(m *testing.M) {
	if addr := os.Getenv(layout.PeerAgentEnv); addr != "" {
		os.Exit(serveAgent(addr))
	}
	code := m.Run()
	if addr := os.Getenv(layout.PeerEnv); addr != "" {
		if err := (&peer.Client{Addr: addr, Tag: "TestMain"}).Shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the peer agent: %v\n", err)
		}
	}
	stopFleetAgents()
	os.Exit(code)
}

// serveAgent runs the peer agent until guest B asks it to stop.
func serveAgent(addr string) int {
	logger := log.New(os.Stderr, "agent: ", log.Lmicroseconds)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Print(err)
		return 1
	}
	logger.Printf("listening on %s", addr)
	if err := (&peer.Agent{Logf: logger.Printf}).Serve(context.Background(), l); err != nil {
		logger.Print(err)
		return 1
	}
	logger.Print("stopped")
	return 0
}

// agentWait bounds the wait for A's agent: A boots alongside B.
const agentWait = 3 * time.Minute

// pair is the two-host topology seen from guest B, where the scenarios
// run: rxe Dev on Netdev on both guests, each with an IPv4 GID at GIDIndex.
type pair struct {
	A         *peerHost // guest A, driven through its agent
	Dev       string    // the rxe device on both guests
	Netdev    string
	LocalAddr string // B's address (this guest)
	PeerAddr  string // A's address
	GIDIndex  int    // of the IPv4 GID, the same on both
}

// withPeer readies the two-host bed for a scenario: A's agent answers,
// both guests have Dev on Netdev with port 1 ACTIVE and their IPv4 GID.
// When the test ends it kills what the test left running on A and fails
// the test if either guest still has an RC QP.
func withPeer(t *testing.T) *pair {
	t.Helper()
	addr := os.Getenv(layout.PeerEnv)
	if addr == "" {
		t.Fatalf("%s is not set: two-host scenarios run in guest B of TestTwoHosts (E2E_PAIR_RUN)", layout.PeerEnv)
	}
	p := &pair{A: &peerHost{t: t, c: &peer.Client{Addr: addr, Tag: t.Name()}, name: "A"},
		Dev: "rxe0", Netdev: layout.PairNetdev, LocalAddr: layout.PeerB, PeerAddr: layout.PeerA}
	if !eventually(agentWait, p.A.c.Reachable) {
		t.Fatalf("guest A's agent at %s not reachable within %v\n%s", addr, agentWait, run(layout.IP, "-s", "addr", "show", p.Netdev))
	}
	t.Cleanup(func() { noRCQPs(t, p) })

	addRxeOnce(t, p.Dev, p.Netdev)
	p.A.Must("/bin/sh", "-c", fmt.Sprintf("test -e /sys/class/infiniband/%[1]s || %[3]s link add %[1]s type rxe netdev %[2]s", p.Dev, p.Netdev, layout.Rdma))
	p.GIDIndex = ipv4GID(t, p.Dev, p.LocalAddr)
	portActive(t, "B", func() string { return readFile("/sys/class/infiniband/" + p.Dev + "/ports/1/state") })
	portActive(t, "A", func() string { return p.A.Run("cat", "/sys/class/infiniband/"+p.Dev+"/ports/1/state").stdout })
	gidFile := fmt.Sprintf("/sys/class/infiniband/%s/ports/1/gids/%d", p.Dev, p.GIDIndex)
	want := mappedGID(p.PeerAddr)
	var got result
	if !eventually(20*time.Second, func() bool {
		got = p.A.Run("cat", gidFile)
		return strings.TrimSpace(got.stdout) == want
	}) {
		t.Fatalf("guest A: GID %d is not %s (%s):\n%s", p.GIDIndex, want, p.PeerAddr, got)
	}
	return p
}

// addRxeOnce creates dev on netdev unless it exists (pair scenarios share
// one device per guest).
func addRxeOnce(t *testing.T, dev, netdev string) {
	t.Helper()
	if _, err := os.Stat("/sys/class/infiniband/" + dev); err != nil {
		addRxe(t, dev, netdev)
	}
}

func portActive(t *testing.T, host string, state func() string) {
	t.Helper()
	var s string
	if !eventually(20*time.Second, func() bool { s = state(); return strings.Contains(s, "ACTIVE") }) {
		t.Fatalf("guest %s: port 1 not ACTIVE: %q", host, s)
	}
}

func readFile(name string) string { b, _ := os.ReadFile(name); return string(b) }

// noRCQPs fails the test if either guest still has RC QPs once the
// processes of the test are gone (their QPs are destroyed as they exit).
func noRCQPs(t *testing.T, p *pair) {
	t.Helper()
	for _, host := range []struct {
		name string
		res  func() result
	}{
		{"B", func() result { return run(layout.Rdma, "-j", "res", "show", "qp") }},
		{"A", func() result { return p.A.Run(layout.Rdma, "-j", "res", "show", "qp") }},
	} {
		var left []string
		var r result
		eventually(10*time.Second, func() bool {
			r = host.res()
			left = rcQPs(r)
			return r.code == 0 && len(left) == 0
		})
		if r.code != 0 {
			t.Errorf("guest %s: %s", host.name, r)
		} else if len(left) > 0 {
			t.Errorf("guest %s: RC QPs left after the test:\n%s", host.name, strings.Join(left, "\n"))
		}
	}
}

// rcQPs lists the RC QPs of an `rdma -j res show qp` output.
func rcQPs(r result) []string {
	var qps []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &qps); err != nil {
		return []string{fmt.Sprintf("unparsable: %v\n%s", err, r.stdout)}
	}
	var rc []string
	for _, q := range qps {
		if q["type"] == "RC" {
			b, _ := json.Marshal(q)
			rc = append(rc, string(b))
		}
	}
	return rc
}

// peerHost runs commands on another guest (the pair's A, a fleet's node)
// through its agent for one test, each bounded by peer.DefaultTimeout (or
// the client's Timeout). Its methods fail the test (t) when the agent does
// not answer: call them from the test's goroutine.
type peerHost struct {
	t    *testing.T
	c    *peer.Client
	name string // in messages: "A", "node3"
}

// WithTimeout is the host with another time limit for its commands.
func (h *peerHost) WithTimeout(d time.Duration) *peerHost {
	return &peerHost{t: h.t, c: h.c.WithTimeout(d), name: h.name}
}

// Run runs a command on the host; an agent failure fails the test.
func (h *peerHost) Run(name string, args ...string) result {
	h.t.Helper()
	r, err := h.c.Run(name, args...)
	if err != nil {
		h.t.Fatalf("on %s: %v", h.name, err)
	}
	return fromPeer(r, h.name)
}

// Must runs a command on the host that has to succeed.
func (h *peerHost) Must(name string, args ...string) result {
	h.t.Helper()
	r := h.Run(name, args...)
	if r.code != 0 {
		h.t.Fatalf("command failed:\n%s", r)
	}
	return r
}

// Start starts a command on the host; one the test leaves running is
// killed when it ends.
func (h *peerHost) Start(name string, args ...string) *remoteCmd {
	h.t.Helper()
	r, err := h.c.Start(name, args...)
	if err != nil {
		h.t.Fatalf("on %s: %v", h.name, err)
	}
	c := &remoteCmd{t: h.t, r: r, host: h.name}
	h.t.Cleanup(func() {
		if !c.waited {
			r.Signal(syscall.SIGKILL)
			r.Wait()
		}
	})
	return c
}

// Listening reports whether a TCP socket listens on port on the host.
func (h *peerHost) Listening(port int) bool {
	h.t.Helper()
	return listeningIn(h.Run("cat", "/proc/net/tcp", "/proc/net/tcp6").stdout, port)
}

// Serve starts a server on the host and returns once it listens on TCP
// port: clients such as ibv_rc_pingpong and perftest give up at once on a
// refused connection, and a probing connect would end the server's one
// accept, so this watches the host's /proc/net/tcp instead.
func (h *peerHost) Serve(port int, name string, args ...string) *remoteCmd {
	h.t.Helper()
	srv := h.Start(name, args...)
	if !eventually(serverListenWait, func() bool { return h.Listening(port) }) {
		srv.Signal(syscall.SIGKILL)
		h.t.Fatalf("%s on %s never listened on TCP %d:\n%s", filepath.Base(name), h.name, port, srv.Wait())
	}
	return srv
}

// CMListening reports whether an RDMA CM ID listens on port on the host
// (`rdma -j res show cm_id`: a CM listener has no socket).
func (h *peerHost) CMListening(port int) bool {
	h.t.Helper()
	return cmListeningIn(h.Run(layout.Rdma, "-j", "res", "show", "cm_id").stdout, port)
}

// cmListeningIn reports whether `rdma -j res show cm_id` output shows an
// ID in state LISTEN on port.
func cmListeningIn(out string, port int) bool {
	var ids []struct {
		State string `json:"state"`
		Src   string `json:"src-addr"`
	}
	if json.Unmarshal([]byte(out), &ids) != nil {
		return false
	}
	for _, id := range ids {
		if id.State == "LISTEN" && strings.HasSuffix(id.Src, ":"+strconv.Itoa(port)) {
			return true
		}
	}
	return false
}

// ServeCM starts a server that listens through the RDMA CM (rping -s,
// perftest -R, rdma_server) and returns once its ID listens on port.
func (h *peerHost) ServeCM(port int, name string, args ...string) *remoteCmd {
	h.t.Helper()
	srv := h.Start(name, args...)
	if !eventually(serverListenWait, func() bool { return h.CMListening(port) }) {
		srv.Signal(syscall.SIGKILL)
		h.t.Fatalf("%s on %s never listened on RDMA CM port %d:\n%s", filepath.Base(name), h.name, port, srv.Wait())
	}
	return srv
}

// remoteCmd is a command running on another guest.
type remoteCmd struct {
	t      *testing.T
	r      *peer.Remote
	host   string
	waited bool
}

// Wait waits for it to end (it is killed at its time limit).
func (c *remoteCmd) Wait() result {
	c.t.Helper()
	c.waited = true
	r, err := c.r.Wait()
	if err != nil {
		c.t.Fatalf("on %s: %v", c.host, err)
	}
	return fromPeer(r, c.host)
}

// Signal sends sig to its process group.
func (c *remoteCmd) Signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.r.Signal(sig); err != nil {
		c.t.Fatalf("on %s: %v", c.host, err)
	}
}

// Output is what it printed so far.
func (c *remoteCmd) Output() (stdout, stderr string) {
	c.t.Helper()
	stdout, stderr, err := c.TryOutput()
	if err != nil {
		c.t.Fatal(err)
	}
	return stdout, stderr
}

// TryOutput is Output that fails no test: for a diagnosis, which may run
// in a subtest of the test that started the command (a subtest must not
// call its parent's FailNow), of a node whose agent may not answer.
func (c *remoteCmd) TryOutput() (stdout, stderr string, err error) {
	stdout, stderr, err = c.r.Output()
	if err != nil {
		err = fmt.Errorf("on %s: %w", c.host, err)
	}
	return stdout, stderr, err
}

// fromPeer is a remote command's end as a result, marked as run on host.
func fromPeer(r peer.Result, host string) result {
	res := result{cmd: "(on " + host + ") " + strings.Join(r.Argv, " "), stdout: r.Stdout, stderr: r.Stderr, code: r.Code}
	switch {
	case r.TimedOut:
		res.stderr += fmt.Sprintf("[killed on %s after its time limit, %v]\n", host, r.Elapsed.Round(time.Second))
	case r.Signal != "":
		res.signal = r.Signal
		res.stderr += "[killed on " + host + " by signal: " + r.Signal + "]\n"
	}
	return res
}

// serverListenWait bounds the wait for a server to listen on its port.
const serverListenWait = 30 * time.Second

// ServeOnA starts a server on A and returns once it listens on TCP port
// (peerHost.Serve).
func (p *pair) ServeOnA(t *testing.T, port int, name string, args ...string) *remoteCmd {
	t.Helper()
	return p.A.Serve(port, name, args...)
}

// ServeOnB starts a server here in B and returns once it listens on TCP
// port; its result comes on the channel when it ends (its time limit is
// cmdTimeout).
func (p *pair) ServeOnB(t *testing.T, port int, name string, args ...string) <-chan result {
	t.Helper()
	srv := make(chan result, 1)
	go func() { srv <- run(name, args...) }()
	if !eventually(serverListenWait, func() bool { return listening(port) }) {
		t.Fatalf("%s on B never listened on TCP %d:\n%s", filepath.Base(name), port, <-srv)
	}
	return srv
}

// across runs a server/client tool (ibv_rc_pingpong, perftest) over the
// link with the same arguments on both sides: the server on A when
// serverOnA, else on B; the client gets the server's address last.
func (p *pair) across(t *testing.T, serverOnA bool, port int, tool string, args ...string) (server, client result) {
	t.Helper()
	if serverOnA {
		srv := p.ServeOnA(t, port, tool, args...)
		client = run(tool, append(args, p.PeerAddr)...)
		return srv.Wait(), client
	}
	srv := p.ServeOnB(t, port, tool, args...)
	client = p.A.Run(tool, append(args, p.LocalAddr)...)
	return <-srv, client
}
