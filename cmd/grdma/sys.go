package main

import (
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) sysCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "sys [show] | set netns shared|exclusive | set privileged-qkey on|off",
		Aliases: []string{"system"},
		Short:   "Show or change RDMA subsystem settings",
		Long: `Show the RDMA subsystem settings (network namespace mode, privileged Q_Key
mode, monitor support, copy-on-fork), or change the netns or privileged-qkey
mode. Text output matches rdma system; unlike rdma, -j prints JSON.`,
		Example: `  grdma sys
  grdma -j sys
  grdma sys set netns exclusive
  grdma sys set privileged-qkey on`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sys(cmd, cmdArgv(cmd, args, "grdma sys help"))
		},
	}
}

func (a *app) sys(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.Sys)...)
	if err != nil {
		return err
	}
	switch verb {
	case "set":
		return a.sysSet(args)
	case "help":
		return cmd.Help()
	}
	// rdma accepts (and ignores) the name of one setting after show.
	if !args.Empty() {
		if _, err := args.Keyword("setting", "", grammar.Sys.Verb("show").Next.Pos[0].Value.Words...); err != nil {
			return err
		}
	}
	if err := args.Done(); err != nil {
		return err
	}
	c, err := a.nl()
	if err != nil {
		return err
	}
	s, err := c.System()
	if err != nil {
		return err
	}
	p := a.printer()
	render.System(p, &s)
	return p.Flush()
}

func (a *app) sysSet(args *argv) error {
	setting, err := args.Keyword("setting", "", grammar.Sys.Verb("set").Next.VerbNames()...)
	if err != nil {
		return err
	}
	var set func(c *nldev.Client) error
	switch setting {
	case "netns":
		mode, err := args.Keyword("netns mode", "", grammar.Sys.Verb("set").Next.Verb("netns").Next.Pos[0].Value.Words...)
		if err != nil {
			return err
		}
		m := uint8(nldev.NetNSExclusive)
		if mode == "shared" {
			m = nldev.NetNSShared
		}
		set = func(c *nldev.Client) error { return c.SetNetNSMode(m) }
	case "privileged-qkey":
		on, err := args.OnOff("privileged-qkey")
		if err != nil {
			return err
		}
		set = func(c *nldev.Client) error { return c.SetPrivilegedQKey(on) }
	}
	return a.runDone(args, set)
}
