//go:build e2eguest

package guest

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// resCommands are compared between grdma and rdma on the same live state.
var resCommands = [][]string{
	{"-j", "res"}, {"res"}, {"res", "show", "rxe1"},
	{"-j", "res", "show", "qp"}, {"res", "show", "qp"}, {"-j", "-p", "res", "show", "qp"}, {"-dd", "res", "show", "qp"},
	{"-j", "res", "show", "cq"}, {"res", "show", "cq"},
	{"-j", "res", "show", "mr"}, {"res", "show", "mr"},
	{"-j", "res", "show", "pd"}, {"res", "show", "pd"},
	{"-j", "res", "show", "ctx"}, {"res", "show", "ctx"},
	{"-j", "res", "show", "cm_id"}, {"-j", "res", "show", "srq"},
	{"res", "show", "qp", "link", "rxe0/1", "lqpn", "17"}, {"res", "show", "qp", "link", "rxe1"},
	{"-j", "res", "show", "qp", "state", "RTS", "type", "RC"}, {"res", "show", "cq", "dev", "rxe1"},
	{"res", "show", "pd", "pdn", "1"},
}

// TestRes: after ibv_rc_pingpong traffic, with its QPs alive, grdma res
// prints what rdma resource prints (text; JSON parsed, in key order).
func TestRes(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	addRxe(t, "rxe1", "veth1")
	gid := strconv.Itoa(ipv4GID(t, "rxe0", rxeAddr))

	// A pair exchanging traffic on rxe0, frozen with SIGSTOP once packets
	// flowed, so that rdma and grdma see the same PSNs; a server waiting
	// on rxe1 (its QP in INIT).
	sentBefore := sentPackets(t, "rxe0")
	args := []string{"-d", "rxe0", "-g", gid, "-n", "100000000"}
	server := startTool(t, layout.IbvRcPingpong, args...)
	if !eventually(20*time.Second, func() bool { return listening(0x4853) }) {
		t.Fatal("ibv_rc_pingpong server never listened")
	}
	client := startTool(t, layout.IbvRcPingpong, append(args, "127.0.0.1")...)
	if !eventually(20*time.Second, func() bool { return sentPackets(t, "rxe0") > sentBefore+1000 }) {
		t.Fatal("no traffic between the ibv_rc_pingpong pair")
	}
	for _, c := range []*exec.Cmd{server, client} {
		if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	startTool(t, layout.IbvRcPingpong, "-d", "rxe1", "-g", "0", "-p", "18600")
	if !eventually(20*time.Second, func() bool { return listening(18600) }) {
		t.Fatal("the waiting ibv_rc_pingpong server never listened")
	}
	// Packets in flight when the pair stopped: wait until rxe0's counters
	// stand still, so that rdma and grdma see the same PSNs.
	if !eventually(20*time.Second, func() bool { return countersSettled(t, "rxe0") }) {
		t.Fatal("rxe0's packet counters never stood still after the pair was stopped")
	}

	var qps []map[string]any
	if err := json.Unmarshal([]byte(must(t, layout.Rdma, "-j", "res", "show", "qp").stdout), &qps); err != nil {
		t.Fatal(err)
	}
	live := map[string]int{}
	for _, q := range qps {
		if q["pid"] != nil {
			live[q["ifname"].(string)+" "+q["state"].(string)]++
		}
	}
	if live["rxe0 RTS"] != 2 || live["rxe1 INIT"] != 1 {
		t.Fatalf("user QPs by device and state: %v; want 2 in RTS on rxe0, 1 in INIT on rxe1", live)
	}

	for _, args := range resCommands {
		t.Run(strings.ReplaceAll(strings.Join(args, "_"), "/", "_"), func(t *testing.T) {
			if msg := compareOutputs(grdma(), args...); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// startTool starts a long-running tool, killed (even if stopped) when the
// test ends.
func startTool(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(name, args...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// sentPackets reads rxe's sent_pkts hardware counter of port 1.
func sentPackets(t *testing.T, dev string) uint64 { return hwCounter(t, dev, "sent_pkts") }

// hwCounter reads a hardware counter of port 1.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countersSettled reports whether dev sent and received no packet for
// 100 ms.
func countersSettled(t *testing.T, dev string) bool {
	t.Helper()
	sent, rcvd := hwCounter(t, dev, "sent_pkts"), hwCounter(t, dev, "rcvd_pkts")
	time.Sleep(100 * time.Millisecond)
	return hwCounter(t, dev, "sent_pkts") == sent && hwCounter(t, dev, "rcvd_pkts") == rcvd
}
