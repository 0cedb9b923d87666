package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/spf13/cobra"
)

// probeRequest is a parsed probe command line.
type probeRequest struct {
	target  devPort
	options verbsprobe.Options
	count   int
	// Between two hosts: listen (listenAddr) or peer (peerAddr).
	listen     bool
	listenAddr string
	peerAddr   string
	test       verbsprobe.Test
	timeout    time.Duration
}

// maxProbeCount bounds count: each probe takes milliseconds.
const maxProbeCount = 1_000_000

func (a *app) probeCommand() *cobra.Command {
	return &cobra.Command{
		Use: "probe DEV[/PORT] [gid-index N] [traffic] [count N]\n" +
			"  probe DEV[/PORT] [gid-index N] listen [[ADDR]:PORT] [pingpong] [size BYTES] [iters N] [timeout D]\n" +
			"  probe DEV[/PORT] [gid-index N] peer HOST[:PORT] [traffic | bw [write|send|read] | lat [write|send|read] | pingpong] [size BYTES] [iters N] [duration D] [timeout D]",
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
            send, as perftest; a whole READ for read); size 2, iters 1000
  pingpong  ibv_rc_pingpong's exchange and loop: the peer is an
            "ibv_rc_pingpong -g N" server (size 4096, iters 1000, as its
            defaults; they must equal its -s and -n)
The listening side also answers an ibv_rc_pingpong client ("ibv_rc_pingpong
-g N HOST"), with its own size and iters. Both sides choose their GID with
the gid selector unless gid-index is given; ports that cannot reach each
other (InfiniBand and Ethernet, RoCE v1 and v2, IPv4 and IPv6 GIDs) fail at
once, naming both sides. timeout (10s) bounds the connection and every wait
on the peer; a peer that fails, goes away or is interrupted fails this side
too, naming the step. Nothing is left behind on either side.

rxe (Soft-RoCE) is probed fully; mlx5 up to a queue pair in RTS (no
traffic); other drivers up to the protection domain, then reported as not
supported.

Exit status: 0 every step passed (on both sides, between hosts), 1 a step
failed (or the driver is not supported), 2 the command line was wrong.`,
		Example: `  grdma probe rxe0
  grdma probe rxe0/1 traffic
  grdma probe mlx5_0 gid-index 3
  grdma -j probe rxe0 traffic count 200
  grdma probe rxe0 listen                      # on host A
  grdma -j probe rxe0 peer hosta bw write      # on host B
  grdma probe rxe0 peer 10.0.0.1:18600 lat send iters 10000
  grdma probe rxe0 peer hosta pingpong         # against ibv_rc_pingpong -g 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "help" {
				return cmd.Help()
			}
			req, err := parseProbe(newArgv(args, "grdma probe help"))
			if err != nil {
				return err
			}
			return a.probe(req)
		},
	}
}

// probeKeywords are the words after DEV[/PORT].
var probeKeywords = []string{"gid-index", "traffic", "count", "listen", "peer", "bw", "lat", "pingpong", "size", "iters", "duration", "timeout"}

func parseProbe(args *argv) (probeRequest, error) {
	if args.empty() {
		return probeRequest{}, usagef(args.help, "probe needs a device: DEV[/PORT]")
	}
	target, err := args.parseDevPort(args.next())
	if err != nil {
		return probeRequest{}, err
	}
	req := probeRequest{target: target, count: 1,
		options: verbsprobe.Options{Device: target.Dev, Port: target.Port, GIDIndex: verbsprobe.AutoGID}}
	seen := map[string]bool{}
	for !args.empty() {
		kw, err := args.keyword("argument", "", probeKeywords...)
		if err != nil {
			return probeRequest{}, err
		}
		if seen[kw] {
			return probeRequest{}, usagef(args.help, "%s given twice", kw)
		}
		seen[kw] = true
		switch kw {
		case "traffic", "bw", "lat", "pingpong":
			if req.test.Kind != "" {
				return probeRequest{}, usagef(args.help, "%s and %s: one test at a time", req.test.Kind, kw)
			}
			req.test.Kind = verbsprobe.TestKind(kw)
			if (kw == "bw" || kw == "lat") && !args.empty() {
				if op, ok := operation(args.words[0]); ok {
					req.test.Op = op
					args.next()
				}
			}
		case "gid-index":
			if req.options.GIDIndex, err = args.number("gid-index", 0, math.MaxUint8); err != nil {
				return probeRequest{}, err
			}
		case "count":
			if req.count, err = args.number("count", 1, maxProbeCount); err != nil {
				return probeRequest{}, err
			}
		case "listen":
			req.listen = true
			if !args.empty() && !isProbeKeyword(args.words[0]) {
				req.listenAddr = args.next()
			}
			if req.listenAddr, err = verbsprobe.ListenAddress(req.listenAddr); err != nil {
				return probeRequest{}, usagef(args.help, "listen: %v", err)
			}
		case "peer":
			v, err := args.value("peer address HOST[:PORT]")
			if err != nil {
				return probeRequest{}, err
			}
			if req.peerAddr, err = verbsprobe.PeerAddress(v); err != nil {
				return probeRequest{}, usagef(args.help, "peer: %v", err)
			}
		case "size":
			if req.test.Size, err = args.number("size", 1, verbsprobe.MaxTestSize); err != nil {
				return probeRequest{}, err
			}
		case "iters":
			if req.test.Iters, err = args.number("iters", 1, verbsprobe.MaxTestIters); err != nil {
				return probeRequest{}, err
			}
		case "duration":
			if req.test.Duration, err = args.duration("duration", verbsprobe.MaxTestDuration); err != nil {
				return probeRequest{}, err
			}
		case "timeout":
			if req.timeout, err = args.duration("timeout", time.Hour); err != nil {
				return probeRequest{}, err
			}
		}
	}
	if req.test.Kind == verbsprobe.TestTraffic && !req.listen && req.peerAddr == "" {
		req.options.Traffic = true // this host alone
	}
	return req, checkProbeRequest(args, req, seen)
}

