package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/cminterop"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/render"
)

// probeCMInterop runs an interoperability mode of a probe over the RDMA
// CM: grdma as rping's, ucmatose's, perftest's or fi_pingpong's client (peer IP cm MODE) or server
// (listen cm MODE), speaking the tool's own protocol.
func (a *app) probeCMInterop(ctx context.Context, req grammar.ProbeRequest) error {
	in, err := grammar.ParseCMInterop(req.CM.Mode, req.CM.ModeArgs, req.CM.Raw, req.Listen)
	if err != nil {
		return err
	}
	mode := cminterop.Mode(in.Mode)
	role := cminterop.Client
	if req.Listen {
		role = cminterop.Server
	}
	cfg := cminterop.Config{Addr: in.Addr, Count: in.Count, Size: in.Size, Test: in.Test, Op: in.Op, ToS: in.ToS, Timeout: in.Timeout,
		Device: req.Options.Device, Sysfs: req.Options.Sysfs, Open: a.cmOpener(req)}
	if cfg.Timeout == 0 {
		cfg.Timeout = req.Timeout
	}
	if err := cfg.Validate(mode, role == cminterop.Server); err != nil {
		return cmdline.Usagef(grammar.CMInteropHelp, "%v", err)
	}
	if role == cminterop.Server {
		cfg.OnListen = func(addr netip.AddrPort) {
			fmt.Fprintf(os.Stderr, "grdma: probe listening over RDMA CM on %s for one %s client\n", addr, mode)
		}
	}
	r := cminterop.Run(ctx, mode, role, cfg)
	p := a.printer()
	render.CMInteropResult(p, r)
	if err := p.Flush(); err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("probe cm %s %s failed: %w", mode, role, r.Err)
	}
	return nil
}
