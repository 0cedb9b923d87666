//go:build !grdma_noprometheus

package main

import (
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/internal/manpage"
	"github.com/spf13/cobra"
)

//go:generate go test -run ^TestManPages$ -update

// grdma's man pages, section 8, are generated from the command tree by
// internal/manpage: grdma(8) and grdma-OBJECT(8) for every object. What a
// command's help does not say comes from the tables below. `make man` (or
// go generate) rewrites man/; TestManPages fails when man/ is stale.

// manSection is the manual section of every page.
const manSection = "8"

// manPages renders every page, by file name, dated date (YYYY-MM-DD).
func manPages(root *cobra.Command, date string) map[string][]byte {
	return manSupplement.Pages(root, date)
}

// manSupplement is what grdma's command tree does not say.
var manSupplement = manpage.Supplement{
	Program:   "grdma",
	Section:   manSection,
	Manual:    "System Administration",
	Generator: "grdma (TestManPages, make man)",
	RootShort: "manage Linux RDMA devices",
	RootSynopsis: []string{
		`[\fIOPTIONS\fR] \fIOBJECT\fR [\fICOMMAND\fR [\fIARGS\fR]]`,
		`[\fIOPTIONS\fR] \fB\-b\fR \fIFILE\fR`,
		`\fB\-V\fR`,
	},
	RootExamples: manRootExamples,
	RootSections: ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nPrint the help of grdma, or of an object (also \\fBgrdma\\fR \\fIOBJECT\\fR \\fBhelp\\fR).\n" +
		".SH ENVIRONMENT\n.TP\n.B GRDMA_SYSFS_ROOT\nThe default of \\fB\\-\\-sysfs\\-root\\fR.\n" +
		".TP\n.B GRDMA_PROC_ROOT\nThe default of \\fB\\-\\-proc\\-root\\fR.\n" +
		".SH FILES\n" +
		".TP\n.I /sys/class/infiniband\nRDMA devices and ports: rates, GID tables, counters.\n" +
		".TP\n.I /sys/class/net\nnetwork devices, for RoCE ports and link add.\n" +
		".TP\n.I /dev/infiniband/uverbs*\nthe verbs devices (port MTUs, probe).\n" +
		".TP\n.I /run/netns\nnamed network namespaces, for \\-n and dev set DEV netns.\n",
	GlobalOptionsNote: "Accepted anywhere on the command line, as with \\fBrdma\\fR(8).\n",
	ExitStatus: map[int]string{
		0: "Success.",
		1: "The operation failed: the kernel refused it, a device or port was not found, a file could not be read. A message on standard error says what went wrong and, where it can, what to do.",
		2: "The command line was wrong: an unknown object, command or keyword, a missing or malformed argument, an invalid name. Nothing was changed.",
	},
	ExitNotes:    manExitNotes,
	Examples:     manExamples,
	SeeAlso:      manSeeAlso,
	SeeAlsoEvery: []string{"rdma(8)"},
	Verbs:        grammarVerbs,
}

