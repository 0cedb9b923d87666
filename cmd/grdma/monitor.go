package main

import (
	"errors"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) monitorCommand() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "monitor [--count N]",
		Short: "Print RDMA device events as they happen",
		Long: `Print RDMA netlink events: devices registered, unregistered and renamed,
netdevs attached to, detached from and renamed under ports. Text matches
rdma monitor; with -j each event is one JSON object on its own line (with
rdma's keys), so the stream can be read line by line. Needs a kernel that
sends these events (Linux 6.13, or a backport); elsewhere grdma says so and
exits 2. Unprivileged users may listen.`,
		Example: `  grdma monitor
  grdma -j monitor --count 1     # wait for one event`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := monitorArgs(cmd, args); err != nil {
				return err
			}
			if cmd.Flags().Changed("count") && count < 1 {
				return usagef("grdma monitor --help", "--count must be a number of events from 1, not %d", count)
			}
			return a.monitor(count)
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "exit after `N` events (default: run until interrupted)")
	return cmd
}

func (a *app) monitor(count int) error {
	c, err := a.nl()
	if err != nil {
		return err
	}
	m, err := c.MonitorNetNS(a.opts.netns)
	if errors.Is(err, nldev.ErrMonitorUnsupported) {
		return &cannotRunError{err}
	}
	if err != nil {
		return err
	}
	defer m.Close()
	for seen := 0; count == 0 || seen < count; {
		events, err := m.Receive()
		if err != nil {
			return err
		}
		p := a.printer()
		for i := range events {
			render.Event(p, &events[i])
			if seen++; count != 0 && seen == count {
				break
			}
		}
		if err := p.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// monitorArgs accepts no words but help (rdma monitor help).
func monitorArgs(cmd *cobra.Command, words []string) error {
	args := cmdArgv(cmd, words, "grdma monitor --help")
	if !args.Empty() {
		if _, err := args.Keyword("argument", "", "help"); err != nil {
			return err
		}
	}
	return args.Done()
}
