package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/sysfs"
	"github.com/spf13/cobra"
)

// statOptions are the options only stat takes.
type statOptions struct {
	interval time.Duration
	count    int
	pma      bool
	textfile string
}

func (a *app) statCommand() *cobra.Command {
	var so statOptions
	cmd := &cobra.Command{
		Use: `stat [show|list] [link DEV[/PORT]] [-i INTERVAL [-c COUNT]] [--pma]
  stat mode [supported] [link DEV[/PORT]]
  stat set link DEV/PORT optional-counters NAME[,NAME...]
  stat unset link DEV/PORT optional-counters
  stat qp [show] [link DEV[/PORT]] [cntn N] [lqpn N] [pid N] [qp-type T]
  stat qp mode [link DEV[/PORT]]
  stat qp set link DEV/PORT auto {type|pid|type,pid} on [optional-counters on|off] | auto off
  stat qp bind link DEV/PORT lqpn QPN [cntn COUNTER]
  stat qp unbind link DEV/PORT cntn COUNTER [lqpn QPN]
  stat mr [dev DEV] [mrn N]
  stat export --textfile PATH`,
		Aliases: []string{"statistic"},
		Short:   "Show and manage RDMA hardware counters",
		Long: `Show every hardware counter a port's driver reports (rxe, mlx5, any driver),
as rdma statistic does; with -i, per-second rates computed from the
difference between samples (a counter that went backwards was reset and
counts from zero); with --pma, the InfiniBand PMA counters of sysfs
(ports/P/counters; port_xmit_data and port_rcv_data converted from 4-byte
words to bytes), and with --pma -i their per-second rates. Manage optional counters and how QPs are bound to
counters; qp unbind without lqpn unbinds every QP of the counter, as rdma
does. "stat mr" (also "stat show mr") lists the counters of each memory
region, for drivers that count per MR (mlx5; rxe lists MRs without
counters). "stat export" writes all counters and port states in the
Prometheus text format for node_exporter's textfile collector, atomically
and through one descriptor (no name another account could swap for a
symlink is followed); a directory writable by group or others without the
sticky bit is refused (exit 1).
Text and JSON of the commands rdma has match rdma statistic.`,
		Example: `  grdma stat
  grdma -j stat show link rxe0/1
  grdma stat show -i 1s -c 10
  grdma -j stat show link mlx5_0/1 -i 5s
  grdma stat mode supported
  grdma stat set link mlx5_0/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts
  grdma stat qp set link mlx5_0/1 auto type on
  grdma stat export --textfile /var/lib/node_exporter/textfile/rdma.prom`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stat(cmd, cmdArgv(cmd, args, "grdma stat help"), &so)
		},
	}
	f := cmd.Flags()
	f.DurationVarP(&so.interval, "interval", "i", 0, "with show: print per-second rates every `INTERVAL` (e.g. 1s)")
	f.IntVarP(&so.count, "count", "c", 0, "with -i: stop after `N` samples (default: run until interrupted)")
	f.BoolVar(&so.pma, "pma", false, "with show: print the InfiniBand PMA counters of sysfs instead (with -i: their rates)")
	f.StringVar(&so.textfile, "textfile", "", "with export: write to `PATH` (atomically)")
	return cmd
}

func (a *app) stat(cmd *cobra.Command, args *argv, so *statOptions) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.Stat)...)
	if err != nil {
		return err
	}
	if f := cmd.Flags(); f.Changed("interval") && so.interval <= 0 {
		return usagef(args.Help, "-i must be a positive interval such as 1s, not %s", so.interval)
	} else if f.Changed("count") && so.count < 1 {
		return usagef(args.Help, "-c must be a number of samples from 1, not %d", so.count)
	}
	if verb != "show" && verb != "list" && (so.interval != 0 || so.count != 0 || so.pma) {
		return usagef(args.Help, "-i, -c and --pma go with stat show")
	}
	if verb != "export" && so.textfile != "" {
		return usagef(args.Help, "--textfile goes with stat export")
	}
	switch verb {
	case "mode":
		return a.statMode(args)
	case "set":
		return a.statSetOptional(args, true)
	case "unset":
		return a.statSetOptional(args, false)
	case "qp":
		return a.statQP(args)
	case "mr":
		return a.statMR(args)
	case "export":
		return a.statExport(args, so.textfile)
	case "help":
		return cmd.Help()
	}
	return a.statShow(args, so)
}

