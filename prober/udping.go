package prober

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/grdma/grdma/pingmesh"
	"github.com/grdma/grdma/udping"
	"github.com/prometheus/client_golang/prometheus"
)

// UDPinger is the exporter's UD prober (udping.Prober, the queue pair
// the pingmesh probes through): Ping sends one probe of size bytes (0:
// the path MTU) to target (host:port of its responder) and returns its
// result, once answered, lost or failed.
type UDPinger interface {
	Ping(ctx context.Context, target string, size int) (udping.Result, error)
}

// probeUDPing sends the module's UD pings to the target's responder, one
// at a time, Interval apart or when the previous was answered or lost: it
// succeeds when at least one was answered.
func probeUDPing(ctx context.Context, p *probe) *Failure {
	u := p.module.UDPing
	count, interval, sizes := u.Count, time.Duration(u.Interval), u.Sizes
	if count == 0 {
		count = DefaultUDPingCount
	}
	if interval == 0 {
		interval = DefaultUDPingInterval
	}
	if len(sizes) == 0 {
		sizes = append(slices.Clone(udping.DefaultSizes), 0)
	}
	port := u.TargetPort
	if port == 0 {
		port = pingmesh.DefaultPort
	}
	addr, f := p.address(ctx, port)
	if f != nil {
		return f
	}
	target := addr.String()
	var rtts, delays []time.Duration
	sent, lost := 0, 0
	var lastErr error
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range count {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		r, err := p.h.opts.Pinger.Ping(ctx, target, sizes[i%len(sizes)])
		switch r.Outcome {
		case udping.OutcomeReply:
			sent++
			rtts = append(rtts, r.Network())
			if r.DelayKnown {
				delays = append(delays, r.Delay)
			}
		case udping.OutcomeTimeout, udping.OutcomeEchoLost:
			sent++
			lost++
		default:
			if err == nil {
				err = r.Err
			}
			lastErr = err
			p.log.Info("ping not sent", "size", sizes[i%len(sizes)], "outcome", string(r.Outcome), "err", err)
		}
	}
	m := p.metrics
	m.add(famUDSent, float64(sent))
	m.add(famUDLost, float64(lost))
	if len(rtts) > 0 {
		m.addMetric(summary(famUDRTT.Desc(), rtts))
		if len(delays) > 0 {
			m.addMetric(summary(famUDDelay.Desc(), delays))
		}
		return nil
	}
	switch {
	case sent > 0:
		return fail(ReasonLost, "", fmt.Errorf("%d pings sent to %s, none answered", sent, target))
	case lastErr == nil:
		return fail(ReasonTimeout, "", fmt.Errorf("no ping sent to %s in the probe's time", target))
	case errors.Is(lastErr, context.DeadlineExceeded) && ctx.Err() != nil:
		return fail(ReasonTimeout, "", lastErr)
	}
	switch pingmesh.Kind(lastErr) {
	case pingmesh.KindResolve:
		return fail(ReasonResolve, "", lastErr)
	case pingmesh.KindNoResponder:
		return fail(ReasonNoResponder, "", lastErr)
	case pingmesh.KindRefused:
		return fail(ReasonRefused, "", lastErr)
	}
	return fail(ReasonFailed, "", lastErr)
}

// summary is a const summary of samples: min, median, p99, max.
func summary(desc *prometheus.Desc, samples []time.Duration) prometheus.Metric {
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	at := func(q float64) float64 { return s[int(q*float64(len(s)-1)+0.5)].Seconds() }
	return prometheus.MustNewConstSummary(desc, uint64(len(s)), sum.Seconds(),
		map[float64]float64{0: at(0), 0.5: at(0.5), 0.99: at(0.99), 1: at(1)})
}
