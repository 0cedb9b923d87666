package main

import (
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) linkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "link [show|list [DEV[/PORT]]] | add NAME type TYPE netdev NETDEV | delete NAME",
		Short: "Show RDMA links (ports); add and delete software RDMA devices",
		Long: `Show the ports of RDMA devices (all of them, all ports of DEV, or DEV/PORT),
or create and remove software RDMA devices: rxe (Soft-RoCE) and siw
(Soft-iWARP) on top of a network device. Output matches rdma link.`,
		Example: `  grdma link
  grdma -j link show rxe0/1
  grdma link show rxe0
  grdma link add rxe0 type rxe netdev eth0
  grdma link delete rxe0`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.link(cmd, cmdArgv(cmd, args, "grdma link help"))
		},
	}
}

func (a *app) link(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.Link)...)
	if err != nil {
		return err
	}
	switch verb {
	case "add":
		return a.linkAdd(args)
	case "delete":
		return a.linkDelete(args)
	case "help":
		return cmd.Help()
	}
	return a.linkShow(args)
}

func (a *app) linkShow(args *argv) error {
	var want ib.PortRef
	if !args.Empty() {
		var err error
		if want, err = args.DevPort(args.Next()); err != nil {
			return err
		}
	}
	if err := args.Done(); err != nil {
		return err
	}
	c, devs, err := a.devices()
	if err != nil {
		return err
	}
	if want.Port != 0 {
		refs, err := nldev.SelectPorts(devs, want.Device, want.Port)
		if err != nil {
			return err
		}
		port, err := c.Port(refs[0].Device.Index, want.Port)
		if err != nil {
			return err
		}
		return a.printPorts([]nldev.Port{port})
	}
	if want.Device != "" {
		d, err := nldev.FindDevice(devs, want.Device)
		if err != nil {
			return err
		}
		devs = []nldev.Device{d}
	}
	var ports []nldev.Port
	for _, d := range devs {
		dp, err := c.Ports(d.Index)
		if err != nil {
			if want.Device == "" && c.Gone(d.Index, err) {
				continue
			}
			return err
		}
		ports = append(ports, dp...)
	}
	return a.printPorts(ports)
}

func (a *app) printPorts(ports []nldev.Port) error {
	p := a.printer()
	p.StartList()
	for i := range ports {
		render.Link(p, &ports[i], a.opts.details > 0)
	}
	p.EndList()
	return p.Flush()
}

func (a *app) linkAdd(args *argv) error {
	if args.Empty() {
		return usagef(args.Help, "link add needs a device name: link add NAME type TYPE netdev NETDEV")
	}
	name := args.Next()
	var linkType, netdev string
	for !args.Empty() {
		kw, err := args.Keyword("link add parameter", "", grammar.Link.Verb("add").Next.KeywordNames()...)
		if err != nil {
			return err
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return err
		}
		if kw == "type" {
			linkType = v
		} else {
			netdev = v
		}
	}
	if linkType == "" || netdev == "" {
		return usagef(args.Help, "link add needs type TYPE and netdev NETDEV: link add %s type rxe netdev eth0", name)
	}
	c, err := a.nl()
	if err != nil {
		return err
	}
	return c.AddLink(name, linkType, netdev)
}

func (a *app) linkDelete(args *argv) error {
	name, err := args.Value("device name: link delete NAME")
	if err != nil {
		return err
	}
	return a.runDone(args, func(c *nldev.Client) error { return c.DeleteLink(name) })
}