// statPorts resolves "link DEV[/PORT]" to ports.
func (a *app) statPorts(args *argv) (*nldev.Client, []portRef, error) {
	want, err := args.Link()
	if err != nil {
		return nil, nil, err
	}
	if err := args.Done(); err != nil {
		return nil, nil, err
	}
	c, devs, err := a.devices()
	if err != nil {
		return nil, nil, err
	}
	refs, err := nldev.SelectPorts(devs, want.Device, want.Port)
	return c, refs, err
}

// readCounters reads the counters of each port (nldev.PortCountersOf): a
// port without counters (siw, for one) is skipped with a note when the
// user asked for every port.
func (a *app) readCounters(c *nldev.Client, refs []portRef) ([]nldev.PortCounters, error) {
	return c.PortCountersOf(refs, func(r portRef) {
		fmt.Fprintf(a.stderr, "grdma: %s/%d has no hardware counters, skipped\n", r.Device.Name, r.Port)
	})
}

func (a *app) statShow(args *argv, so *statOptions) error {
	if !args.Empty() {
		// rdma: stat show link ... | stat show mr ... | stat show help.
		w, err := args.Sub(args.Words[:1]).Keyword("parameter", "", grammar.Stat.Verb("show").Next.KeywordNames()...)
		if err != nil {
			return err
		}
		if w == "mr" {
			args.Next()
			return a.statMR(args)
		}
	}
	c, refs, err := a.statPorts(args)
	if err != nil {
		return err
	}
	if so.pma {
		sys, err := a.sysfs("stat show --pma")
		if err != nil {
			return err
		}
		if so.interval != 0 {
			noted := map[string]bool{}
			return a.statRates(func() ([]nldev.PortCounters, error) { return a.readPMA(sys, refs, noted) }, so)
		}
		if so.count != 0 {
			return usagef(args.Help, "-c needs -i")
		}
		return a.statShowPMA(sys, refs)
	}
	if so.interval != 0 {
		return a.statRates(func() ([]nldev.PortCounters, error) { return a.readCounters(c, refs) }, so)
	}
	if so.count != 0 {
		return usagef(args.Help, "-c needs -i")
	}
	counters, err := a.readCounters(c, refs)
	return a.printCounters(counters, err)
}

// printCounters prints counter sets as stat show does; err, from reading
// them, is returned after what was read is printed.
func (a *app) printCounters(counters []nldev.PortCounters, err error) error {
	return a.printList(func(p *output.Printer) error {
		for i := range counters {
			render.Counters(p, &counters[i])
		}
		return err
	})
}

// statRates prints per-second counter rates every interval: text blocks,
// or one JSON object per port and sample (JSON lines, for streaming).
// sample reads the counters (RDMA netlink, or sysfs PMA with --pma).
func (a *app) statRates(sample func() ([]nldev.PortCounters, error), so *statOptions) error {
	if so.interval < 10*time.Millisecond {
		return usagef("grdma stat help", "interval %s is too short (10ms at least)", so.interval)
	}
	prev, err := sample()
	if err != nil {
		return err
	}
	prevAt := time.Now()
	ticker := time.NewTicker(so.interval)
	defer ticker.Stop()
	for n := 0; so.count == 0 || n < so.count; n++ {
		<-ticker.C
		cur, err := sample()
		if err != nil {
			return err
		}
		now := time.Now()
		secs := now.Sub(prevAt).Seconds()
		p := a.printer()
		for i := range cur {
			if old := nldev.FindPortCounters(prev, &cur[i]); old != nil {
				render.Rates(p, &cur[i], cur[i].RatesSince(old, secs), now, secs)
			}
		}
		if err := p.Flush(); err != nil {
			return err
		}
		prev, prevAt = cur, now
	}
	return nil
}

