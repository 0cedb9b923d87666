package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// version and commit are set at build time with -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the operation failed
	exitUsage  = 2 // the command line was wrong
)

// globalOptions are the options every command accepts, as rdma has them.
type globalOptions struct {
	json      bool
	pretty    bool
	details   int // -d, -dd
	raw       bool
	oneline   bool
	force     bool
	batch     string
	version   bool
	sysfsRoot string
	procRoot  string
	netns     string
}

// app holds what commands share: options, streams, and the netlink client,
// dialled on first use and reused by the commands of a batch that talk to
// the same network namespace.
type app struct {
	opts   globalOptions
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	dial   func() (*nldev.Client, error) // tests replace it; nil dials the kernel
	client *nldev.Client
	// clientNetNS is the -n the client was dialled for: a batch line with
	// another -n needs another socket.
	clientNetNS string

	inBatch bool     // running the lines of -b
	argv    []string // the command line, for needPrometheus

	// openVerbs opens a uverbs device for dev info; tests replace it, nil
	// opens the kernel's.
	openVerbs func(dev string, node uverbs.Node) (devinfo.Verbs, error)
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		// The environment's roots are the defaults of --sysfs-root and
		// --proc-root: set here, as execute restores the options it starts
		// from after defining the flags.
		opts:   globalOptions{sysfsRoot: os.Getenv("GRDMA_SYSFS_ROOT"), procRoot: os.Getenv("GRDMA_PROC_ROOT")},
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
	}
}

// nl returns the RDMA netlink client of -n's namespace, dialling it on
// first use and again when -n changed since.
func (a *app) nl() (*nldev.Client, error) {
	if a.client != nil && a.clientNetNS != a.opts.netns {
		a.close()
	}
	if a.client == nil {
		c, err := a.newClient()
		if err != nil {
			return nil, err
		}
		a.client, a.clientNetNS = c, a.opts.netns
	}
	return a.client, nil
}

// newClient opens a new RDMA netlink client of the namespace -n names;
// the caller closes it (nl keeps one for the command instead).
func (a *app) newClient() (*nldev.Client, error) {
	if a.dial != nil {
		return a.dial()
	}
	return nldev.DialNetNS(a.opts.netns)
}

// devices returns the netlink client and the RDMA devices it lists.
func (a *app) devices() (*nldev.Client, []nldev.Device, error) {
	c, err := a.nl()
	if err != nil {
		return nil, nil, err
	}
	devs, err := c.Devices()
	return c, devs, err
}

func (a *app) close() {
	if a.client != nil {
		a.client.Close()
		a.client = nil
	}
}

// rootFS returns the reader of /sys, /proc and /dev below --sysfs-root,
// with /proc at --proc-root when given.
func (a *app) rootFS() (sysfs.FS, error) {
	fsys, err := sysfs.NewFS(a.opts.sysfsRoot)
	if err != nil {
		return fsys, err
	}
	return fsys.WithProc(a.opts.procRoot)
}

// sysfs returns the reader of /sys and /dev for a command that reads them
// (what): -n NETNS reaches RDMA netlink only, and this process's sysfs
// shows its own namespace, so such a command refuses -n rather than mix
// two namespaces' data.
func (a *app) sysfs(what string) (sysfs.FS, error) {
	if a.opts.netns != "" {
		return sysfs.FS{}, usagef("", "-n %s reaches RDMA netlink only, and %s also reads /sys and /dev, which would be this namespace's: run it inside the namespace (ip netns exec %s grdma %s)",
			a.opts.netns, what, a.opts.netns, what)
	}
	return a.rootFS()
}

// printer returns an output printer for one command.
func (a *app) printer() *output.Printer {
	return output.New(a.stdout, output.Options{JSON: a.opts.json, Pretty: a.opts.pretty, Oneline: a.opts.oneline})
}

// usageError is a command line grdma cannot run; it exits 2.
type usageError = cmdline.UsageError

// cannotRunError is a command that cannot run here at all (a kernel
// without the feature); it exits 2.
type cannotRunError struct{ error }

func (e *cannotRunError) Unwrap() error { return e.error }

var usagef = cmdline.Usagef

// report prints err and returns the exit status it means.
func (a *app) report(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ia *nldev.InvalidArgumentError
	var silent *silentError
	var cannot *cannotRunError
	var silentUsage *silentUsageError
	switch {
	case errors.As(err, &silentUsage):
		return exitUsage
	case errors.As(err, &cannot):
		fmt.Fprintf(a.stderr, "grdma: %s\n", cannot.error)
		return exitUsage
	case errors.As(err, &silent):
		return exitFailed
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "grdma: %s\n", ue.Msg)
		if ue.Help != "" {
			fmt.Fprintf(a.stderr, "Try '%s'.\n", ue.Help)
		}
		return exitUsage
	case errors.As(err, &ia):
		fmt.Fprintf(a.stderr, "grdma: %s\n", ia.Reason)
		return exitUsage
	}
	fmt.Fprintf(a.stderr, "grdma: %s\n", escapeLines(err.Error()))
	return exitFailed
}

// escapeLines is output.Escape line by line: an error may quote what a
// peer sent (probe between hosts), and its own line breaks stay.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = output.Escape(l)
	}
	return strings.Join(lines, "\n")
}
