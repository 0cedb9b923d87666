package main

import (
	"fmt"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// portRef is one port of a device.
type portRef struct {
	dev  nldev.Device
	port uint32
	// named: the user asked for this device by name, so it vanishing or
	// lacking something is an error rather than a port to skip.
	named bool
}

// selectPorts lists the ports a DEV[/PORT] argument names: one port, every
// port of one device, or (empty) every port of every device.
func selectPorts(devs []nldev.Device, want devPort) ([]portRef, error) {
	if want.Dev != "" {
		d, err := nldev.FindDevice(devs, want.Dev)
		if err != nil {
			return nil, err
		}
		if want.Port > d.NumPorts {
			return nil, fmt.Errorf("RDMA device %s has no port %d (it has %d)", d.Name, want.Port, d.NumPorts)
		}
		devs = []nldev.Device{d}
	}
	var refs []portRef
	for _, d := range devs {
		for p := uint32(1); p <= d.NumPorts; p++ {
			if want.Port == 0 || want.Port == p {
				refs = append(refs, portRef{d, p, want.Dev != ""})
			}
		}
	}
	return refs, nil
}

// vanished reports whether err comes from a device that disappeared after
// it was listed (nldev.Client.Gone).
func vanished(c *nldev.Client, d nldev.Device, err error) bool { return c.Gone(d.Index, err) }

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
