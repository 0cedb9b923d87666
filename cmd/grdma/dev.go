package main

import (
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) devCommand() *cobra.Command {
	return &cobra.Command{
		Use: `dev [show|list [DEV]] | info [DEV] | set DEV name NEWNAME | set DEV netns NSNAME|PID | set DEV adaptive-moderation on|off
  dev add NAME type smi parent DEV | delete NAME`,
		Short: "Show or change RDMA devices",
		Long: `Show RDMA devices, or change one: rename it, move it to another network
namespace (the RDMA subsystem must be in exclusive netns mode), or turn its
adaptive interrupt moderation on or off. dev add creates a sub-device (type
smi: an InfiniBand SMI sub-device, which only drivers with sub-device
support such as mlx5 create; Linux 6.11) and dev delete removes one; other
drivers, rxe among them, refuse and grdma says so. Output matches rdma dev.

dev info [DEV] shows everything ibv_devinfo -v shows for each device (the
extended device attributes, each port's attributes and populated GIDs),
with the driver, the parent bus device (null for rxe and siw), the
character devices (uverbs, umad, issm, rdma_cm) and each port's netdev
and its operational state, as ibdev2netdev -v. It asks the uverbs device,
as ibv_devinfo does; where that cannot be opened (no permission, no
/dev/infiniband) it reads sysfs, shows fewer attributes and says why in
"note" (source sysfs). JSON keys are ibv_devinfo's names; numbers are JSON
numbers; an enum is its name with its number in KEY_value ("state":
"PORT_ACTIVE", "state_value": 4); MTUs are bytes with the code in
KEY_value; flag words are numbers with their names in KEY_names.`,
		Example: `  grdma dev
  grdma -j dev show rxe0
  grdma -d dev
  grdma dev info rxe0
  grdma -j dev info
  grdma dev set rxe0 name rxe_a
  grdma dev set rxe0 netns blue
  grdma dev set mlx5_0 adaptive-moderation on`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.dev(cmd, cmdArgv(cmd, args, "grdma dev help"))
		},
	}
}

func (a *app) dev(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.Dev)...)
	if err != nil {
		return err
	}
	switch verb {
	case "info":
		return a.devInfo(args)
	case "set":
		return a.devSet(args)
	case "add":
		return a.devAdd(args)
	case "delete":
		return a.devDelete(args)
	case "help":
		return cmd.Help()
	}
	return a.devShow(args)
}

func (a *app) devShow(args *argv) error {
	var name string
	if !args.Empty() {
		name = args.Next()
	}
	if err := args.Done(); err != nil {
		return err
	}
	_, devs, err := a.devices()
	if err != nil {
		return err
	}
	if name != "" {
		d, err := nldev.FindDevice(devs, name)
		if err != nil {
			return err
		}
		devs = []nldev.Device{d}
	}
	p := a.printer()
	p.StartList()
	for i := range devs {
		render.Device(p, &devs[i], a.opts.details > 0)
	}
	p.EndList()
	return p.Flush()
}

func (a *app) devSet(args *argv) error {
	if args.Empty() {
		return usagef(args.Help, "dev set needs a device name")
	}
	name := args.Next()
	attr, err := args.Keyword("attribute", "", grammar.Dev.Verb("set").Next.KeywordNames()...)
	if err != nil {
		return err
	}
	var set func(c *nldev.Client) error
	switch attr {
	case "name":
		newName, err := args.Value("new device name")
		if err != nil {
			return err
		}
		set = func(c *nldev.Client) error { return c.RenameDevice(name, newName) }
	case "netns":
		ns, err := args.Value("network namespace name or PID")
		if err != nil {
			return err
		}
		set = func(c *nldev.Client) error { return c.MoveDeviceToNetNS(name, ns) }
	case "adaptive-moderation":
		on, err := args.OnOff("adaptive-moderation")
		if err != nil {
			return err
		}
		set = func(c *nldev.Client) error { return c.SetAdaptiveModeration(name, on) }
	}
	return a.runDone(args, set)
}
