package verbsprobe

import (
	"context"
	"time"
)

// recorder runs steps and records them in a result: each step's time,
// detail, or error with its likely cause.
type recorder struct {
	ctx  context.Context // stops the probe between steps, and waits within them
	res  *Result
	diag *target // what the diagnoses read; nil before a device
	// failed, when set, is told of each failed step (an exchange tells
	// its peer).
	failed func(step string, err error)
}

func newRecorder(ctx context.Context, res *Result, diag *target) *recorder {
	return &recorder{ctx: ctx, res: res, diag: diag}
}

// stepFunc is one step: it returns what it found or made, or why it
// failed.
type stepFunc struct {
	name string
	fn   func() (detail string, err error)
}

// steps runs steps in order until one fails; it reports whether all
// passed.
func (r *recorder) steps(steps []stepFunc) bool {
	for _, s := range steps {
		if !r.step(r.ctx, s.name, s.fn) {
			return false
		}
	}
	return true
}

// step runs and records one step; it reports whether the step passed. A
// done ctx fails the step before it runs.
func (r *recorder) step(ctx context.Context, name string, fn func() (string, error)) bool {
	if ctx.Err() != nil {
		r.record(name, 0, "", interruption(ctx))
		return false
	}
	start := time.Now()
	detail, err := fn()
	r.record(name, time.Since(start), detail, err)
	return err == nil
}

// run runs fn as step name, or unrecorded when name is "" (then only a
// failure is recorded).
func (r *recorder) run(name string, fn func() (string, error)) bool {
	if name != "" {
		return r.step(r.ctx, name, fn)
	}
	_, err := fn()
	if err != nil {
		r.record("", 0, "", err)
	}
	return err == nil
}

func (r *recorder) record(name string, d time.Duration, detail string, err error) {
	s := Step{Name: name, OK: err == nil, Duration: d, Detail: detail}
	if err != nil {
		s.Err = r.diag.diagnose(name, err)
		if r.failed != nil {
			r.failed(name, err)
		}
	}
	r.res.Steps = append(r.res.Steps, s)
}
