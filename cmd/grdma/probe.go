package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/spf13/cobra"
)

func (a *app) probeCommand() *cobra.Command {
	return &cobra.Command{
		Use: "probe DEV[/PORT] [gid-index N] [traffic] [count N]\n" +
			"  probe DEV[/PORT] [gid-index N] listen [[ADDR]:PORT] [pingpong | ud-pingpong] [size BYTES] [iters N] [timeout D] [from HOST[/PREFIX]...] [auth FILE]\n" +
			"  probe DEV[/PORT] [gid-index N] serve [[ADDR]:PORT] [size BYTES] [duration D] [peers N] [memory BYTES] [peer-memory BYTES] [pingpong] [iters N] [timeout D] [grace D] [from HOST[/PREFIX]...] [auth FILE]\n" +
			"  probe DEV[/PORT] [gid-index N] peer HOST[:PORT] [traffic | bw [write|send|read] | lat [write|send|read] | pingpong | ud-pingpong] [size BYTES] [iters N] [duration D] [timeout D] [auth FILE]\n" +
			"  probe DEV[/PORT] [gid-index N] peer HOST[:PORT] ping [count N] [interval D] [size BYTES|cycle] [timeout D] [auth FILE]\n" +
			"  probe [DEV[/PORT]] peer IP[:PORT] cm [traffic | bw [write|send|read] | lat [write|send|read]] [tos N] [size BYTES] [iters N] [duration D] [timeout D]\n" +
			"  probe [DEV[/PORT]] listen cm [ADDR][:PORT] [size BYTES] [timeout D] [from HOST[/PREFIX]...]\n" +
			"  probe [DEV[/PORT]] serve cm [ADDR][:PORT] [size BYTES] [duration D] [peers N] [memory BYTES] [peer-memory BYTES] [timeout D] [grace D] [from HOST[/PREFIX]...]\n" +
			"  probe [DEV[/PORT]] peer IP[:PORT] cm rping|ucmatose ...\n" +
			"  probe [DEV[/PORT]] listen cm rping|ucmatose ...\n" +
			"  probe [DEV[/PORT]] peer IP[:PORT] cm fabtests [size BYTES] [iters N] [timeout D]\n" +
			"  probe [DEV[/PORT]] listen cm fabtests [ADDR][:PORT] [size BYTES] [iters N] [timeout D]\n" +
			"  probe [DEV[/PORT]] peer IP[:PORT] cm perftest bw|lat write|send|read [size BYTES] [iters N] [tos N] [timeout D]\n" +
			"  probe [DEV[/PORT]] listen cm perftest bw|lat write|send|read [ADDR][:PORT] [size BYTES] [iters N] [timeout D]",
		Short: "Prove that a device can run an RC queue pair, and carry traffic, alone or with a peer host",
		Long: `Run the verbs path of an RDMA device port (1 unless given) through the kernel's
uverbs interface, without libibverbs: open the device, allocate a protection
domain, a completion queue and an RC queue pair, connect the queue pair to
itself (RESET, INIT, RTR, RTS) and confirm RTS with QUERY_QP. On RoCE the
queue pair's address is the GID the gid selector chooses (RoCE v2 IPv4
first) unless gid-index is given; on InfiniBand it is the port's LID.

With traffic, register a memory region and send through the queue pair:
a SEND into a posted receive, an RDMA WRITE, and an RDMA READ of what was
written, verifying every byte. Everything is torn down in order, also on
failure; an interrupted probe leaves nothing behind either.

Each step is printed with its time; a failure names the step, the errno
and its likely cause. With count, the probe runs N times (stopping at the
first failure) and the times are summarized as min, median and max.

Between two hosts: run "grdma probe DEV listen" on one; it waits for one
peer (TCP port 18515 unless given, as ibv_rc_pingpong and perftest), serves
the test that peer asks for, prints its own side and exits. On the other,
"grdma probe DEV peer HOST" connects (retrying a refused connection until
the timeout), exchanges queue pair numbers, PSNs, GIDs, MTUs and memory
keys, brings both queue pairs to RTS against each other (path MTU: the
smaller active MTU) and runs the test:
  (none)    the control path only, both queue pairs in RTS
  traffic   SEND, RDMA WRITE and RDMA READ across, every byte verified
  bw OP     streaming OP (write, send or read; write by default) with 128
            requests outstanding: Gb/s of payload and millions of messages
            a second; size 65536 and iters 5000 by default, or duration D
  lat OP    ping-pong, one message outstanding: latency min, median,
            average, p99 and max in microseconds (one way for write and
            send, as perftest; a whole READ for read); size 2, iters 1000.
            The client polls its queue, as does the server of write and
            send: a CPU each while it runs (on rxe, whose work runs in the
            kernel, every 8th empty poll yields the CPU to it)
  pingpong  ibv_rc_pingpong's exchange and loop: the peer is an
            "ibv_rc_pingpong -g N" server (size 4096, iters 1000, as its
            defaults; they must equal its -s and -n)
  ud-pingpong
            ibv_ud_pingpong's exchange and loop over UD queue pairs and
            address handles: the peer is an "ibv_ud_pingpong -g N" server
            (size 1024, iters 1000, its defaults; size is the message
            without the 40-byte GRH the receive buffer keeps in front of
            it, at most the port's active MTU)
The listening side also answers an ibv_rc_pingpong client ("ibv_rc_pingpong
-g N HOST"), with its own size (4096 unless given) and iters; with
ud-pingpong, an ibv_ud_pingpong client instead (size 1024 unless given). Both sides choose their GID with
the gid selector unless gid-index is given; ports that cannot reach each
other (InfiniBand and Ethernet, RoCE v1 and v2, IPv4 and IPv6 GIDs) fail at
once, naming both sides. timeout (10s) bounds the connection and every wait
on the peer; a peer that fails, goes away or is interrupted fails this side
too, naming the step. Nothing is left behind on either side.

The listener binds every address of both families unless ADDR is given,
and has no authentication: the first valid peer wins. Connections that
send anything else (a port scan, a health check, garbage, a test over its
limits) are logged, told why when they are grdma, and closed, and it
keeps waiting; once a peer is served it stops listening. from restricts
who may connect: addresses, networks (ADDR/PREFIX) and host names. The
listener decides what it pins: a peer may ask for messages of at most its
size (16 MiB unless given: 64 MiB pinned at most, none for the control
path alone), reported as pinned_bytes; a test may hold it for its
declared duration, or its iterations at a slow pace, plus the timeout,
and is then cut off.

serve is a responder, for a fleet whose nodes test each other at any
time: one device open, any number of peers served at once, each as listen
serves its one, until SIGINT or SIGTERM (running tests then get grace, 5s,
to finish, and are cut off after it). Its limits, each reported in a
refusal: peers (16) at once, memory (256 MiB) pinned by them together,
peer-memory (4 x size) and size (16 MiB) for one, duration (1h) of a test.
A peer over peers or memory is answered busy and asks again until its
timeout; one over a peer's limits is refused. On rxe it also answers UD
pings (ping, and the exporter's pingmesh) on one UD queue pair for every
prober that asked its TCP port for the queue pair's address. It prints one line per peer:
who, the test, PASS or FAIL with the figures, the time and the memory it
pinned (one JSON object a line with -j), and one per connection refused.
auth FILE (at least 16 bytes, mode 600) is a shared secret: the responder
or listener challenges each grdma client, which proves it holds the same
file's secret (an HMAC; the secret never crosses the wire); ibv_rc_pingpong
clients are then refused. Give the same auth FILE to probe DEV peer HOST.
Like listen, serve binds every address of both families unless ADDR is
given; without from and auth it serves anyone that reaches the port,
within its limits (what each peer may pin, how many at once): on a shared
network give it the fabric's address, from and auth.

ping sends UD pings to the responder at HOST ("grdma probe DEV serve"
there), one every interval (1s) until count probes or Ctrl-C, as ping
does: one line per probe with its size, its round trip and the network's
share of it (rtt less the responder's delay, which the responder reports
in a second reply: R-Pingmesh's two-ACK exchange; a probe of 64 bytes or
less gets one reply carrying it), then the loss and
min/avg/max/mdev. The responder's UD queue pair (its number and Q_Key) is
asked of its TCP port once, which registers this side's; sizes cycle
through 64, 512, 1024 and the path MTU unless size is given. timeout
(2s) bounds each probe's wait and the question. Times are software (the
process's clock when a completion is polled; rxe has no completion
timestamps), as the output says. Exit status 0 when a reply came.

cm connects over the RDMA Connection Manager, by IP address, the way
librdmacm applications (perftest -R, rping, libfabric's verbs provider,
NVMe-oF) connect: the client resolves the address and the route (the CM
picks the device, port, source GID, RoCE version and ToS: DEV may be left
out, and if given must be the one the CM picks), the queue pair numbers
travel in the CM's REQ and REP (port 18515 in the CM's TCP port space
unless given) and every queue pair transition takes the kernel's
INIT_QP_ATTR answer. The output adds what the CM chose (an rdma_cm line;
"cm" in JSON): the device and port, the GID index and GID, the RoCE
version, path MTU, ToS and hop limit, and the time of each CM step
(resolve address, resolve route, connect, establish, disconnect).
tos N sets the connection's ToS instead of the port's default (grdma cm
set). The REQ carries the test (a 32-byte hello in its private data); the
connect test needs nothing else. traffic, bw and lat need the peer's
memory key and their done and verdict messages: the server offers, in
its REP, a TCP port of its own for that one peer (on the address the
request came to) and a random token the client must present there, so a
firewall passing only RoCE fails those tests at establish, naming the
port. "listen cm" waits for one peer over the CM (its device is the one
the request arrives on when DEV is left out); "serve cm" also answers
probes over the CM on the responder's device (without DEV: the one the CM
binds ADDR's connections to), under the same limits (a
peer over peers or memory is rejected busy, one over a peer's limits
refused, the reason in the REJ's private data); auth cannot be proven
over the CM, so give it without cm. Failures name the CM event:
ADDR_ERROR (no RDMA device for the address: the netdev the route leaves
through), REJECTED reason 8 (nothing listens on PORT at IP) or 28
(refused), UNREACHABLE and timeouts (with the RoCE version and ToS used).
Nothing is left behind: no CM ID (rdma res show cm_id) on either side.
rping and ucmatose after cm speak those tools' protocols (rdmacm-utils),
as client (peer IP[:PORT] cm MODE) or as server for one client (listen
cm MODE [ADDR][:PORT]), with their default ports (rping 7174, ucmatose
7471) and words count N, size N, tos N (a client's) and timeout D.
"cm rping" against rping -s: count pings (5) of size bytes (64, 26 to
65535; at most the server's -S), each read by the server (RDMA READ) and
written back (RDMA WRITE) and compared, as rping -c -V does; "listen cm
rping" serves rping -c -a IP -C N -S N -v -V until it disconnects (or
count pings). "cm ucmatose" against ucmatose's server: count messages
(10, at most 1024) of size bytes (100) received, then as many sent back;
"listen cm ucmatose" serves ucmatose -s IP -C N -S N. The peer is not
trusted: a message of another length, a buffer over 65535 bytes or data
written back that differ fail the run, naming what the peer did; its
data (the first ping's, shown as the peer's data) is printed escaped.
"cm perftest bw|lat write|send|read" speaks perftest's -R protocol
(port 18515) against the servers of ib_write_bw -R, ib_send_bw -R,
ib_read_bw -R, ib_write_lat -R, ib_send_lat -R and ib_read_lat -R, and
"listen cm perftest bw|lat OP" serves their clients (ib_write_bw -R IP
...); size (bw 65536, lat 2; at most 8 MiB) and
iters (bw write 5000, others 1000) default to perftest's and must be the
same on both sides, as between two perftests. The results are grdma's
own bw (Gb/s) and lat (µs percentiles, one way); a server also shows the
bw report the perftest client sends. grdma announces perftest 6.06; the
peer's version (5.70 or later), cycle buffer (at most 1 MiB), cache line
(4096) and report are checked. As a server grdma grants a READ client
the outstanding READs it asks, up to 16 (perftest's out_reads) and the
device's max_qp_rd_atom.
"cm fabtests" speaks libfabric's fi_pingpong protocol (-e msg -p verbs):
a TCP control connection to port 47592 carries the server's endpoint
name (its RDMA CM address; grdma's CM listens on the control port's
number), a sync, and the client's count; the messages go over an RC
connection made through the RDMA CM. "peer IP cm fabtests" runs against
"fi_pingpong -e msg -p verbs -S N -I N", and "listen cm fabtests" serves
"fi_pingpong -e msg -p verbs -S N -I N IP". size (64, at most 65535) and
iters (10) default to fi_pingpong's; fi_pingpong sends its sizes nowhere,
so -S and -I must be given and be the same on both sides. A server takes
messages up to 65535 bytes and answers each with one as long (another
size than size, when given, fails). A server's endpoint name over 128
bytes, or not an IPv4 or IPv6 socket address, is refused. The result is
the round trip per message; fi_pingpong's usec/xfer is half of it.
A TCP client of the control port that closes its connection, or writes
on it, before it connects through the RDMA CM (a port scan, a health
check) is dropped and the port serves the next; one that stays silent
holds it until timeout.

rxe (Soft-RoCE) is probed fully; mlx5 up to a queue pair in RTS (no
traffic); other drivers up to the protection domain, then reported as not
supported.

Exit status: 0 every step passed (on both sides, between hosts), 1 a step
failed (or the driver is not supported), 2 the command line was wrong.`,
		Example: `  grdma probe rxe0
  grdma probe rxe0/1 traffic
  grdma probe mlx5_0 gid-index 3
  grdma -j probe rxe0 traffic count 200
  grdma probe rxe0 listen 10.0.0.1 from 10.0.0.0/24   # on host A
  grdma -j probe rxe0 peer hosta bw write      # on host B
  grdma probe rxe0 peer 10.0.0.1:18600 lat send iters 10000
  grdma probe rxe0 peer hosta pingpong         # against ibv_rc_pingpong -g 1
  grdma probe rxe0 peer hosta ud-pingpong      # against ibv_ud_pingpong -g 1
  grdma probe rxe0 listen ud-pingpong          # for ibv_ud_pingpong -g 1 HOST
  grdma probe rxe0 peer hosta ping count 10    # against probe rxe0 serve on hosta
  grdma -j probe rxe0 peer hosta ping count 4 size 1024 interval 200ms
  grdma -j probe rxe0 serve 10.0.0.1 peers 32 from 10.0.0.0/24 auth /etc/grdma/probe.key
  grdma probe listen cm 10.0.0.1               # over the RDMA CM, on host A
  grdma probe peer 10.0.0.1 cm bw write        # on host B: the CM picks the device
  grdma -j probe peer 10.0.0.1 cm tos 104`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "help" {
				return cmd.Help()
			}
			req, err := grammar.ParseProbe(args)
			if err != nil {
				return cmdline.WithHelp(err, "grdma probe help")
			}
			return a.probe(req)
		},
	}
}

func (a *app) probe(req grammar.ProbeRequest) error {
	fsys, err := a.sysfs("probe")
	if err != nil {
		return err
	}
	req.Options.Sysfs = fsys
	// The busy-polling baseline of BENCHMARKS.md's responder figures.
	req.Options.Poll = os.Getenv("GRDMA_PROBE_POLL") == "1"
	// Ctrl-C stops the probe between steps; the teardown still runs.
	ctx, stop := interruptOnce()
	defer stop()
	if req.TwoHost() {
		return a.probePeer(ctx, req)
	}
	series := verbsprobe.Repeat(ctx, req.Options, req.Count)
	last := series.Last

	p := a.printer()
	render.ProbeResult(p, last, series, req.Count)
	if err := p.Flush(); err != nil {
		return err
	}
	return verbsprobe.Outcome(last, series.Runs, req.Count)
}

// interruptOnce returns a context done at the first SIGINT or SIGTERM,
// which stops catching them: a second Ctrl-C kills a probe stuck in a
// kernel call.
func interruptOnce() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-signals:
		case <-ctx.Done():
		}
		signal.Stop(signals) // before cancel: once ctx is done, the next one kills
		cancel()
	}()
	return ctx, cancel
}
