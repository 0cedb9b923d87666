package main

import (
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) portCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "port [show|list [DEV[/PORT]]]",
		Short: "Show RDMA ports with link layer, width, speed, rate and MTU",
		Long: `Show the ports of RDMA devices (all of them, all ports of DEV, or DEV/PORT):
state, physical state, link layer, width, speed and rate (from sysfs), the
netdev, LID and SM LID (InfiniBand), and the active MTU (-d: also the max
MTU). The MTU comes from the uverbs QUERY_PORT command, as ibv_devinfo shows
it; where /dev/infiniband cannot be used, a RoCE port's MTU is derived from
its netdev's MTU the way the kernel derives it, and mtu_source says
"derived".`,
		Example: `  grdma port
  grdma -j port show mlx5_0/1
  grdma -d port show rxe0`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.port(cmd, cmdArgv(cmd, args, "grdma port help"))
		},
	}
}

func (a *app) port(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.PortObject)...)
	if err != nil {
		return err
	}
	if verb == "help" {
		return cmd.Help()
	}
	var want ib.PortRef
	if !args.Empty() {
		if want, err = args.DevPort(args.Next()); err != nil {
			return err
		}
	}
	if err := args.Done(); err != nil {
		return err
	}
	fsys, err := a.sysfs("port")
	if err != nil {
		return err
	}
	nl, err := a.nl()
	if err != nil {
		return err
	}
	r := &ports.Reader{Sysfs: fsys, Netlink: nl}
	list, err := r.Read(want.Device, want.Port)
	if err != nil {
		return err
	}
	p := a.printer()
	p.StartList()
	for i := range list {
		render.Port(p, &list[i], a.opts.details > 0)
	}
	p.EndList()
	return p.Flush()
}
