package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// checkNames are the checks grdma check runs, in this order by default.
var checkNames = []string{"devices", "ports", "probe", "gdr"}

func (a *app) checkCommand() *cobra.Command {
	var quiet bool
	var textfile string
	cmd := &cobra.Command{
		Use:   "check [devices|ports|probe|gdr]... [state STATE] [min-rate GBPS] [mtu BYTES] [gid-type v1|v2|ib] [gid-index N [type v1|v2|ib] [ipv4|ipv6]] [netdev-mtu BYTES] [device-count N] [device-names A,B]",
		Short: "Check node health: RDMA devices, ports, GPUDirect RDMA",
		Long: `Run health checks and print a PASS/WARN/FAIL table (-j: a JSON object with
"ok" and "checks"; -q: nothing, the exit status tells). With no check
named, all run:

  devices  every RDMA device has an accessible uverbs character device;
           device-count N and device-names A,B set what must exist
  ports    every port is ACTIVE and LINK_UP (or "state STATE"), and meets
           min-rate (Gb/s), mtu (active MTU, bytes), gid-type (a GID of that
           type exists), netdev-mtu, and gid-index N: the GID index grdma gid
           show -q chooses (among the GIDs of type/ipv4/ipv6 given after it)
           is N on every port, so that an index configured for a job
           (NCCL_IB_GID_INDEX) is caught drifting
  probe    the verbs probe (grdma probe ... traffic) on every ACTIVE port:
           an RC QP brought to RTS and, on rxe, data sent and verified
  gdr      GPUDirect RDMA readiness: peer_mem (nvidia_peermem, PeerDirect)
           and dma-buf, with huge pages, RLIMIT_MEMLOCK and the IOMMU mode;
           a node without an NVIDIA driver only warns

WARN does not fail the node. --textfile writes the results as Prometheus
gauges (atomically) for node_exporter's textfile collector.

Exit status: 0 no check failed, 1 a check failed, 2 the checks could not
run (bad arguments).`,
		Example: `  grdma check
  grdma check ports min-rate 100 mtu 4096 gid-type v2 netdev-mtu 9000
  grdma check ports gid-index 3 type v2 ipv4
  grdma -j check gdr
  grdma check devices device-count 8 -q && echo healthy
  grdma check --textfile /var/lib/node_exporter/textfile/grdma_check.prom`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.check(newArgv(args, "grdma check --help"), quiet, textfile)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing; the exit status tells")
	cmd.Flags().StringVar(&textfile, "textfile", "", "also write the results as Prometheus gauges to `PATH`")
	return cmd
}

// parseCheckArgs reads check names and expectations.
func parseCheckArgs(args *argv) (names []string, exp health.Expect, err error) {
	keywords := append(append([]string{}, checkNames...), "state", "min-rate", "mtu", "gid-type", "gid-index", "type", "ipv4", "ipv6", "netdev-mtu", "device-count", "device-names")
	number := func(kw, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, usagef(args.Help, "%s must be a positive number, not %q", kw, v)
		}
		return n, nil
	}
	for !args.Empty() {
		kw, err := args.Keyword("check or expectation", "", keywords...)
		if err != nil {
			return nil, exp, err
		}
		if slices.Contains(checkNames, kw) {
			names = append(names, kw)
			continue
		}
		if kw == "ipv4" || kw == "ipv6" {
			exp.GIDSelect.Family = map[string]gid.Family{"ipv4": gid.IPv4, "ipv6": gid.IPv6}[kw]
			continue
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return nil, exp, err
		}
		switch kw {
		case "state":
			st, ok := parsePortState(v)
			if !ok {
				return nil, exp, usagef(args.Help, "unknown port state %q: expected DOWN, INIT, ARMED, ACTIVE", v)
			}
			exp.State = st
		case "min-rate":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 1) { // NaN compares false
				return nil, exp, usagef(args.Help, "min-rate must be a positive number of Gb/s, not %q", v)
			}
			exp.MinRateGbps = f
		case "mtu":
			if exp.ActiveMTU, err = number(kw, v); err != nil {
				return nil, exp, err
			}
			switch exp.ActiveMTU {
			case 256, 512, 1024, 2048, 4096:
			default:
				return nil, exp, usagef(args.Help, "mtu must be an IB MTU (256, 512, 1024, 2048, 4096), not %d", exp.ActiveMTU)
			}
		case "gid-type":
			if exp.GIDType, err = gid.ParseType(v); err != nil {
				return nil, exp, usagef(args.Help, "unknown gid-type %q: expected v1, v2, ib", v)
			}
		case "gid-index":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, exp, usagef(args.Help, "gid-index must be a GID table index (0 or more), not %q", v)
			}
			exp.GIDIndex = &n
		case "type":
			if exp.GIDSelect.Type, err = gid.ParseType(v); err != nil {
				return nil, exp, usagef(args.Help, "unknown GID type %q: expected v1, v2, ib", v)
			}
		case "netdev-mtu":
			if exp.NetdevMTU, err = number(kw, v); err != nil {
				return nil, exp, err
			}
		case "device-count":
			if exp.DeviceCount, err = number(kw, v); err != nil {
				return nil, exp, err
			}
		case "device-names":
			exp.DeviceNames = strings.Split(v, ",")
		}
	}
	if exp.GIDIndex == nil && (exp.GIDSelect != gid.Criteria{}) {
		return nil, exp, usagef(args.Help, "type, ipv4 and ipv6 choose the GID of gid-index N: give gid-index")
	}
	if len(names) == 0 {
		names = checkNames
	}
	return names, exp, nil
}

