package main

import (
	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/sysfs"
	"github.com/spf13/cobra"
)

func (a *app) cmCommand() *cobra.Command {
	return &cobra.Command{
		Use: `cm [show|list [DEV[/PORT]]]
  cm set DEV/PORT [roce-mode v1|v2] [tos N]`,
		Short: "Show or set the RDMA CM's RoCE mode and ToS of each port",
		Long: `Show or change the defaults the RDMA connection manager (rdma_cm) gives the
connections of each port, which applications that connect by IP address
(librdmacm, libfabric, NVMe-oF, perftest -R) get unless they set their own:

  roce-mode  the RoCE version of the GIDs the CM picks (configfs
             default_roce_mode): v2 since Linux 4.14 where the port has
             RoCE v2 GIDs; rxe has nothing else
  tos        the ToS byte (DSCP×4 + ECN) of connections whose application
             sets none (default_roce_tos): the RoCE traffic class

What rdma-core's cma_roce_mode and cma_roce_tos scripts do, in
/sys/kernel/config/rdma_cm: configfs is mounted if it is not, a device's
directory is made to read it and removed again (the values stay in the
kernel). Needs root and the rdma_cm module (rdma_ucm loads it). Text
output is in cm set's words ("cm rxe0/1 roce-mode v2 tos 0"); -j prints
ifname, port, roce_mode ("RoCE v2") and tos.`,
		Example: `  grdma cm
  grdma -j cm show mlx5_0/1
  grdma cm set mlx5_0/1 roce-mode v2
  grdma cm set mlx5_0/1 tos 106`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.cm(cmd, cmdArgv(cmd, args, "grdma cm help"))
		},
	}
}

func (a *app) cm(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", grammar.CM.VerbNames()...)
	if err != nil {
		return err
	}
	switch verb {
	case "help":
		return cmd.Help()
	case "set":
		return a.cmSet(args)
	}
	want, err := grammar.ParseCMShow(args.Words)
	if err != nil {
		return cmdline.WithHelp(err, args.Help)
	}
	fsys, devs, err := a.cmDevices(want.Device)
	if err != nil {
		return err
	}
	var all []cmconfig.Defaults
	for _, d := range devs {
		defs, err := cmconfig.Read(fsys, d.Name, want.Port)
		if err != nil {
			return err
		}
		all = append(all, defs...)
	}
	p := a.printer()
	render.CMDefaults(p, all)
	return p.Flush()
}

// cmDevices returns the root cm reads below and the RDMA devices, or the
// one named dev (an *ib.NotFoundError naming those there are when it is
// missing).
func (a *app) cmDevices(dev string) (sysfs.FS, []nldev.Device, error) {
	fsys, err := a.sysfs("cm")
	if err != nil {
		return fsys, nil, err
	}
	c, err := a.nl()
	if err != nil {
		return fsys, nil, err
	}
	devs, err := c.Devices()
	if err != nil || dev == "" {
		return fsys, devs, err
	}
	d, err := nldev.FindDevice(devs, dev)
	return fsys, []nldev.Device{d}, err
}

// cmSet changes one port's defaults.
func (a *app) cmSet(args *argv) error {
	want, set, err := grammar.ParseCMSet(args.Words)
	if err != nil {
		return cmdline.WithHelp(err, args.Help)
	}
	fsys, _, err := a.cmDevices(want.Device)
	if err != nil {
		return err
	}
	_, err = cmconfig.Set(fsys, want.Device, want.Port, set)
	return err
}
