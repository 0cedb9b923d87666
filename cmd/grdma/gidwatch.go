package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/render"
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
	// A watch waits for devices to come; on a kernel without RDMA none can.
	if a.opts.sysfsRoot == "" {
		if _, err := a.nl(); errors.Is(err, nldev.ErrNoRDMANetlink) {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	events, err := gid.AddressEvents(ctx)
	if err != nil {
		return err
	}
	node := a.uverbsNode()
	w := gid.Watcher{
		Read:     func() ([]gid.Table, error) { return gid.ReadTablesVerbs(fsys, want.Device, want.Port, node) },
		Criteria: criteria,
		Events:   events,
	}
	seen := 0
	errEnough := errors.New("enough")
	err = w.Run(ctx, func(c gid.Change) error {
		p := a.printer()
		render.GIDChange(p, c, time.Now())
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
