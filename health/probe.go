package health

import (
	"context"
	"fmt"
	"strconv"

	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
)

// CheckProbe turns verbs probe results into check results: a probe that
// passed is PASS, one that stopped at a driver grdma cannot drive is WARN,
// one whose step failed is FAIL naming the step and its cause.
func CheckProbe(results []*verbsprobe.Result) []Result {
	out := make([]Result, 0, len(results))
	for _, pr := range results {
		r := Result{Name: "probe", Subject: fmt.Sprintf("%s/%d", pr.Device, pr.Port), Facts: []Fact{
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
func Probe(ctx context.Context, n *node.Snapshot, sys sysfs.FS) []Result {
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