// manExamples explain the examples of the commands' help, by command line.
// An example without an entry (and without a "# comment") is shown alone.
var manExamples = map[string]string{
	// dev
	"grdma dev":                                    "List the RDMA devices: index, name, node type, protocol and GUIDs.",
	"grdma -j dev show rxe0":                       "Show device rxe0 as JSON, with the keys rdma -j uses.",
	"grdma -d dev":                                 "Add adaptive moderation and the device capability flags to the listing.",
	"grdma dev set rxe0 name rxe_a":                "Rename device rxe0 to rxe_a.",
	"grdma dev set rxe0 netns blue":                "Move device rxe0 into the network namespace blue (/run/netns/blue); needs sys set netns exclusive first.",
	"grdma dev set mlx5_0 adaptive-moderation on":  "Turn adaptive interrupt moderation on for mlx5_0.",
	"grdma link":                                   "List every port of every device: state, physical state and netdev.",
	"grdma -j link show rxe0/1":                    "Show port 1 of rxe0 as JSON.",
	"grdma link show rxe0":                         "Show all ports of rxe0 (rdma requires DEV/PORT here).",
	"grdma link add rxe0 type rxe netdev eth0":     "Create the Soft-RoCE device rxe0 on top of eth0 (loads nothing: rdma_rxe must be loaded or loadable).",
	"grdma link delete rxe0":                       "Remove the software device rxe0.",
	"grdma sys":                                    "Show the subsystem settings: netns mode, privileged Q_Key mode, monitor support, copy-on-fork.",
	"grdma -j sys":                                 "The same as a JSON object (rdma -j sys prints text).",
	"grdma sys set netns exclusive":                "Let each network namespace see only its own RDMA devices, so that devices can be moved with dev set DEV netns.",
	"grdma sys set privileged-qkey on":             "Allow only privileged users to use controlled Q_Keys.",
	"grdma port":                                   "List every port with link layer, width, speed, rate and MTU.",
	"grdma -j port show mlx5_0/1":                  "Show port 1 of mlx5_0 as JSON.",
	"grdma -d port show rxe0":                      "Show the ports of rxe0, adding the maximum MTU.",
	"grdma gid":                                    "List the populated GID table entries of every port, as show_gids does.",
	"grdma gid show mlx5_0/1 type v2 ipv4":         "Only the RoCE v2 GIDs holding an IPv4 address, of port 1 of mlx5_0.",
	"grdma -j gid show rxe0":                       "The GIDs of rxe0 as JSON.",
	"grdma stat":                                   "Print every hardware counter of every port.",
	"grdma -j stat show link rxe0/1":               "The counters of port 1 of rxe0 as JSON.",
	"grdma stat show -i 1s -c 10":                  "Print per-second rates of every counter, ten times, one second apart.",
	"grdma -j stat show link mlx5_0/1 -i 5s":       "Rates of port 1 of mlx5_0 every five seconds, one JSON object per line, until interrupted.",
	"grdma stat mode supported":                    "List the optional counters each port supports.",
	"grdma stat qp set link mlx5_0/1 auto type on": "Bind new QPs to counters automatically, one counter per QP type.",
	"grdma monitor":                                "Print device and netdev events until interrupted.",
	"grdma res":                                    "Count the resources (QPs, CQs, MRs, ...) of every device.",
	"grdma -j res show rxe0":                       "The counts of rxe0 as JSON.",
	"grdma res show qp":                            "List every queue pair.",
	"grdma res show mr pid 4242":                   "The memory regions of process 4242.",
	"grdma probe rxe0":                             "Bring an RC queue pair of rxe0 port 1 to RTS and tear it down, printing each step.",
	"grdma probe rxe0/1 traffic":                   "Also send, write and read through it, verifying the data.",
	"grdma probe mlx5_0 gid-index 3":               "Probe mlx5_0 with GID index 3 as the queue pair's address.",
	"grdma -j probe rxe0 traffic count 200":        "Run the traffic probe 200 times and summarize the step times as JSON.",
	"grdma check":                                  "Run every health check and print a PASS/WARN/FAIL table.",
	"grdma -j check gdr":                           "Only the GPUDirect RDMA checks, as JSON.",
	"grdma check cm":                               "Check that connections by IP address go through the right port, with the RoCE version of its default mode.",
	"grdma cm":                                     "Show the RDMA CM's default RoCE mode and ToS of every port.",
	"grdma -j cm show mlx5_0/1":                    "Those of port 1 of mlx5_0, as JSON.",
	"grdma cm set mlx5_0/1 roce-mode v2":           "Make the CM pick RoCE v2 GIDs on port 1 of mlx5_0 (cma_roce_mode -d mlx5_0 -p 1 -m 2).",
	"grdma cm set mlx5_0/1 tos 106":                "Give connections that set no ToS of their own DSCP 26 and ECN-capable transport (26×4 + 2), as cma_roce_tos -t 106 does.",

	"grdma stat set link mlx5_0/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts": "Enable two optional congestion-control counters on port 1 of mlx5_0.",
	"grdma stat export --textfile /var/lib/node_exporter/textfile/rdma.prom":      "Write all counters and port states for node_exporter's textfile collector.",
	"NCCL_IB_GID_INDEX=$(grdma gid show mlx5_0/1 type v2 ipv4 netdev eth0 -q)":    "Pick the GID index an NCCL job should use: RoCE v2, IPv4, on eth0.",
	"grdma res show qp link mlx5_0/1 state RTS type RC,UD":                        "The queue pairs of port 1 of mlx5_0 that are in RTS and of type RC or UD.",
	"grdma -j res show cq dev rxe0 cqn 1":                                         "Completion queue 1 of rxe0, looked up directly.",
	"grdma -dd res show qp lqpn 1-100":                                            "Queue pairs 1 to 100, with driver-internal ones and driver attributes.",
	"grdma check ports min-rate 100 mtu 4096 gid-type v2 netdev-mtu 9000":         "Check that every port is up at 100 Gb/s or more, with a 4096-byte MTU, a RoCE v2 GID and a 9000-byte netdev MTU.",
	"grdma check devices device-count 8 -q && echo healthy":                       "Check quietly that there are eight RDMA devices, each with its uverbs device.",
	"grdma check ports gid-index 3 type v2 ipv4":                                  "Check that the RoCE v2 IPv4 GID a job would choose is at index 3 on every port (the NCCL_IB_GID_INDEX the fleet is configured with).",
	"grdma check --textfile /var/lib/node_exporter/textfile/grdma_check.prom":     "Also write the results as Prometheus gauges.",
	"grdma completion bash > /usr/share/bash-completion/completions/grdma":        "Install the bash completion for all users.",
	"grdma completion zsh > \"${fpath[1]}/_grdma\"":                               "Install the zsh completion in the first directory of $fpath.",
	"grdma completion fish > ~/.config/fish/completions/grdma.fish":               "Install the fish completion for the current user.",
	"grdma -n blue dev":        "List the RDMA devices of network namespace blue.",
	"grdma -j -p link":         "Every port as indented JSON.",
	"grdma -b commands.txt -f": "Run the commands of commands.txt, one per line, going on after a failure.",
	"grdma -V":                 "Print the version and the commit it was built from.",
}