// checkProbeRequest refuses keywords that do not go together.
func checkProbeRequest(args *argv, req probeRequest, seen map[string]bool) error {
	twoHost := req.listen || req.peerAddr != ""
	switch {
	case req.listen && req.peerAddr != "":
		return usagef(args.help, "listen or peer, not both")
	case !twoHost:
		for _, kw := range []string{"bw", "lat", "pingpong", "size", "iters", "duration", "timeout"} {
			if seen[kw] {
				return usagef(args.help, "%s needs a peer: probe DEV listen on one host, probe DEV peer HOST %s on the other", kw, kw)
			}
		}
		return nil
	case seen["count"]:
		return usagef(args.help, "count repeats a probe of this host alone; between hosts use iters or duration")
	case req.listen && req.test.Kind != "" && req.test.Kind != verbsprobe.TestPingpong:
		return usagef(args.help, "listen serves the test its peer asks for: give %s to probe ... peer HOST", req.test.Kind)
	case seen["iters"] && seen["duration"]:
		return usagef(args.help, "iters or duration, not both")
	case req.listen && seen["duration"]:
		return usagef(args.help, "listen serves the test its peer asks for: give duration to probe ... peer HOST")
	}
	test := req.test.WithDefaults()
	if req.listen {
		test = verbsprobe.Test{Kind: verbsprobe.TestPingpong, Size: req.test.Size, Iters: req.test.Iters}.WithDefaults()
	}
	if err := test.Validate(); err != nil {
		return usagef(args.help, "%v", err)
	}
	return nil
}

func isProbeKeyword(word string) bool {
	for _, k := range probeKeywords {
		if strings.HasPrefix(k, word) {
			return true
		}
	}
	return false
}

func operation(word string) (verbsprobe.Operation, bool) {
	for _, op := range []verbsprobe.Operation{verbsprobe.OpWrite, verbsprobe.OpSend, verbsprobe.OpRead} {
		if string(op) == word {
			return op, true
		}
	}
	return "", false
}

// duration consumes a Go duration (10s, 1m30s, 500ms) within (0, max].
func (a *argv) duration(what string, max time.Duration) (time.Duration, error) {
	v, err := a.value(what + " value")
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > max {
		return 0, usagef(a.help, "%s must be a duration from 1ms to %v such as 10s or 500ms, not %q", what, max, v)
	}
	return d, nil
}

// number consumes a decimal value of a keyword within [lo, hi].
func (a *argv) number(what string, lo, hi int) (int, error) {
	v, err := a.value(what + " value")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, usagef(a.help, "%s must be a number from %d to %d, not %q", what, lo, hi, v)
	}
	return n, nil
}

func (a *app) probe(req probeRequest) error {
	fsys, err := a.sysfs("probe")
	if err != nil {
		return err
	}
	req.options.Sysfs = fsys
	// Ctrl-C stops the probe between steps; the teardown still runs.
	ctx, stop := interruptOnce()
	defer stop()
	if req.listen || req.peerAddr != "" {
		return a.probePeer(ctx, req)
	}
	series := verbsprobe.Repeat(ctx, req.options, req.count)
	last := series.Last

	p := a.printer()
	render.ProbeResult(p, last, series, req.count)
	if err := p.Flush(); err != nil {
		return err
	}
	return probeError(last, series.Runs, req.count)
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

// probeError is what a probe that did not pass, or was interrupted before
// its count of runs, exits with.
func probeError(r *verbsprobe.Result, runs, count int) error {
	target := fmt.Sprintf("%s/%d", r.Device, r.Port)
	run := ""
	if count > 1 {
		run = fmt.Sprintf(" (run %d of %d)", runs, count)
	}
	if s := r.Failed(); s != nil {
		msg := fmt.Sprintf("probe %s failed at %s%s: %v", target, s.Name, run, s.Err.Err)
		if s.Err.Cause != "" {
			msg += "\n  likely cause: " + s.Err.Cause
		}
		return fmt.Errorf("%s", msg)
	}
	if r.Unsupported != "" {
		return fmt.Errorf("probe %s%s: %s", target, run, r.Unsupported)
	}
	if runs < count {
		return fmt.Errorf("probe %s interrupted after %d of %d runs, all passed", target, runs, count)
	}
	return nil
}
