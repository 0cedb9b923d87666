package main

import (
	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
)

// devInfo is `grdma dev info [DEV]`.
func (a *app) devInfo(args *argv) error {
	var name string
	if !args.Empty() {
		name = args.Next()
	}
	if err := args.Done(); err != nil {
		return err
	}
	fsys, err := a.sysfs("dev info")
	if err != nil {
		return err
	}
	nl, err := a.nl()
	if err != nil {
		return err
	}
	r := &devinfo.Reader{Sysfs: fsys, Netlink: nl, OpenVerbs: a.openVerbs}
	devs, err := r.Read(name)
	if err != nil {
		return err
	}
	return a.printList(func(p *output.Printer) error {
		for i := range devs {
			render.DevInfo(p, &devs[i])
		}
		return nil
	})
}