// manRootExamples are grdma(8)'s examples (the root command has none).
const manRootExamples = `  grdma dev
  grdma -j -p link
  grdma -n blue dev
  grdma -b commands.txt -f
  grdma -V`

// manExitNotes add to the exit statuses of a command, by status.
var manExitNotes = map[string]map[int]string{
	"monitor": {
		0: "With --count N, after N events. Without it, grdma listens until it is interrupted and is ended by the signal (a shell reports 130 after Ctrl-C).",
		2: "Also when the kernel sends no RDMA netlink events: \"monitor needs Linux 6.13 or newer\".",
	},
	"stat": {0: "With -i and no -c, grdma prints rates until it is interrupted and is ended by the signal (a shell reports 130 after Ctrl-C)."},
}

// manSeeAlso are the related pages of each command, besides grdma(8),
// the other grdma pages and rdma(8).
var manSeeAlso = map[string][]string{
	"grdma":   {"ip-netns(8)"},
	"dev":     {"rdma-dev(8)", "ip-netns(8)"},
	"link":    {"rdma-link(8)", "ip-link(8)"},
	"sys":     {"rdma-system(8)"},
	"stat":    {"rdma-statistic(8)"},
	"res":     {"rdma-resource(8)"},
	"port":    {"rdma-link(8)", "ibv_devinfo(1)", "ibstatus(8)"},
	"gid":     {"ibv_devinfo(1)"},
	"probe":   {"ibv_devinfo(1)", "ibv_rc_pingpong(1)"},
	"monitor": {"rdma-dev(8)", "rdma-link(8)"},
	"cm":      {"rdma_cm(7)", "rping(1)"},
}

// grammarVerbs lists the verbs of object's grammar, so that "a | b" in a
// synopsis splits into verbs.
func grammarVerbs(object string) []string {
	if g := grammar.Object(object); g != nil {
		return g.VerbNames()
	}
	return nil
}
