package main

import (
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// portRef is one port of a device, as DEV[/PORT] selects it.
type portRef = nldev.DevicePort

// listPorts prints one record per port as render makes it, inside one
// list; an error stops the listing and the list is still closed, so JSON
// output stays valid.
func (a *app) listPorts(refs []portRef, render func(p *output.Printer, r portRef) error) error {
	return a.printList(func(p *output.Printer) error {
		for _, r := range refs {
			if err := render(p, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// printList prints the records fill makes inside one list (a JSON array);
// an error from fill stops it, and the list is still closed, so JSON
// output stays valid.
func (a *app) printList(fill func(p *output.Printer) error) error {
	p := a.printer()
	p.StartList()
	err := fill(p)
	p.EndList()
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}
