package health

import (
	"context"
	"fmt"
	"strconv"

	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/verbsprobe"
)

// CheckProbe turns verbs probe results into check results: a probe that
// passed is PASS, one that stopped at a driver grdma cannot drive is WARN,
// one whose step failed is FAIL naming the step and its cause.
func CheckProbe(results []*verbsprobe.Result) []Result {
	out := make([]Result, 0, len(results))
	for _, pr := range results {
		r := Result{Name: "probe", Subject: fmt.Sprintf("%s/%d", pr.Device, pr.Port), Signals: []Signal{
			{"driver", pr.Driver}, {"gid_index", strconv.Itoa(pr.GIDIndex)}, {"usec", strconv.FormatInt(pr.Duration().Microseconds(), 10)},
		}}
		switch {
		case pr.Failed() != nil:
			r.Status, r.Message = Fail, pr.Err().Error()
		case pr.Unsupported != "":
			r.Status, r.Message = Warn, pr.Unsupported
		default:
			r.Status = Pass
			r.Message = fmt.Sprintf("RC QP to RTS in %v", pr.Duration().Round(10*1000))
			if pr.Traffic {
				r.Message = fmt.Sprintf("RC QP to RTS, SEND/WRITE/READ verified, in %v", pr.Duration().Round(10*1000))
			}
		}
		out = append(out, r)
	}
	return out
}

// Probe is the "probe" check: the verbs probe, with traffic, on every
// ACTIVE port of the node (a port that is down fails the ports check
// already), read through sys.
func (n *Node) Probe(ctx context.Context, sys sysfs.FS) []Result {
	if n.DevicesErr != nil {
		return []Result{failure("probe", n.DevicesErr)}
	}
	var results []*verbsprobe.Result
	for _, p := range n.Active() {
		results = append(results, verbsprobe.Run(ctx, verbsprobe.Options{
			Sysfs: sys, Device: p.Device, Port: p.Port, GIDIndex: verbsprobe.AutoGID, Traffic: true}))
	}
	return CheckProbe(results)
}

// DMABufProbe is the gpudirect.DMABufProbe of a node: NCCL's dma-buf test
// (register a dma-buf MR with fd -1) on every device that has a uverbs
// device, whose errnos gpudirect reads. nl is asked for the devices when
// the probe runs, and the client it returns stays the caller's: the probe
// does not close it. A device without a uverbs device cannot tell and is
// left out.
func DMABufProbe(sys sysfs.FS, nl func() (*nldev.Client, error)) gpudirect.DMABufProbe {
	return func() ([]gpudirect.DMABufProbeResult, error) {
		c, err := nl()
		if err != nil {
			return nil, err
		}
		devs, err := c.Devices()
		if err != nil {
			return nil, err
		}
		var out []gpudirect.DMABufProbeResult
		for _, d := range devs {
			ch, err := c.Chardev(d.Index, "uverbs")
			if err != nil {
				continue
			}
			ctx, err := uverbs.Open(sys.Root(), d.Name, locator.FromNetlink(ch))
			if err != nil {
				continue
			}
			out = append(out, gpudirect.DMABufProbeResult{Device: d.Name, Err: ctx.ProbeDMABufImport(ch.DriverID)})
			ctx.Close()
		}
		return out, nil
	}
}