func (a *app) statMode(args *argv) error {
	supported := false
	if !args.Empty() {
		// rdma's table: link, show, supported, help.
		w, err := args.Sub(args.Words[:1]).Keyword("parameter", "", "link", "show", "supported", "help")
		if err != nil {
			return err
		}
		if w != "link" {
			args.Next()
		}
		supported = w == "supported"
	}
	c, refs, err := a.statPorts(args)
	if err != nil {
		return err
	}
	return a.listPorts(refs, func(p *output.Printer, r portRef) error {
		st, err := c.CounterStatus(r.Device.Index, r.Port)
		if err == nil {
			render.OptionalCounters(p, &st, supported)
		}
		return err
	})
}

// strictPort parses "link DEV/PORT" where a port is required.
func (a *app) strictPort(args *argv, what string) (*nldev.Client, portRef, error) {
	want, err := args.Link()
	if err != nil {
		return nil, portRef{}, err
	}
	if want.Port == 0 {
		return nil, portRef{}, usagef(args.Help, "%s needs link DEV/PORT", what)
	}
	c, devs, err := a.devices()
	if err != nil {
		return nil, portRef{}, err
	}
	refs, err := nldev.SelectPorts(devs, want.Device, want.Port)
	if err != nil {
		return nil, portRef{}, err
	}
	return c, refs[0], nil
}

// statSetOptional handles "set link D/P optional-counters A,B" (enable)
// and "unset link D/P optional-counters".
func (a *app) statSetOptional(args *argv, set bool) error {
	verb := "unset"
	if set {
		verb = "set"
	}
	if args.Empty() {
		return usagef(args.Help, "stat %s needs link DEV/PORT optional-counters", verb)
	}
	if err := args.LinkOrHelp(); err != nil {
		return err
	}
	// Validate the whole line before talking to the kernel.
	words := args.Words
	if len(words) < 3 {
		return usagef(args.Help, "stat %s needs link DEV/PORT optional-counters", verb)
	}
	tail := args.Sub(words[2:])
	if _, err := tail.Keyword("parameter", "", "optional-counters"); err != nil {
		return err
	}
	var names []string
	if set {
		list, err := tail.Value("optional counter names, comma separated")
		if err != nil {
			return err
		}
		names = strings.Split(list, ",")
	}
	if err := tail.Done(); err != nil {
		return err
	}
	args.Words = words[:2]
	c, r, err := a.strictPort(args, "stat "+verb)
	if err != nil {
		return err
	}
	return c.SetOptionalCountersByName(r.Device, r.Port, names)
}

// statExport writes the exporter's metrics (package exporter) to a
// temporary file renamed over the target.
func (a *app) statExport(args *argv, path string) error {
	if err := args.Done(); err != nil {
		return err
	}
	if path == "" {
		return usagef(args.Help, "stat export needs --textfile PATH")
	}
	if err := a.needPrometheus("grdma stat export"); err != nil {
		return err
	}
	if err := checkTextfileDir(path); err != nil {
		return err
	}
	sys, err := a.sysfs("stat export")
	if err != nil {
		return err
	}
	return a.writeStatTextfile(sys, path)
}

// readPMA reads the sysfs PMA counters of each port (ports.PMACounters);
// a port without any is skipped with a note (once: noted remembers).
func (a *app) readPMA(sys sysfs.FS, refs []portRef, noted map[string]bool) ([]nldev.PortCounters, error) {
	return ports.PMACounters(sys, refs, func(r portRef) {
		if name := fmt.Sprintf("%s/%d", r.Device.Name, r.Port); !noted[name] {
			fmt.Fprintf(a.stderr, "grdma: %s has no PMA counters in sysfs\n", name)
			noted[name] = true
		}
	})
}

// statShowPMA prints the sysfs PMA counters in the layout of stat show.
func (a *app) statShowPMA(sys sysfs.FS, refs []portRef) error {
	counters, err := a.readPMA(sys, refs, map[string]bool{})
	return a.printCounters(counters, err)
}
