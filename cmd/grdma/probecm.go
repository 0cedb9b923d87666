package main

import (
	"context"
	"fmt"
	"os"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/verbsprobe"
)

// probeCM runs a probe over the RDMA CM: grdma's own (connect, traffic,
// bw, lat), or an interoperability mode (rping, ucmatose, fabtests).
func (a *app) probeCM(ctx context.Context, req grammar.ProbeRequest) error {
	if req.CM.Mode != "" {
		return a.probeCMInterop(ctx, req)
	}
	open := a.cmOpener(req)
	if req.Serve {
		return a.probeServe(ctx, req, nil)
	}
	var r *verbsprobe.Result
	if req.Listen {
		allow, err := verbsprobe.ResolveAllow(ctx, req.From)
		if err != nil {
			return err
		}
		name := req.Options.Device
		if name == "" {
			name = "(device of the request)"
		}
		fmt.Fprintf(os.Stderr, "grdma: probe %s listening over RDMA CM on %s for one peer\n", name, req.CM.Addr)
		r = verbsprobe.ServeCM(ctx, req.Options, verbsprobe.ServeConfig{
			Timeout: req.Timeout,
			Limits:  verbsprobe.Limits{MaxSize: req.Test.Size},
			Allow:   allow,
			OnRefused: func(r verbsprobe.Refusal) {
				fmt.Fprintf(os.Stderr, "grdma: probe %s: refused %s: %s\n", name, r.Peer, r.Reason)
			},
		}, verbsprobe.CMListen{Addr: req.CM.Addr, Open: open})
	} else {
		r = verbsprobe.ConnectWith(ctx, req.Options, req.CM.Peer.String(), verbsprobe.ConnectConfig{
			Test: req.Test, Timeout: req.Timeout, Via: verbsprobe.TransportCM, CMOpen: open, CMToS: req.CM.ToS})
	}
	series := &verbsprobe.Series{}
	series.Add(r)
	p := a.printer()
	render.ProbeResult(p, r, series, 1)
	if err := p.Flush(); err != nil {
		return err
	}
	return verbsprobe.Outcome(r, 1, 1)
}

// cmOpener opens the RDMA CM with errors that name devices and RoCE
// versions, through the command's RDMA netlink client when it answers.
func (a *app) cmOpener(req grammar.ProbeRequest) func() (*rdmacm.Channel, error) {
	return func() (*rdmacm.Channel, error) {
		c, err := a.nl()
		if err != nil {
			return locator.OpenRDMACM(req.Options.Sysfs, nil)
		}
		return locator.OpenRDMACM(req.Options.Sysfs, c)
	}
}
