//go:build grdma_noprometheus

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sysfs"
	"github.com/spf13/cobra"
)

// prometheusBinary is the name of the complete build, looked up next to
// the running executable, then in PATH.
const prometheusBinary = "grdma-prometheus"

// execGuard is set in grdma-prometheus's environment: a build without
// Prometheus installed under that name would otherwise exec itself forever.
const execGuard = "GRDMA_PROMETHEUS_EXEC"

// needPrometheus replaces this process with grdma-prometheus running the
// same command line; it returns only when it cannot.
func (a *app) needPrometheus(what string) error {
	if a.inBatch {
		return fmt.Errorf("%s in a batch needs the Prometheus packages, which this grdma is built without: run the batch with %s -b", what, prometheusBinary)
	}
	if os.Getenv(execGuard) != "" {
		return fmt.Errorf("%s: the %s found is itself built without the Prometheus packages: reinstall it (make build && make install)", what, prometheusBinary)
	}
	self, _ := os.Executable()
	path, err := findPrometheusBinary(self, exec.LookPath)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	argv := append([]string{path}, a.argv...)
	return fmt.Errorf("%s: exec %s: %w", what, path, syscall.Exec(path, argv, append(os.Environ(), execGuard+"=1")))
}

// findPrometheusBinary looks for grdma-prometheus next to self (how make
// install and a package lay them out), then in PATH.
func findPrometheusBinary(self string, lookPath func(string) (string, error)) (string, error) {
	if self != "" {
		next := filepath.Join(filepath.Dir(self), prometheusBinary)
		if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return next, nil
		}
	}
	if path, err := lookPath(prometheusBinary); err == nil {
		return path, nil
	}
	where := "in PATH"
	if self != "" {
		where = "next to " + self + " or in PATH"
	}
	return "", fmt.Errorf("this grdma is built without the Prometheus packages and %s (the complete build) is not %s: make build builds both, make install installs both", prometheusBinary, where)
}

// exporterCommand hands every argument, flags included, to grdma-prometheus.
func (a *app) exporterCommand() *cobra.Command {
	return &cobra.Command{
		Use:                   exporterUse,
		Short:                 exporterShort,
		Long:                  exporterShort + ". Run by " + prometheusBinary + ", the build of grdma with the Prometheus packages: see grdma exporter --help there.",
		DisableFlagParsing:    true,
		DisableFlagsInUseLine: true,
		RunE: func(*cobra.Command, []string) error {
			return a.needPrometheus("grdma exporter")
		},
		ValidArgsFunction: completeInPrometheusBuild,
	}
}

// completeInPrometheusBuild asks grdma-prometheus, which knows the
// exporter's flags, to complete: cobra passes a command that does not parse
// its flags everything to complete here.
func completeInPrometheusBuild(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if os.Getenv(execGuard) != "" { // the grdma-prometheus found is this build
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	self, _ := os.Executable()
	path, err := findPrometheusBinary(self, exec.LookPath)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	words := append(append([]string{cobra.ShellCompRequestCmd, cmd.Name()}, args...), toComplete)
	child := exec.Command(path, words...)
	child.Env = append(os.Environ(), execGuard+"=1")
	out, err := child.Output()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var comps []cobra.Completion
	directive := cobra.ShellCompDirectiveNoFileComp
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSuffix(line, "\n")
		if d, ok := strings.CutPrefix(line, ":"); ok { // the last line: the directive
			if n, err := strconv.Atoi(d); err == nil {
				directive = cobra.ShellCompDirective(n)
			}
			break
		}
		comps = append(comps, line)
	}
	return comps, directive
}

var errNeedsPrometheus = errors.New("needs the build with the Prometheus packages")

// The writers are not reached in this build: needPrometheus runs first.
func writeCheckTextfile(string, health.Summary, time.Time) error { return errNeedsPrometheus }

func (a *app) writeStatTextfile(sysfs.FS, string) error { return errNeedsPrometheus }

func checkTextfileDir(string) error { return errNeedsPrometheus }

func (a *app) sweepProber(context.Context, grammar.SweepCoordinateRequest, []sweep.Host) (sweep.TestProber, error) {
	return nil, errNeedsPrometheus
}
