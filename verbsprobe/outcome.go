package verbsprobe

import "fmt"

// Outcome is the error of a probe whose last result is r, after runs of
// count runs: the failed step with its likely cause, the driver not
// supported, or an interruption before count runs (all passed); nil when
// every run passed. It is what `grdma probe` exits 1 with.
func Outcome(r *Result, runs, count int) error {
	target := fmt.Sprintf("%s/%d", r.Device, r.Port)
	run := ""
	if count > 1 {
		run = fmt.Sprintf(" (run %d of %d)", runs, count)
	}
	if s := r.Failed(); s != nil {
		msg := fmt.Sprintf("probe %s failed at %s%s: %v", target, s.Name, run, s.Err.Err)
		if s.Err.Cause != "" {
			msg += "\n  likely cause: " + s.Err.Cause
		}
		return fmt.Errorf("%s", msg)
	}
	if r.Unsupported != "" {
		return fmt.Errorf("probe %s%s: %s", target, run, r.Unsupported)
	}
	if runs < count {
		return fmt.Errorf("probe %s interrupted after %d of %d runs, all passed", target, runs, count)
	}
	return nil
}
