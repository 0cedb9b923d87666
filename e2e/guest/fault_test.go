//go:build e2eguest

package guest

// Faults planted on fleet nodes, each removed when the test (or subtest)
// that planted it ends. They act on the node's own eth0, never on the
// switch: tc qdiscs for delay, loss and rate (netem), nftables for drops,
// `rdma link delete` for a dead RDMA device. One egress fault per node at a
// time: Netem, or any number of NetemTo.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// faultIfb is the ifb device NetemIngress shapes a node's incoming traffic
// on (the ifb module makes ifb0 and ifb1 itself: this one is the fault's).
const faultIfb = "e2e-ifb"

// on is the node driven for test t: what fails fails t, the commands are
// tagged with t's name in the agent's log.
func (nd *node) on(t *testing.T) *peerHost {
	return &peerHost{t: t, c: nd.c.WithTag(t.Name()), name: nd.Name}
}

// shell runs a script on the node for t, which it fails if the script does.
func (nd *node) shell(t *testing.T, script string) result {
	t.Helper()
	return nd.on(t).Must(layout.Sh, "-c", script)
}

// loadFaultModules loads fault modules on the node (they are not loaded
// at boot, and the guest cannot auto-load them).
func (nd *node) loadFaultModules(t *testing.T, modules ...string) {
	t.Helper()
	nd.on(t).Must(layout.LoadMod, modules...)
}

// Netem impairs everything the node sends on eth0: args are netem's, e.g.
// "delay", "20ms" or "loss", "30%" or "rate", "4mbit". Every path from
// this node is affected (and round trips to it: ping RTTs to it grow by a
// delay).
func (nd *node) Netem(t *testing.T, args ...string) {
	t.Helper()
	nd.loadFaultModules(t, "sch_netem")
	netdev := nd.f.Netdev
	nd.on(t).Must(layout.Tc, append([]string{"qdisc", "add", "dev", netdev, "root", "handle", "1:", "netem"}, args...)...)
	t.Cleanup(func() { nd.on(t).Must(layout.Tc, "qdisc", "del", "dev", netdev, "root") })
}

// NetemIngress impairs everything the node receives on eth0 (redirected to
// an ifb device whose egress runs netem with args): with Netem, a node
// slow in both directions.
func (nd *node) NetemIngress(t *testing.T, args ...string) {
	t.Helper()
	nd.loadFaultModules(t, "ifb", "sch_ingress", "cls_matchall", "act_mirred", "sch_netem")
	netdev := nd.f.Netdev
	nd.shell(t, fmt.Sprintf(`set -e
%[1]s link add %[2]s type ifb
%[1]s link set %[2]s up
%[3]s qdisc add dev %[4]s handle ffff: ingress
%[3]s filter add dev %[4]s parent ffff: matchall action mirred egress redirect dev %[2]s
%[3]s qdisc add dev %[2]s root netem %[5]s`, layout.IP, faultIfb, layout.Tc, netdev, strings.Join(args, " ")))
	t.Cleanup(func() {
		nd.shell(t, fmt.Sprintf("%s qdisc del dev %s ingress && %s link del %s", layout.Tc, netdev, layout.IP, faultIfb))
	})
}

// NetemTo impairs only what the node sends to dst (one direction of one
// path): a prio qdisc whose band 4 and up are fed only by a u32 filter on
// the destination, each band with its own netem. Several destinations may
// be impaired at once (up to 13), each differently.
func (nd *node) NetemTo(t *testing.T, dst *node, args ...string) {
	t.Helper()
	nd.loadFaultModules(t, "sch_prio", "cls_u32", "sch_netem")
	tc, netdev := layout.Tc, nd.f.Netdev
	// The default priomap sends all traffic to bands 0-2; bands 3..15
	// (classes 1:4..1:10, in hex) carry only what a filter steers there.
	r := nd.shell(t, fmt.Sprintf(`set -e
%[1]s qdisc show dev %[2]s | grep -q '^qdisc prio 1: root' ||
	%[1]s qdisc add dev %[2]s root handle 1: prio bands 16 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
for b in 4 5 6 7 8 9 a b c d e f 10; do
	%[1]s qdisc show dev %[2]s | grep -q " parent 1:$b " && continue
	%[1]s qdisc add dev %[2]s parent 1:$b netem %[3]s
	%[1]s filter add dev %[2]s parent 1: protocol ip prio 1 u32 match ip dst %[4]s/32 flowid 1:$b
	echo $b
	exit 0
done
echo "no free band on %[2]s" >&2
exit 1`, tc, netdev, strings.Join(args, " "), dst.Addr))
	band := strings.TrimSpace(r.stdout)
	t.Cleanup(func() {
		// Without its netem the band is a plain FIFO; the prio qdisc and
		// its filters go with the last one.
		nd.shell(t, fmt.Sprintf(`set -e
%[1]s qdisc del dev %[2]s parent 1:%[3]s
%[1]s qdisc show dev %[2]s | grep -q ' parent 1:' || %[1]s qdisc del dev %[2]s root`, tc, netdev, band))
	})
}

