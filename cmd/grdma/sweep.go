package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/sweep"
	"github.com/spf13/cobra"
)

func (a *app) sweepCommand() *cobra.Command {
	var svg string
	cmd := &cobra.Command{
		Use: "sweep run DEV[/PORT] [hosts FILE|-] [rank N] [port N] [quick] [bw [write|send|read]] [lat [write|send|read]] [size BYTES] [iters N] [duration D] [timeout D] [start D] [out FILE] [gid-index N]\n" +
			"  sweep run DEV[/PORT] confirm REPORT [rank N] [port N] [timeout D] [start D] [out FILE] [gid-index N]\n" +
			"  sweep coordinate [--svg FILE] [hosts FILE|-] [quick] [bw [write|send|read]] [lat [write|send|read]] [size BYTES] [iters N] [duration D] [timeout D] [parallel N] [confirm on|off] [out FILE] [scheme http|https] [http-config FILE] [exporter-port N] [responder-port N] [bw-module NAME] [lat-module NAME] [LIMITS]\n" +
			"  sweep report [--svg FILE] [bw-fraction F] [lat-factor F] [spread F] [bw-floor GBPS] [port-fraction F] [lat-ceiling USEC] FILE...",
		Short: "Test every pair of a fleet's nodes, bandwidth and latency, and name the bad node or link",
		Long: `An all-pairs sweep of a fleet: every node tests every other, bandwidth each way
and latency, in N-1 rounds of N/2 pairs at once (the circle method; N odd:
N rounds, each node sitting one out), then a report names the bad node, the
bad link, or the node that never answered.

sweep run is started on every node at once by a launcher (srun, a Kubernetes
Indexed Job, pdsh, clush, mpirun); no MPI is needed. The hosts are the host
list FILE (- for standard input: names or addresses, optionally :PORT, white
space or commas between them, # comments, Slurm's bracket syntax such as
node[01-16]), or else Slurm's SLURM_JOB_NODELIST. A node's rank is rank N,
else the launcher's (SLURM_PROCID, JOB_COMPLETION_INDEX, OMPI_COMM_WORLD_RANK,
PMIX_RANK), else the position of this host's name or address in the list.
Each node listens on TCP port 18516 (port N, or the host's :PORT), computes
the schedule, and in each round meets its partner there: the pair's first
node connects and is the client of its first test. Nodes keep in step
through their partners: a node waits for a partner that is alive however far
behind; one that shows no sign of life for timeout (30s; at first, start)
is recorded as not answering, and the others learn it and skip it. A node
whose device fails its check at start refuses every pair, saying why.

Tests per pair (verbsprobe's, as grdma probe ... peer runs them):
  bw [OP]   streaming OP (write by default) each way: 65536-byte messages
            (size BYTES) for 500ms (duration D)
  lat [OP]  ping-pong, write by default: 1000 exchanges (iters N, or
            duration D) of 2 bytes
Both run unless one is given; when one runs alone, size and iters are its. quick runs a ring instead of all pairs: two
rounds (three for N odd), each node meeting its two neighbours.

Each node writes JSON lines (standard output, or out FILE): a start record
with the parameters, grdma's version and the device, a record per test it
took part in (round, pair, role, test, outcome, figures or the failure), an
end record. Progress goes to standard error. Exit status: 0 every test of
this node passed, 1 one did not (or the run was interrupted), 2 the command
line or the host list was wrong.

When a report flags pairs it says which to retest; sweep run confirm REPORT,
started on every node again as the sweep was, runs that retest: REPORT is
grdma -j sweep report's output, whose hosts and tests it takes (hosts, quick
and the test words are refused with it). Each flagged pair runs again and
each suspect node against three nodes that passed. sweep report over both
runs' records then judges a flagged pair by its retest alone, as sweep
coordinate does: one noisy reading clears, a bad node or link stays bad.
A coordinated sweep's report is refused: its retest is the coordinator's
(confirm on).

sweep coordinate runs the same sweep from any one host, with nothing
launched: every node runs grdma exporter (its /probe endpoint) and a
responder (grdma probe DEV serve), as the DaemonSet or the systemd units
start them. Node X's test against node Y is a GET of X's exporter's
/probe?target=Y&module=rc_bw (lat: rc_lat; bw-module, lat-module name others)
with op, size and iters or duration set, and X tests from the port its
route to Y leaves from. Rounds run one after the other, the pairs of a round
at once (parallel N: at most N pairs), each pair's tests in order, so that no
node takes part in two tests at once; each test gets timeout (10s, the
exporters' modules' limit). A host's :PORT is its exporter's (exporter-port
N, else 10041); responder-port N when the responders listen elsewhere than
18515. scheme https and http-config FILE (Prometheus' http_config: basic_auth
with password_file, tls_config with ca_file, cert_file, key_file) give what
the exporters' --web.config.file asks for; redirects are not followed.
A node whose exporter does not answer is the client of no test; one whose
responder does not answer the server of none. When the first pass flags
pairs, each is retested, and each suspect node against three nodes that
passed (confirm off: not); then the report is printed as sweep report prints
it (LIMITS: sweep report's keywords), and out FILE keeps every node's
records for sweep report.

sweep report reads the nodes' records (any machine, RDMA or not; lines that
are not records, such as a launcher's, are skipped) and prints the bandwidth
and latency matrices, the limits, and the verdicts (-j: JSON; --svg FILE: a
heatmap too). A pair is bad below bw-fraction (0.93) of the fleet's best
bandwidth or above lat-factor (2.1) times its best latency: ClusterKit's
limits. Where the fleet's healthy pairs spread more than that (emulated or
oversubscribed fleets), the limit is the fleet's median moved spread (2.5)
times its ratio to the pairs' 90th percentile (latency: to the best; one
outlier pair does not set it) and at most a quarter of the median, which
stays ClusterKit's while the pairs are within about 2% of the median
(spread 0: ClusterKit's limits always).
bw-floor GBPS, port-fraction F (of the slower port's rate) and lat-ceiling
USEC add absolute limits. One test beyond such a relaxed limit, the pair's
other tests within, makes the pair suspect: listed and retested, no verdict
of its own. Verdicts: node (most of its pairs bad or suspect while its
partners are fine with the others), link (a bad pair whose nodes are both
fine with the others), unreachable (it took part in no test), pairs (bad
pairs neither explains). The report refuses records of different
parameters or of two runs, and says which pairs to retest.
Exit status: 0 no verdict, 1 a verdict (or records it cannot use), 2 the
command line was wrong.`,
		Example: `  srun --ntasks-per-node=1 --output=sweep-%N.jsonl grdma sweep run mlx5_0
  grdma sweep report --svg sweep.svg sweep-*.jsonl
  pdsh -w node[01-16] 'grdma sweep run mlx5_0 hosts /etc/fleet out /shared/sweep-$(hostname).jsonl'
  grdma sweep run rxe0 hosts fleet.txt rank 3 quick bw lat duration 1s
  grdma -j sweep report sweep-*.jsonl > sweep.json   # it flagged pairs: retest them
  srun --ntasks-per-node=1 --output=retest-%N.jsonl grdma sweep run mlx5_0 confirm sweep.json
  grdma sweep report sweep-*.jsonl retest-*.jsonl
  grdma sweep coordinate --svg sweep.svg hosts /etc/fleet scheme https http-config sweep-auth.yml out sweep.jsonl
  grdma -j sweep report spread 0 bw-floor 350 /shared/sweep-*.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error {
			av := cmdArgv(cmd, args, "grdma sweep help")
			verb, err := av.Keyword("command", "", verbs(grammar.Sweep)...)
			if err != nil {
				return err
			}
			switch verb {
			case "run":
				if svg != "" {
					return usagef("grdma sweep help", "--svg is an option of sweep report and sweep coordinate")
				}
				req, err := grammar.ParseSweepRun(av.Words)
				if err != nil {
					return cmdline.WithHelp(err, "grdma sweep help")
				}
				return a.sweepRun(req)
			case "coordinate":
				req, err := grammar.ParseSweepCoordinate(av.Words)
				if err != nil {
					return cmdline.WithHelp(err, "grdma sweep help")
				}
				if err := a.needPrometheus("grdma sweep coordinate"); err != nil {
					return err
				}
				return a.sweepCoordinate(req, svg)
			case "report":
				req, err := grammar.ParseSweepReport(av.Words)
				if err != nil {
					return cmdline.WithHelp(err, "grdma sweep help")
				}
				return a.sweepReport(req, svg)
			}
			return cmd.Help()
		},
	}
	cmd.Flags().StringVar(&svg, "svg", "", "sweep report: also write the matrices as an SVG heatmap to `FILE`")
	return cmd
}

// sweepHosts reads the host list of a run: the file, standard input, or
// SLURM_JOB_NODELIST. Problems with it are usage errors: the fix is in
// the input.
func (a *app) sweepHosts(verb, file string) ([]sweep.Host, error) {
	const help = "grdma sweep help"
	if file == "" {
		list := os.Getenv(sweep.NodeListEnv)
		if list == "" {
			return nil, usagef(help, "sweep %s needs hosts FILE (- for standard input), or %s (run it under srun)", verb, sweep.NodeListEnv)
		}
		names, err := sweep.ExpandHostlist(list)
		if err != nil {
			return nil, usagef(help, "%s: %v", sweep.NodeListEnv, err)
		}
		hosts, err := sweep.Hosts(names)
		if err == nil && len(hosts) < 2 {
			err = fmt.Errorf("%d host(s): a sweep needs at least two", len(hosts))
		}
		if err != nil {
			return nil, usagef(help, "%s: %v", sweep.NodeListEnv, err)
		}
		return hosts, nil
	}
	var r io.Reader = a.stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef(help, "hosts: %v", unwrapPath(err))
		}
		defer f.Close()
		r, name = f, file
	}
	hosts, err := sweep.ReadHosts(bufio.NewReader(r))
	if err != nil {
		return nil, usagef(help, "host list %s: %v", name, err)
	}
	return hosts, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// resolveHosts looks every host up (at most 16 at once, 10 s in all): a
// name that does not resolve, and two entries that are one address and
// port, are errors naming them.
func resolveHosts(ctx context.Context, hosts []sweep.Host, port int) ([][]net.IP, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs := make([][]net.IP, len(hosts))
	errs := make([]error, len(hosts))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, h := range hosts {
		if ip := net.ParseIP(h.Name); ip != nil {
			addrs[i] = []net.IP{ip}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ips, err := net.DefaultResolver.LookupIPAddr(ctx, h.Name)
			for _, a := range ips {
				addrs[i] = append(addrs[i], a.IP)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i, h := range hosts {
		if errs[i] != nil {
			var dnsErr *net.DNSError
			if errors.As(errs[i], &dnsErr) && dnsErr.IsNotFound {
				return nil, usagef("grdma sweep help", "host %s (rank %d) is unknown: no such host in DNS or /etc/hosts; fix the host list", h, i)
			}
			return nil, fmt.Errorf("looking up host %s (rank %d): %v", h, i, errs[i])
		}
		p := h.Port
		if p == 0 {
			p = port
		}
		for _, ip := range addrs[i] {
			key := net.JoinHostPort(ip.String(), strconv.Itoa(p))
			if j, dup := seen[key]; dup && j != i {
				return nil, usagef("grdma sweep help", "hosts %s (rank %d) and %s (rank %d) are the same node (%s): list each node once",
					hosts[j], j, h, i, key)
			}
			seen[key] = i
		}
	}
	return addrs, nil
}

// self is what this host is called: its host name and its interfaces'
// addresses.
func self() sweep.Self {
	var s sweep.Self
	if name, err := os.Hostname(); err == nil {
		s.Names = append(s.Names, name)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				s.Addrs = append(s.Addrs, ipn.IP)
			}
		}
	}
	return s
}

func (a *app) sweepRun(req grammar.SweepRunRequest) error {
	fsys, err := a.sysfs("sweep run")
	if err != nil {
		return err
	}
	req.Options.Sysfs = fsys
	var hosts []sweep.Host
	params := sweep.Params{Schedule: req.Schedule, Tests: req.Tests}
	var retest *sweep.Schedule
	if req.Confirm != "" {
		var s sweep.Schedule
		params, s, err = readConfirm(req.Confirm)
		if err != nil {
			return err
		}
		retest = &s
		if hosts, err = sweep.Hosts(params.Hosts); err != nil {
			return fmt.Errorf("confirm %s: the report's host list: %v", req.Confirm, err)
		}
	} else if hosts, err = a.sweepHosts("run", req.HostsFile); err != nil {
		return err
	}
	ctx, stop := interruptOnce()
	defer stop()
	addrs, err := resolveHosts(ctx, hosts, req.Port)
	if err != nil {
		return err
	}
	rank, from, err := sweep.Rank(hosts, req.Rank, os.Getenv, self(), addrs)
	if err != nil {
		return usagef("grdma sweep help", "%v", err)
	}
	if retest == nil {
		for _, h := range hosts {
			params.Hosts = append(params.Hosts, h.String())
		}
	}
	port := req.Port
	if hosts[rank].Port != 0 {
		port = hosts[rank].Port
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("cannot listen on TCP port %d: %v (another sweep on this node? give port N)", port, unwrapOp(err))
	}
	errw := &lockedWriter{w: a.stderr} // the log's, and the records' with out /dev/stderr
	out, closeOut, err := a.sweepOut(req.Out, errw)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeOut()
	portNum := req.Options.Port
	if portNum == 0 {
		portNum = 1
	}
	device := fmt.Sprintf("%s/%d", req.Options.Device, portNum)
	var rate float64
	if r, err := fsys.PortRate(req.Options.Device, portNum); err == nil {
		rate = r.Gbps()
	}
	r := &sweep.Runner{Params: params, Hosts: hosts, Rank: rank, RankFrom: from, Port: req.Port, Device: device,
		Grdma: versionString(), PortRateGbps: rate, Tester: sweep.VerbsTester{Options: req.Options},
		Listener: ln, Out: sweep.NewWriter(out), Timeout: req.Timeout, Start: req.Start, Retest: retest,
		Log: func(format string, args ...any) {
			fmt.Fprintf(errw, "grdma: sweep %s: %s\n", output.Escape(hosts[rank].String()), fmt.Sprintf(format, args...))
		}}
	what := params.String()
	if retest != nil {
		what = fmt.Sprintf("retest of %d pairs in %d rounds of sweep %s (%s)", len(retest.Pairs()), len(retest.Rounds), params.ID(), what)
	}
	r.Log("rank %d of %d (%s), %s, listening on port %d", rank, len(hosts), from, what, port)
	sum, err := r.Run(ctx)
	if err != nil {
		return err
	}
	switch {
	case sum.Interrupted:
		return fmt.Errorf("sweep interrupted: %d of %d tests of this node passed", sum.Passed, sum.Tests)
	case sum.Passed < sum.Tests:
		return fmt.Errorf("sweep: %d of %d tests of this node passed (grdma sweep report over every node's records says why)", sum.Passed, sum.Tests)
	}
	r.Log("%d tests passed in %.1fs", sum.Tests, sum.Seconds)
	return nil
}

// readConfirm reads the retest a JSON report asks for.
func readConfirm(name string) (sweep.Params, sweep.Schedule, error) {
	f, err := os.Open(name)
	if err != nil {
		return sweep.Params{}, sweep.Schedule{}, usagef("grdma sweep help", "confirm: %v", unwrapPath(err))
	}
	defer f.Close()
	p, s, err := sweep.ReadConfirm(bufio.NewReader(f))
	if err != nil {
		return sweep.Params{}, sweep.Schedule{}, usagef("grdma sweep help", "confirm %s: %v", name, err)
	}
	return p, s, nil
}

// sweepOut opens where the records go: standard output, or FILE
// (created or truncated, once everything else is ready). /dev/stdout and
// /dev/stderr are this process's own streams, whether or not /dev holds
// those links: a bare devtmpfs (an initramfs, a minimal container) has
// none, and opening the name with O_CREATE made a regular file
// /dev/stderr that took every record while the stream got none. Nothing
// else under /dev is created: a name there must be an existing device.
// stderr is standard error as the command's log writes it.
func (a *app) sweepOut(name string, stderr io.Writer) (io.Writer, func(), error) {
	switch name {
	case "", "/dev/stdout":
		return a.stdout, func() {}, nil
	case "/dev/stderr":
		return stderr, func() {}, nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if strings.HasPrefix(filepath.Clean(name), "/dev/") {
		flags = os.O_WRONLY
	}
	f, err := os.OpenFile(name, flags, 0o644)
	if err != nil {
		if flags&os.O_CREATE == 0 && errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("out %s: no such device (a name under /dev is not created: name a file elsewhere)", name)
		}
		return nil, nil, fmt.Errorf("out: %v", unwrapPath(err))
	}
	return f, func() { f.Close() }, nil
}

// lockedWriter serialises Writes: the log and the records share standard
// error with out /dev/stderr, each line one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sweepCoordinate runs a coordinated sweep from this host through the
// nodes' exporters and prints the report.
func (a *app) sweepCoordinate(req grammar.SweepCoordinateRequest, svg string) error {
	hosts, err := a.sweepHosts("coordinate", req.HostsFile)
	if err != nil {
		return err
	}
	ctx, stop := interruptOnce()
	defer stop()
	prober, err := a.sweepProber(ctx, req, hosts)
	if err != nil {
		return err
	}
	params := sweep.Params{Schedule: req.Schedule, Tests: req.Tests}
	for _, h := range hosts {
		params.Hosts = append(params.Hosts, h.String())
	}
	errw := &lockedWriter{w: a.stderr} // the log's, and the records' with out /dev/stderr
	var out *sweep.Writer
	if req.Out != "" {
		w, closeOut, err := a.sweepOut(req.Out, errw)
		if err != nil {
			return err
		}
		defer closeOut()
		out = sweep.NewWriter(w)
	}
	driver, _ := os.Hostname()
	c := &sweep.Coordinator{Params: params, Prober: prober, Out: out, Grdma: versionString(), Driver: driver,
		Timeout: req.Timeout, Parallel: req.Parallel, Confirm: req.Confirm, Criteria: req.Criteria,
		Log: func(format string, args ...any) {
			fmt.Fprintf(errw, "grdma: sweep: %s\n", fmt.Sprintf(format, args...))
		}}
	c.Log("coordinating %s through the exporters' /probe", params)
	rep, _, err := c.Run(ctx)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sweep interrupted")
	}
	return a.sweepPrint(rep, svg)
}

// sweepPrint prints a report (text, or JSON with -j), writes its SVG,
// and exits 1 when it has a verdict.
func (a *app) sweepPrint(rep *sweep.Report, svg string) error {
	if svg != "" {
		if err := writeFileAtomic(svg, func(w io.Writer) error { return render.SweepSVG(w, rep) }); err != nil {
			return fmt.Errorf("--svg: %v", err)
		}
	}
	o := output.Options{JSON: a.opts.json, Pretty: a.opts.pretty}
	if err := render.SweepReport(a.stdout, rep, o); err != nil {
		return err
	}
	if !rep.OK {
		return errBatchFailed // the verdicts are printed: exit 1
	}
	return nil
}

func (a *app) sweepReport(req grammar.SweepReportRequest, svg string) error {
	var recs []sweep.Record
	skipped := 0
	for _, name := range req.Files {
		var r io.Reader = a.stdin
		label := "standard input"
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("sweep report: %v", unwrapPath(err))
			}
			defer f.Close()
			r, label = f, name
		}
		got, sk, err := sweep.ReadRecords(r, label)
		if err != nil {
			return fmt.Errorf("sweep report: %v", err)
		}
		recs, skipped = append(recs, got...), skipped+sk
	}
	rep, err := sweep.Build(recs, req.Criteria)
	if err != nil {
		return fmt.Errorf("sweep report: %v", err)
	}
	rep.Skipped = skipped
	return a.sweepPrint(rep, svg)
}

// writeFileAtomic writes name through a temporary file renamed over it:
// never a half-written file.
func writeFileAtomic(name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return unwrapPath(err)
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
