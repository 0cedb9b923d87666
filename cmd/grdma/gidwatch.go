package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/output"
)

// gidWatch: gid watch [DEV[/PORT]] [type T] [ipv4|ipv6] [netdev NAME]:
// a line whenever the GID gid show -q would choose changes on a port.
func (a *app) gidWatch(args *argv, count int) error {
	want, criteria, err := parseGIDArgs(args)
	if err != nil {
		return err
	}
	fsys, err := a.sysfs("gid watch")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	events, err := gid.AddressEvents(ctx)
	if err != nil {
		return err
	}
	node := a.uverbsNode()
	w := gid.Watcher{
		Read:     func() ([]gid.Table, error) { return gid.ReadTablesVerbs(fsys, want.Dev, want.Port, node) },
		Criteria: criteria,
		Events:   events,
	}
	seen := 0
	errEnough := errors.New("enough")
	err = w.Run(ctx, func(c gid.Change) error {
		p := a.printer()
		renderGIDChange(p, c, time.Now())
		if err := p.Flush(); err != nil {
			return err
		}
		if seen++; count != 0 && seen == count {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// renderGIDChange prints a change as "DEV/PORT INDEX GID (was INDEX GID)"
// ("none" for no matching GID), or as one JSON line: ifname, port, index
// and gid (absent without a match), old_index and old_gid, time.
func renderGIDChange(p *output.Printer, c gid.Change, at time.Time) {
	p.StartPlain()
	p.OpenObject("")
	p.String(output.JSONOnly, "time", "", at.UTC().Format(time.RFC3339Nano))
	p.String(output.Any, "ifname", "%s/", c.Device)
	p.Uint(output.Any, "port", "%s ", uint64(c.Port))
	entry := func(prefix string, e *gid.Entry) {
		if e == nil {
			p.Text("none")
			return
		}
		p.Uint(output.Any, prefix+"index", "%s ", uint64(e.Index))
		p.String(output.Any, prefix+"gid", "%s", e.GID.String())
	}
	entry("", c.New)
	p.Text(" (was ")
	entry("old_", c.Old)
	p.Text(")")
	p.CloseObject()
	p.EndPlain()
	if !p.JSON() {
		p.Newline()
	}
}
