package main

import (
	"context"
	"fmt"
	"time"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
)

// probePing pings the UD ping responder of req.PeerAddr (`grdma probe
// DEV serve` there) as ping does: a line a probe until count or Ctrl-C,
// then the summary. It fails (exit 1) when no reply came.
func (a *app) probePing(ctx context.Context, req grammar.ProbeRequest, key []byte) error {
	dev, err := a.openProbeDevice(ctx, req)
	if dev == nil {
		return err
	}
	defer dev.Close()
	// One target, one probe out at a time mostly: little memory pinned
	// (under the 64 KiB RLIMIT_MEMLOCK of some distributions' users).
	cfg := udping.ProberConfig{Timeout: req.Timeout, Results: 16, Receives: 8, Sends: 4}
	if cfg.Timeout == 0 {
		cfg.Timeout = udping.DefaultTimeout
	}
	prober, err := verbsprobe.NewUDProber(dev, cfg, verbsprobe.ConnectConfig{Timeout: req.Timeout, Key: key})
	if err != nil {
		return fmt.Errorf("ping from %s: %w", dev.Name(), err)
	}
	defer prober.Close()
	runCtx, stop := context.WithCancel(context.Background()) // Run ends after the last result, not at Ctrl-C
	defer stop()
	done := make(chan error, 1)
	go func() { done <- prober.Run(runCtx) }()
	defer func() { stop(); <-done }()

	target := req.PeerAddr
	responder, mtu, err := prober.Lookup(ctx, target)
	if err != nil {
		return fmt.Errorf("ping %s: %w", target, err)
	}
	tc := udping.TargetConfig{Rate: float64(time.Second) / float64(req.Interval), Count: req.Count}
	if req.PingSize != 0 {
		if req.PingSize > mtu {
			return fmt.Errorf("ping %s: size %d is larger than the path MTU %d (a datagram is one packet)", target, req.PingSize, mtu)
		}
		tc.Sizes = []int{req.PingSize}
	}
	p := a.printer()
	render.PingHeader(p, target, dev.Name(), responder, mtu, udping.Sizes(tc.Sizes, mtu), prober.Timestamps())
	if err := p.Flush(); err != nil {
		return err
	}
	summary := &udping.Summary{Target: target}
	start := time.Now()
	if err := prober.Add(target, tc); err != nil {
		return err
	}
	results := prober.Results()
loop:
	for got := 0; req.Count == 0 || got < req.Count; {
		select {
		case r, ok := <-results:
			if !ok {
				return fmt.Errorf("ping %s: the prober stopped: %w", target, <-done)
			}
			if r.Outcome == udping.OutcomeResolve {
				// Asked again (the responder restarted?): say so, go on.
				fmt.Fprintf(a.stderr, "grdma: ping %s: %v\n", target, r.Err)
				continue
			}
			got++
			summary.Add(r)
			render.PingResult(p, r)
			if err := p.Flush(); err != nil {
				return err
			}
		case <-ctx.Done():
			break loop // interrupted: the summary of what came
		}
	}
	render.PingSummary(p, summary, responder, time.Since(start))
	if err := p.Flush(); err != nil {
		return err
	}
	if summary.Replies == 0 {
		return fmt.Errorf("ping %s: no reply to %d probes", target, summary.Sent)
	}
	return nil
}