// ImpairPath impairs the path between a and b in both directions
// (NetemTo on each end).
func (f *fleet) ImpairPath(t *testing.T, a, b *node, args ...string) {
	t.Helper()
	a.NetemTo(t, b, args...)
	b.NetemTo(t, a, args...)
}

// nftFault adds an nftables table (named for the fault) on the node and
// deletes it when t ends.
func (nd *node) nftFault(t *testing.T, table, body string) {
	t.Helper()
	nd.loadFaultModules(t, "nf_tables")
	ruleset := fmt.Sprintf("table inet %s {\n%s\n}\n", table, body)
	nd.on(t).Must(layout.Sh, "-c", `printf '%s' "$1" | `+layout.Nft+` -f -`, "sh", ruleset)
	t.Cleanup(func() { nd.on(t).Must(layout.Nft, "delete", "table", "inet", table) })
}

// RoCEPort is RoCE v2's UDP destination port.
const RoCEPort = 4791

// DropRoCE black-holes the node for RoCE: every UDP packet to port 4791
// it sends or receives is dropped, while TCP (the probes' exchange, the
// agent) and ping still work.
func (nd *node) DropRoCE(t *testing.T) {
	t.Helper()
	nd.nftFault(t, "e2e_roce", fmt.Sprintf(`	chain in { type filter hook input priority 0; udp dport %[1]d drop; }
	chain out { type filter hook output priority 0; udp dport %[1]d drop; }`, RoCEPort))
}

// DropLarger drops the IP packets longer than size bytes (IP header
// included) between the node and peer, both ways, on the node: the other
// paths of both keep every size. Lengths are as netfilter sees them: UDP
// (RoCE) and ping as on the wire; TCP may still be one GSO packet on the
// way out or a GRO-merged one on the way in. The bed's own agent
// connections (TCP layout.PeerAgentPort) pass whatever their size: the
// driver must still reach the nodes, and an agent's long reply lost
// failed a scenario with "no reply: i/o timeout".
func (nd *node) DropLarger(t *testing.T, peer *node, size int) {
	t.Helper()
	nd.nftFault(t, "e2e_size_"+strconv.Itoa(peer.N), fmt.Sprintf(`	chain in { type filter hook input priority 0; tcp sport %[3]d accept; tcp dport %[3]d accept; ip saddr %[1]s meta length > %[2]d drop; }
	chain out { type filter hook output priority 0; tcp sport %[3]d accept; tcp dport %[3]d accept; ip daddr %[1]s meta length > %[2]d drop; }`,
		peer.Addr, size, layout.PeerAgentPort))
}

// DeleteRxe deletes the node's rxe device (`rdma link delete`): the node is
// up, but has no RDMA. When t ends the device is made again, and the
// cleanup waits for its port to be ACTIVE with the IPv4 GID.
func (nd *node) DeleteRxe(t *testing.T) {
	t.Helper()
	nd.on(t).Must(layout.Rdma, "link", "delete", nd.f.Dev)
	t.Cleanup(func() {
		if err := nd.readyRxe(); err != nil {
			t.Errorf("%s: making %s again: %v", nd.Name, nd.f.Dev, err)
		}
	})
}

// unplanted removes what a fault leaves on a node (qdiscs with a handle,
// the ifb device, nftables tables) and says what it found: nothing when
// the fault helpers cleaned up after themselves.
func (nd *node) unplanted() error {
	tc, ip, netdev := layout.Tc, layout.IP, nd.f.Netdev
	r, err := nd.exec(rxeWait, fmt.Sprintf(`q=$(%[1]s qdisc show dev %[2]s | grep -v '^qdisc [^ ]* 0: ')
if [ -n "$q" ]; then
	echo "qdiscs on %[2]s: $q"
	%[1]s qdisc del dev %[2]s root 2>/dev/null
	%[1]s qdisc del dev %[2]s ingress 2>/dev/null
fi
if %[3]s link show %[4]s >/dev/null 2>&1; then
	echo "%[4]s exists"
	%[3]s link del %[4]s
fi
if grep -q '^nf_tables ' /proc/modules; then
	n=$(%[5]s list tables)
	if [ -n "$n" ]; then
		echo "nftables: $n"
		%[5]s flush ruleset
	fi
fi
exit 0`, tc, netdev, ip, faultIfb, layout.Nft))
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(r.stdout + r.stderr); s != "" {
		return fmt.Errorf("%s", s)
	}
	return nil
}
