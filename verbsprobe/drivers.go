package verbsprobe

import (
	"context"

	"github.com/grdma/grdma/uverbs"
)

// probeCQ and probeQP are a driver's completion queue and queue pair.
type probeCQ interface {
	CQ() uverbs.CQ
	Destroy() error
}

type probeQP interface {
	QP() uverbs.QP
	Destroy() error
}

// dataPath is a queue pair the probe can send through; completions is its
// completion queue.
type dataPath interface {
	PostRecv(uverbs.RecvWR) error
	PostSend(uverbs.SendWR) error
}

type completions interface {
	Poll([]uverbs.WC) int
	// Wait returns at least one completion, waiting for it on the
	// queue's completion channel (no CPU while it waits).
	Wait(ctx context.Context, wcs []uverbs.WC) (int, error)
}

// driver creates the queues whose driver data grdma knows.
type driver struct {
	createCQ func(c *uverbs.Context, init uverbs.CQInit) (probeCQ, error)
	createQP func(c *uverbs.Context, init uverbs.QPInit) (probeQP, error)
	// events: its completion queues take a completion channel.
	events bool
	// software: its protocol runs in the kernel on this machine's CPUs,
	// which a busy-polling loop gives up now and then (spin.Empty).
	software bool
}

// drivers are the drivers the probe knows, by the name sysfs gives them:
// rxe with its data path (queues shared with the kernel), mlx5 without.
var drivers = map[string]driver{
	"rxe": {
		createCQ: asProbe[probeCQ]((*uverbs.Context).CreateRxeCQWith),
		createQP: asProbe[probeQP]((*uverbs.Context).CreateRxeQP),
		events:   true,
		software: true,
	},
	"mlx5_core": {
		// No data path, so no completion channel either.
		createCQ: asProbe[probeCQ](func(c *uverbs.Context, init uverbs.CQInit) (*uverbs.Mlx5CQ, error) {
			return c.CreateMlx5CQ(init.CQE)
		}),
		createQP: asProbe[probeQP]((*uverbs.Context).CreateMlx5QP),
	},
}

// asProbe makes a driver's typed constructor return the probe's interface
// I, with a nil interface (not a nil pointer in one) on error.
func asProbe[I, A, T any](create func(*uverbs.Context, A) (T, error)) func(*uverbs.Context, A) (I, error) {
	return func(c *uverbs.Context, arg A) (I, error) {
		made, err := create(c, arg)
		if err != nil {
			var none I
			return none, err
		}
		return any(made).(I), nil
	}
}
