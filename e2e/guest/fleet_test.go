//go:build e2eguest

package guest

// The fleet: N guests on one switch (e2e.BootFleet). Node 1, this guest,
// runs the TestFleet* scenarios; nodes 2..N serve as peer agents. See
// e2e/README.md "A fleet of guests".

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/e2e/peer"
)

// allGuests asks withFleet for every guest the fleet booted.
const allGuests = 0

// fleet is the N-guest bed seen from node 1, where the scenarios run:
// rxe Dev on Netdev on every node used, each port ACTIVE with its IPv4 GID.
type fleet struct {
	t      *testing.T
	Dev    string // the rxe device on every node
	Netdev string
	// GIDIndex is node 1's IPv4 GID index (each node has its own in
	// node.GIDIndex; on this bed they are all the same).
	GIDIndex int
	nodes    []*node // nodes[i-1] is node i
}

// node is one guest of the fleet. Its peerHost methods (Run, Must, Start,
// Serve, Listening, WithTimeout) run commands there, node 1's too (through
// an agent inside this test binary), all alike: each in its own process
// group, killed when the test ends if still running.
type node struct {
	*peerHost
	N        int    // 1..N
	Addr     string // layout.FleetAddr(N)
	Name     string // layout.FleetName(N)
	GIDIndex int    // of the IPv4 GID
	f        *fleet
}

// Node is node i (1 is this guest, the driver).
func (f *fleet) Node(i int) *node {
	f.t.Helper()
	if i < 1 || i > len(f.nodes) {
		f.t.Fatalf("no node %d: this scenario asked withFleet for %d", i, len(f.nodes))
	}
	return f.nodes[i-1]
}

// Nodes are the nodes this scenario uses, node 1 first.
func (f *fleet) Nodes() []*node { return f.nodes }

// Size is the number of nodes this scenario uses.
func (f *fleet) Size() int { return len(f.nodes) }

// fleetAgents is layout.FleetAgentsEnv: the agents of nodes 2..N.
func fleetAgents() []string {
	v := os.Getenv(layout.FleetAgentsEnv)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// stopFleetAgents asks every node's agent to stop, so that its guest powers
// off (TestMain, when the scenarios end).
func stopFleetAgents() {
	var wg sync.WaitGroup
	for _, addr := range fleetAgents() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := (&peer.Client{Addr: addr, Tag: "TestMain"}).Shutdown(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the agent at %s: %v\n", addr, err)
			}
		}()
	}
	wg.Wait()
}

// localAgent serves node 1's own commands, so that a scenario drives every
// node the same way.
var localAgent struct {
	once sync.Once
	addr string
	err  error
}

func startLocalAgent() (string, error) {
	localAgent.once.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			localAgent.err = err
			return
		}
		localAgent.addr = l.Addr().String()
		go (&peer.Agent{}).Serve(context.Background(), l)
	})
	return localAgent.addr, localAgent.err
}

// lostAgents are the nodes whose agent did not answer within agentWait
// (node name → when): a guest whose kernel failed stays so, and every
// later scenario that needs it fails at once instead of waiting again.
var lostAgents sync.Map

// rxeWait bounds the wait for a node's rxe port to be ACTIVE with its
// IPv4 GID.
const rxeWait = 20 * time.Second

// withFleet readies n guests of the fleet for a scenario (allGuests: every
// guest booted): each node's agent answers, each has rxe0 on eth0 with
// port 1 ACTIVE and its IPv4 GID. When the test ends, after what the test
// started was killed and its faults removed, it fails the test if a node
// still has a user QP, CQ, MR or CM ID (`rdma -j res show`), or a fault
// planted outside the fault helpers (a qdisc, an nftables rule, the ifb
// device), which it then removes, so that the next scenario starts clean.
func withFleet(t *testing.T, n int) *fleet {
	t.Helper()
	agents := fleetAgents()
	if agents == nil {
		t.Fatalf("%s is not set: fleet scenarios run on node 1 of TestFleet (E2E_FLEET_RUN)", layout.FleetAgentsEnv)
	}
	size := len(agents) + 1
	if n == allGuests {
		n = size
	}
	if n < 1 || n > size {
		t.Fatalf("this scenario needs %d guests; the fleet has %d (E2E_FLEET_SIZE)", n, size)
	}
	local, err := startLocalAgent()
	if err != nil {
		t.Fatalf("node 1's own agent: %v", err)
	}
	f := &fleet{t: t, Dev: "rxe0", Netdev: layout.FleetNetdev}
	for i := 1; i <= n; i++ {
		addr := local
		if i > 1 {
			addr = agents[i-2]
		}
		f.nodes = append(f.nodes, &node{N: i, Addr: layout.FleetAddr(i), Name: layout.FleetName(i), f: f,
			peerHost: &peerHost{t: t, c: &peer.Client{Addr: addr, Tag: t.Name()}, name: layout.FleetName(i)}})
	}
	if errs := f.each(func(nd *node) error {
		if why, ok := lostAgents.Load(nd.Name); ok {
			return fmt.Errorf("agent at %s lost earlier in this run (%s): not waiting again", nd.c.Addr, why)
		}
		if !eventually(agentWait, nd.c.Reachable) {
			lostAgents.Store(nd.Name, fmt.Sprintf("not reachable within %v in %s", agentWait, t.Name()))
			return fmt.Errorf("agent at %s not reachable within %v\n%s", nd.c.Addr, agentWait, run("/bin/ping", "-c", "2", "-w", "5", nd.Addr))
		}
		return nil
	}); errs != "" {
		t.Fatalf("%s%s%s", errs, run(layout.IP, "-s", "addr", "show", f.Netdev), run(layout.IP, "neigh", "show"))
	}
	t.Cleanup(f.check)
	if errs := f.each(func(nd *node) error { return nd.readyRxe() }); errs != "" {
		t.Fatal(errs)
	}
	f.GIDIndex = f.nodes[0].GIDIndex
	return f
}

