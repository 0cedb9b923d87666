package health

import (
	"fmt"
	"strconv"

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
