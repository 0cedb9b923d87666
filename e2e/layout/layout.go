// Package layout names the paths inside the e2e QEMU guest, in one place, so
// the host harness that builds the initramfs and the guest tests that exec
// the tools agree on them.
package layout

import "strconv"

const (
	// Grdma is the grdma under test (bin/grdma from `make build`).
	Grdma = "/bin/grdma"
	// GrdmaPrometheus is the complete build (bin/grdma-prometheus) that
	// Grdma, built without the Prometheus packages, execs for exporter,
	// stat export and check --textfile.
	GrdmaPrometheus = "/bin/grdma-prometheus"
	// IP and Rdma are iproute2's tools. Call them by full path: Debian's
	// static busybox shell runs its own `ip` applet before $PATH.
	IP   = "/usr/sbin/ip"
	Rdma = "/usr/bin/rdma"
	// IbvDevinfo and IbvRcPingpong come from ibverbs-utils, with the rxe
	// provider from ibverbs-providers.
	IbvDevinfo    = "/usr/bin/ibv_devinfo"
	IbvRcPingpong = "/usr/bin/ibv_rc_pingpong"
	// The perftest tools (Debian's perftest), the reference for traffic
	// between the two guests of the pair.
	IbWriteBw  = "/usr/bin/ib_write_bw"
	IbWriteLat = "/usr/bin/ib_write_lat"
	IbReadBw   = "/usr/bin/ib_read_bw"
	IbReadLat  = "/usr/bin/ib_read_lat"
	IbSendBw   = "/usr/bin/ib_send_bw"
	IbSendLat  = "/usr/bin/ib_send_lat"
	// IbvUdPingpong (ibverbs-utils): UD send/recv between two hosts.
	IbvUdPingpong = "/usr/bin/ibv_ud_pingpong"
	// Strace is the host's strace, for capturing netlink traffic.
	Strace = "/usr/bin/strace"
	// Tc and Nft plant network faults: iproute2's tc (call it by full path:
	// busybox sh runs its own tc applet first) and nftables' nft. Their
	// kernel modules are loaded on demand (FaultModules).
	Tc  = "/usr/sbin/tc"
	Nft = "/usr/sbin/nft"
	// The RDMA CM tools of rdmacm-utils, over librdmacm (the rdma_ucm
	// module gives them /dev/infiniband/rdma_cm on a linked guest).
	Rping      = "/usr/bin/rping"
	Ucmatose   = "/usr/bin/ucmatose"
	RdmaServer = "/usr/bin/rdma_server"
	RdmaClient = "/usr/bin/rdma_client"
	Udaddy     = "/usr/bin/udaddy"
	// LibgccS is loaded at run time by pthread_exit (rping aborts without
	// it; ldd does not list it).
	LibgccS = "/lib/x86_64-linux-gnu/libgcc_s.so.1"
	// FiPingpong and FiInfo are libfabric's (libfabric-bin), with its
	// providers (verbs among them) built into libfabric.so.
	FiPingpong = "/usr/bin/fi_pingpong"
	FiInfo     = "/usr/bin/fi_info"
	// Hosts names every guest of the pair and of the fleet (librdmacm's
	// rdma_getaddrinfo fails with EAI_AGAIN without one).
	Hosts = "/etc/hosts"
	// Prometheus (Debian's prometheus) scrapes grdma exporter in the
	// guest, NodeExporter (prometheus-node-exporter) is the reference for
	// what its infiniband collector also reports; Promtool (prometheus)
	// checks deploy/'s alerting rules on the host.
	Prometheus   = "/usr/bin/prometheus"
	NodeExporter = "/usr/bin/prometheus-node-exporter"
	Promtool     = "/usr/bin/promtool"
	// Busybox provides the shell and the small tools (sh, sed, insmod...).
	Busybox = "/bin/busybox"
	Sh      = "/bin/sh"

	// LoadMod is a script: `loadmod NAME` insmods NAME and its dependencies
	// in order (skipping loaded ones). The kernel cannot auto-load modules:
	// ModprobeSysctl holds /bin/false unless a test changes it.
	LoadMod = "/sbin/loadmod"
	// NetBeat is a script: `netbeat IFACE` prints the link's counters every
	// 30 s (the bed's heartbeat) and says when its transmit side stalls.
	NetBeat        = "/sbin/netbeat"
	ModprobeSysctl = "/proc/sys/kernel/modprobe"
	// ModulesDir holds one file per loadable module name listing the .ko
	// files to insmod, dependencies first.
	ModulesDir = "/etc/e2e/modules"

	// GuestTest is the compiled e2e/guest test binary.
	GuestTest = "/usr/libexec/e2e/guest.test"
	// FakeGrdmaWrongKey is a shell script that behaves like rdma but renames
	// one JSON key, to prove that the comparison catches a broken grdma.
	FakeGrdmaWrongKey = "/usr/libexec/e2e/grdma-wrong-key"

	// Out is where a capture script writes; the host copies it back.
	Out = "/out"

	// Veth0 and Veth1 are the veth pair init creates and brings up.
	Veth0 = "veth0"
	Veth1 = "veth1"

	// The two-host topology: guests A and B on one Ethernet link. init
	// brings PairNetdev up with the guest's address when LinkConfig exists
	// (it holds "NETDEV ADDRESS/PREFIX HOSTNAME"; a fleet guest's is on
	// its 9p share instead, as e2e/link).
	LinkConfig = "/etc/e2e/link"
	PairNetdev = "eth0"
	PairPrefix = 24
	PeerA      = "10.10.0.1"
	PeerB      = "10.10.0.2"
	// PeerAName and PeerBName are their host names (in Hosts).
	PeerAName = "peer-a"
	PeerBName = "peer-b"
	// PeerAgentPort is where guest A's peer agent listens, on PeerA.
	PeerAgentPort = 7000
	// PeerAgentEnv makes the guest test binary serve as the peer agent on
	// the address it holds; PeerEnv tells the scenarios in B where it is.
	PeerAgentEnv = "E2E_PEER_AGENT"
	PeerEnv      = "E2E_PEER"

	// The fleet: N guests of one kernel on one switch, node 1 (the driver,
	// running the TestFleet* scenarios) and nodes 2..N (peer agents on
	// FleetAddr(i):PeerAgentPort). init brings FleetNetdev up with the
	// node's address and names the host FleetName(i).
	FleetNetdev = "eth0"
	FleetPrefix = 24
	FleetSubnet = "10.30.0."
	// FleetMax bounds the fleet (the /etc/hosts every image carries, the
	// switch's ports).
	FleetMax = 32
	// FleetAgentsEnv tells the driver how many guests there are and where
	// their agents listen: a comma list of FleetAddr(i):PeerAgentPort for
	// i = 2..N, in order.
	FleetAgentsEnv = "E2E_FLEET_AGENTS"
)

// FaultModules are the modules of the fault helpers (tc qdiscs, classifiers
// and actions, ifb, nftables), in the image but loaded only on demand:
// the guest cannot auto-load modules.
var FaultModules = []string{"sch_netem", "sch_prio", "sch_htb", "sch_tbf", "sch_ingress",
	"cls_u32", "cls_flower", "cls_basic", "cls_matchall", "act_mirred", "ifb", "nf_tables"}

// FleetAddr is node i's IPv4 address (nodes count from 1).
func FleetAddr(i int) string { return FleetSubnet + strconv.Itoa(i) }

// FleetName is node i's host name, in every guest's Hosts.
func FleetName(i int) string { return "node" + strconv.Itoa(i) }
