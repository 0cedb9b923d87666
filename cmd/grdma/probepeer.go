package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/verbsprobe"
)

// probePeer runs a probe between two hosts: this side listens, or
// connects to its peer.
func (a *app) probePeer(ctx context.Context, req grammar.ProbeRequest) error {
	var r *verbsprobe.Result
	if req.Listen {
		allow, err := verbsprobe.ResolveAllow(ctx, req.From)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", req.ListenAddr)
		if err != nil {
			return fmt.Errorf("cannot listen on %s: %w (another grdma probe, or ibv_rc_pingpong, on that port?)", req.ListenAddr, unwrapOp(err))
		}
		defer ln.Close()
		fmt.Fprintf(os.Stderr, "grdma: probe %s listening on %s for one peer\n", req.Options.Device, ln.Addr())
		r = verbsprobe.Serve(ctx, req.Options, ln, verbsprobe.ServeConfig{
			Pingpong: req.Test,
			Timeout:  req.Timeout,
			// The listener's size bounds what a peer may ask for.
			Limits: verbsprobe.Limits{MaxSize: req.Test.Size},
			Allow:  allow,
			Logf: func(format string, args ...any) {
				fmt.Fprintf(os.Stderr, "grdma: probe %s: %s\n", req.Options.Device, fmt.Sprintf(format, args...))
			},
		})
	} else {
		r = verbsprobe.Connect(ctx, req.Options, req.PeerAddr, req.Test, req.Timeout)
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

// unwrapOp drops the "listen tcp :18515:" prefix net errors repeat.
func unwrapOp(err error) error {
	if op, ok := err.(*net.OpError); ok {
		return op.Err
	}
	return err
}