// each calls fn for every node at once and returns their errors, one line
// per failed node ("" if none). fn must not fail the test itself.
func (f *fleet) each(fn func(*node) error) string {
	errs := make([]error, len(f.nodes))
	var wg sync.WaitGroup
	for i, nd := range f.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(nd) }()
	}
	wg.Wait()
	var b strings.Builder
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f.nodes[i].Name, err)
		}
	}
	return b.String()
}

// exec runs a shell script on the node without failing the test (for
// each).
func (nd *node) exec(timeout time.Duration, script string) (result, error) {
	r, err := nd.c.WithTimeout(timeout).Run(layout.Sh, "-c", script)
	return fromPeer(r, nd.Name), err
}

// readyRxe makes rxe0 on eth0 unless it exists, waits for port 1 to be
// ACTIVE and for the IPv4 GID, and records that GID's index.
func (nd *node) readyRxe() error {
	dev, netdev := nd.f.Dev, nd.f.Netdev
	want := mappedGID(nd.Addr)
	port := "/sys/class/infiniband/" + dev + "/ports/1"
	// Polls for at most rxeWait; prints the GID's index.
	script := fmt.Sprintf(`test -e /sys/class/infiniband/%[1]s || %[2]s link add %[1]s type rxe netdev %[3]s || exit 1
n=0
while [ $n -lt %[6]d ]; do
	if grep -q ACTIVE %[4]s/state; then
		for g in %[4]s/gids/*; do
			[ "$(cat $g 2>/dev/null)" = %[5]s ] && { basename $g; exit 0; }
		done
	fi
	sleep 0.1; n=$((n+1))
done
echo "port 1: $(cat %[4]s/state); GIDs:"; cat %[4]s/gids/0 %[4]s/gids/1 %[4]s/gids/2 2>&1
exit 1`, dev, layout.Rdma, netdev, port, want, int(rxeWait/(100*time.Millisecond)))
	r, err := nd.exec(rxeWait+10*time.Second, script)
	if err != nil {
		return err
	}
	if r.code != 0 {
		return fmt.Errorf("%s not ready (port ACTIVE with GID %s):\n%s", dev, want, r)
	}
	nd.GIDIndex, err = strconv.Atoi(strings.TrimSpace(r.stdout))
	return err
}

// check is withFleet's cleanup: leftover faults, then leftover resources,
// on every node used.
func (f *fleet) check() {
	t := f.t
	if errs := f.each(func(nd *node) error { return nd.unplanted() }); errs != "" {
		t.Errorf("faults left on a node after the test (removed now):\n%s", errs)
	}
	if errs := f.each(func(nd *node) error { return nd.noResources() }); errs != "" {
		t.Errorf("RDMA resources left after the test:\n%s", errs)
	}
}

// resWait bounds the wait for the resources of the test's processes to go
// (they are destroyed as the processes exit).
const resWait = 10 * time.Second

// resKinds are the resources a test must not leave behind.
var resKinds = []string{"qp", "cq", "mr", "cm_id"}

// noResources waits until the node has no user QP, CQ, MR or CM ID (kernel
// ones, such as QP1 of ib_core, have no pid) and says what is left.
func (nd *node) noResources() error {
	var left []string
	var lastErr error
	ok := eventually(resWait, func() bool {
		left, lastErr = nil, nil
		for _, kind := range resKinds {
			r, err := nd.c.Run(layout.Rdma, "-j", "res", "show", kind)
			if err != nil || r.Code != 0 {
				lastErr = fmt.Errorf("rdma -j res show %s: %v %s", kind, err, r.Stderr)
				return false
			}
			left = append(left, userResources(kind, r.Stdout)...)
		}
		return len(left) == 0
	})
	if ok {
		return nil
	}
	if lastErr != nil {
		return lastErr
	}
	return fmt.Errorf("\n    %s", strings.Join(left, "\n    "))
}

// userResources lists the entries of an `rdma -j res show KIND` output
// that belong to a process.
func userResources(kind, out string) []string {
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		return []string{fmt.Sprintf("%s: unparsable: %v\n%s", kind, err, out)}
	}
	var user []string
	for _, e := range entries {
		if _, ok := e["pid"]; ok {
			b, _ := json.Marshal(e)
			user = append(user, kind+" "+string(b))
		}
	}
	return user
}
