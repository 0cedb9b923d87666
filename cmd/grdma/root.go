package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/grdma/grdma/cmdline"

	"github.com/spf13/cobra"
)

// main runs one command line (or a batch file) and returns the exit code.
func (a *app) main(args []string) int {
	defer a.close()
	a.argv = args
	// Objects are abbreviated as rdma abbreviates them (cmdline.ResolveObject).
	return a.report(a.execute(args))
}

// execute parses and runs one command line.
func (a *app) execute(args []string) error {
	base := a.opts
	root := a.newRoot()
	a.opts = base // flag definitions reset their variables to defaults
	root.SetArgs(cmdline.ResolveObject(args))
	err := root.Execute()
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "grdma [OPTIONS] OBJECT [COMMAND [ARGS]]",
		Short: "Manage Linux RDMA devices",
		Long: `grdma manages Linux RDMA devices over RDMA netlink, like iproute2's rdma:
the commands rdma also has print the same text and JSON.

Objects, commands and keywords may be abbreviated as in rdma: a word means
the first name of its table, in rdma's order, that starts with it ("s" is
system, "st" statistic, "res show c" cm_id); grdma's own objects come after
rdma's.

Differences from rdma, on purpose (rdma is wrong there): a wrong command
line exits 2 (rdma prints "Unknown ..." and exits 0); help, -h and -V work
without RDMA netlink; -j sys prints JSON; a bare DEV where rdma wants
DEV/PORT means all its ports; res filters take 64-bit and 0x hexadecimal
numbers, reject malformed values, accept dev and link for every object and
add comm, and a CM ID without an address never matches src-addr/dst-addr;
-r text prints hex bytes separated by spaces; -dd JSON keeps driver values'
sign and 64 bits; SRQ lqpn lists are not cut at 256 characters; stat show
over every port skips a port without counters with a note; each -b line
starts from the command line's options and the current device list;
monitor -j prints one JSON object per line.
Exit status: 0 success, 1 the operation failed, 2 the command line was wrong.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if a.opts.batch != "" {
					return usagef("grdma --help", "-b %s runs the commands of the file: give no command with it", a.opts.batch)
				}
				return unknownObject(args[0])
			}
			return nil
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return a.checkBatchUse(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case a.opts.version:
				fmt.Fprintln(a.stdout, versionString())
				return nil
			case a.opts.batch != "":
				return a.runBatch(a.opts.batch)
			}
			return cmd.Help()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef(cmd.CommandPath()+" --help", "%s", err)
	})

	f := root.PersistentFlags()
	f.BoolVarP(&a.opts.json, "json", "j", false, "print JSON")
	f.BoolVarP(&a.opts.pretty, "pretty", "p", false, "indent JSON output")
	f.CountVarP(&a.opts.details, "details", "d", "print details (-dd: driver details)")
	f.BoolVarP(&a.opts.raw, "raw", "r", false, "res show qp|cq|mr|srq: print the driver's raw description of each object")
	f.BoolVarP(&a.opts.oneline, "oneline", "o", false, "print each record on one line, continuations joined by \\")
	f.BoolVarP(&a.opts.force, "force", "f", false, "with --batch: go on after a failing command")
	f.StringVarP(&a.opts.batch, "batch", "b", "", "run the commands of `FILE` (- for standard input), one per line")
	f.StringVar(&a.opts.sysfsRoot, "sysfs-root", os.Getenv("GRDMA_SYSFS_ROOT"), "read /sys and /proc below `DIR` (default /, or $GRDMA_SYSFS_ROOT)")
	f.StringVar(&a.opts.procRoot, "proc-root", os.Getenv("GRDMA_PROC_ROOT"), "read /proc from `DIR`, a procfs mount such as a container's /host/proc (default: proc below --sysfs-root, or $GRDMA_PROC_ROOT)")
	f.StringVarP(&a.opts.netns, "netns", "n", "", "talk to the RDMA netlink of network namespace `NETNS` (a name in /run/netns, a path, or a PID); refused by commands that also read /sys or /dev (port, gid, dev info, probe, check, cm, topo, stat --pma, stat export, exporter)")
	root.Flags().BoolVarP(&a.opts.version, "version", "V", false, "print the version and exit")

	root.AddCommand(a.devCommand(), a.linkCommand(), a.sysCommand(), a.statCommand(), a.monitorCommand(), a.checkCommand(), a.topoCommand(), a.portCommand(), a.gidCommand(), a.resCommand(), a.probeCommand(), a.sweepCommand(), a.cmCommand(), a.exporterCommand(), a.completionCommand())
	a.attachCompletions(root)
	return root
}

// unknownObject explains an object word that matched no command (words
// that start an object's name were resolved to it: cmdline.ResolveObject).
func unknownObject(word string) error {
	return usagef("grdma --help", "unknown object %q", word)
}

// checkBatchUse refuses -b where it cannot work: with a command (one of
// the two would be ignored) and on a batch line (it would recurse).
func (a *app) checkBatchUse(cmd *cobra.Command) error {
	switch {
	case a.opts.batch == "":
		return nil
	case a.inBatch:
		return &nestedBatchError{usagef("", "a batch line cannot use -b: put the commands of %s in this file instead", a.opts.batch)}
	case cmd.HasParent():
		return usagef("grdma --help", "-b %s runs the commands of the file: give no command with it (or put %q in the file)", a.opts.batch, cmd.CommandPath())
	}
	return nil
}

// nestedBatchError is a batch line with -b; it ends the batch, -f or not.
type nestedBatchError struct{ error }

func (e *nestedBatchError) Unwrap() error { return e.error }

// runBatch runs one command per line of the file (- = standard input).
// Each line starts from the global options of the command line and from a
// clean state; with --force a failing line does not stop the batch.
func (a *app) runBatch(name string) error {
	var r io.Reader = a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	base := a.opts
	base.batch = ""
	a.inBatch = true
	defer func() { a.inBatch = false }()
	failed := 0
	sc := bufio.NewScanner(r)
	for lineNo := 1; sc.Scan(); lineNo++ {
		args, err := cmdline.SplitBatchLine(sc.Text())
		if err == nil && len(args) == 0 {
			continue
		}
		if err == nil {
			a.opts = base
			err = a.execute(args)
		}
		if err != nil {
			a.report(err)
			fmt.Fprintf(a.stderr, "grdma: command failed %s:%d\n", name, lineNo)
			if nested := (*nestedBatchError)(nil); errors.As(err, &nested) {
				return &silentUsageError{}
			}
			failed++
			if !base.force {
				return errBatchFailed
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return errBatchFailed
	}
	return nil
}

// errBatchFailed ends a batch whose failures were already reported.
var errBatchFailed = &silentError{}

type silentError struct{}

// silentUsageError ends a batch with exit 2 after its message was printed.
type silentUsageError struct{}

func (*silentUsageError) Error() string { return "" }

func (*silentError) Error() string { return "" }
