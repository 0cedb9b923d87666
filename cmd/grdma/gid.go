package main

import (
	"errors"
	"fmt"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/uverbs"
	"github.com/spf13/cobra"
)

func (a *app) gidCommand() *cobra.Command {
	var quiet bool
	var count int
	cmd := &cobra.Command{
		Use: `gid [show|list [DEV[/PORT]] [type v1|v2|ib] [ipv4|ipv6] [netdev NAME]]
  gid watch [DEV[/PORT]] [type v1|v2|ib] [ipv4|ipv6] [netdev NAME] [--count N]`,
		Short: "Show GID tables and choose a GID index",
		Long: `Show the populated GID table entries of RDMA ports, as show_gids does (DEV
PORT INDEX GID IPv4 VER DEV), optionally only those of a type, an address
family or a netdev.

With -q, print for each port only the GID index a job should use among the
matching ones (for NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX, ...): the first in
table order, a routable (IPv4 or global IPv6) GID before a link-local one.
One port prints the bare index; several print "DEV/PORT INDEX" lines. A
port without a match is named on stderr, with what it has, and the exit
status is 1.

gid watch prints a line whenever that choice changes on a port (a netdev
gained or lost an address, the kernel rewrote the table): "DEV/PORT INDEX
GID (was INDEX GID)", "none" when no GID matches; with -j one JSON object
per line (ifname, port, index, gid, old_index, old_gid, time). It wakes on
the kernel's address and link notifications and looks again every 5s; on a
kernel without RDMA it says so and exits 1.`,
		Example: `  grdma gid
  grdma gid show mlx5_0/1 type v2 ipv4
  grdma -j gid show rxe0
  NCCL_IB_GID_INDEX=$(grdma gid show mlx5_0/1 type v2 ipv4 netdev eth0 -q)`,
		RunE: func(cmd *cobra.Command, args []string) error {
			av := cmdArgv(cmd, args, "grdma gid help")
			if !av.Empty() {
				if verb, _ := cmdline.Abbrev(av.Words[0], gidVerbs); verb == "watch" {
					av.Next()
					return a.gidWatch(av, count)
				}
			}
			return a.gid(cmd, av, quiet)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the chosen GID index of each port")
	cmd.Flags().IntVar(&count, "count", 0, "with watch: exit after `N` changes (default: run until interrupted)")
	return cmd
}

// gidVerbs are gid's commands, in the order that decides abbreviations.
var gidVerbs = verbs(grammar.GID)

func (a *app) gid(cmd *cobra.Command, args *argv, quiet bool) error {
	verb, err := args.Keyword("command", "show", gidVerbs...)
	if err != nil {
		return err
	}
	if verb == "help" {
		return cmd.Help()
	}
	want, criteria, err := parseGIDArgs(args)
	if err != nil {
		return err
	}
	fsys, err := a.sysfs("gid")
	if err != nil {
		return err
	}
	tables, err := gid.ReadTablesVerbs(fsys, want.Device, want.Port, a.uverbsNode())
	if err != nil {
		return err
	}
	if quiet {
		return a.printChosenGIDs(tables, criteria)
	}
	var rows []render.GIDRow
	for _, t := range tables {
		for _, e := range gid.Filter(t.Entries, criteria) {
			rows = append(rows, render.GIDRow{Device: t.Device, Entry: e})
		}
	}
	p := a.printer()
	render.GIDs(p, rows)
	return p.Flush()
}

// parseGIDArgs parses gid show's words (gid.ParseArgs).
func parseGIDArgs(args *argv) (ib.PortRef, gid.Criteria, error) {
	want, c, err := grammar.ParseGID(args.Words)
	return want, c, cmdline.WithHelp(err, args.Help)
}

// printChosenGIDs prints the index gid.Select chooses in each table: the
// bare index for one port, "DEV/PORT INDEX" lines for several. A port
// without a match is named on stderr and makes the exit status 1.
func (a *app) printChosenGIDs(tables []gid.Table, c gid.Criteria) error {
	if len(tables) == 0 {
		return errors.New("no RDMA port")
	}
	choices, misses := gid.SelectEach(tables, c)
	for _, ch := range choices {
		fmt.Fprintln(a.stdout, ch.Line(len(tables) > 1))
	}
	return errors.Join(misses...)
}

// uverbsNode returns a device's uverbs node and rdma_driver_id from RDMA
// netlink (GET_CHARDEV); devices are resolved from one dump.
func (a *app) uverbsNode() gid.NodeFunc {
	var devs []nldev.Device
	return func(dev string) (uverbs.Node, error) {
		c, err := a.nl()
		if err != nil {
			return uverbs.Node{}, err
		}
		if devs == nil {
			if devs, err = c.Devices(); err != nil {
				return uverbs.Node{}, err
			}
		}
		d, err := nldev.FindDevice(devs, dev)
		if err != nil {
			return uverbs.Node{}, err
		}
		ch, err := c.Chardev(d.Index, "uverbs")
		return locator.FromNetlink(ch), err
	}
}