func parsePortState(s string) (ib.PortState, bool) {
	for st := ib.PortDown; st <= ib.PortActiveDefer; st++ {
		if strings.EqualFold(st.String(), s) {
			return st, true
		}
	}
	return 0, false
}

func (a *app) check(args *argv, quiet bool, textfile string) error {
	names, exp, err := parseCheckArgs(args)
	if err != nil {
		return err
	}
	sys, err := a.sysfs("check")
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return err
	} else if err != nil {
		return &cannotRunError{fmt.Errorf("cannot read sysfs: %w", err)}
	}
	ranAt := time.Now()
	var results []health.Result
	var node *health.Node // read once, for devices, ports and probe
	readNode := func() *health.Node {
		if node == nil {
			if c, err := a.nl(); err != nil {
				node = &health.Node{DevicesErr: err, PortsErr: err}
			} else {
				node = health.ReadNode(health.Source{Sysfs: sys, Netlink: c})
			}
		}
		return node
	}
	for _, name := range names {
		switch name {
		case "devices", "ports":
			results = append(results, readNode().Check([]string{name}, exp)...)
		case "probe":
			results = append(results, checkProbe(sys, readNode())...)
		case "gdr":
			results = append(results, health.CheckGDR(gpudirect.Check(sys, gpudirect.Options{ProbeDMABuf: a.dmabufProbe(sys)})))
		}
	}
	rep := health.Summarize(results)
	if textfile != "" {
		if err := writeCheckTextfile(textfile, rep, ranAt); err != nil {
			return err
		}
	}
	if !quiet {
		if err := a.printCheckReport(rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		return errBatchFailed // failures are in the report already
	}
	return nil
}

// checkProbe runs the verbs probe, with traffic, on every ACTIVE port
// (a port that is down fails the ports check already).
func checkProbe(sys sysfs.FS, node *health.Node) []health.Result {
	if node.DevicesErr != nil {
		return []health.Result{{Name: "probe", Status: health.Fail, Subject: "node", Message: node.DevicesErr.Error(), Signals: []health.Signal{}}}
	}
	var results []*verbsprobe.Result
	for _, p := range node.Active() {
		results = append(results, verbsprobe.Run(context.Background(), verbsprobe.Options{
			Sysfs: sys, Device: p.Device, Port: p.Port, GIDIndex: verbsprobe.AutoGID, Traffic: true}))
	}
	return health.CheckProbe(results)
}

// dmabufProbe runs NCCL's dma-buf test (register a dma-buf MR with fd -1)
// on every device with a uverbs device; gpudirect reads the errnos.
func (a *app) dmabufProbe(sys sysfs.FS) gpudirect.DMABufProbe {
	return func() ([]gpudirect.DMABufProbeResult, error) {
		c, devs, err := a.devices()
		if err != nil {
			return nil, err
		}
		var out []gpudirect.DMABufProbeResult
		for _, d := range devs {
			ch, err := c.Chardev(d.Index, "uverbs")
			if err != nil {
				continue // no uverbs: the probe cannot tell
			}
			ctx, err := uverbs.Open(sys, d.Name)
			if err != nil {
				continue
			}
			out = append(out, gpudirect.DMABufProbeResult{Device: d.Name, Err: ctx.ProbeDMABufImport(ch.DriverID)})
			ctx.Close()
		}
		return out, nil
	}
}

func (a *app) printCheckReport(rep health.Report) error {
	if a.opts.json {
		var b []byte
		var err error
		if a.opts.pretty {
			b, err = json.MarshalIndent(rep, "", "    ")
		} else {
			b, err = json.Marshal(rep)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tSUBJECT\tMESSAGE")
	for _, r := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Status, r.Name, r.Subject, r.Message)
	}
	return tw.Flush()
}

func writeCheckTextfile(path string, rep health.Report, ranAt time.Time) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(&exporter.CheckResults{Results: rep.Checks, RanAt: ranAt}); err != nil {
		return err
	}
	return exporter.WriteTextfile(path, reg)
}
