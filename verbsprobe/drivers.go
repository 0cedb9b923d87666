package verbsprobe

import "github.com/grdma/grdma/uverbs"

// driver creates the queues whose driver data grdma knows.
type driver interface {
	createCQ(c *uverbs.Context, cqe uint32) (probeCQ, error)
	createQP(c *uverbs.Context, init uverbs.QPInit) (probeQP, error)
}

// probeCQ and probeQP are a driver's completion queue and queue pair.
type probeCQ interface {
	cq() uverbs.CQ
	Destroy() error
}

type probeQP interface {
	qp() uverbs.QP
	Destroy() error
}

// dataPath is a queue pair the probe can send through, with its
// completion queue.
type dataPath interface {
	PostRecv(uverbs.RecvWR) error
	PostSend(uverbs.SendWR) error
}

type completions interface {
	Poll([]uverbs.WC) int
}

// drivers are the drivers the probe knows, by the name sysfs gives them.
var drivers = map[string]driver{
	"rxe":       rxeDriver{},
	"mlx5_core": mlx5Driver{},
}

// rxeDriver is Soft-RoCE: queues shared with the kernel, full data path.
type rxeDriver struct{}

type rxeCQ struct{ *uverbs.RxeCQ }
type rxeQP struct{ *uverbs.RxeQP }

func (c rxeCQ) cq() uverbs.CQ { return c.CQ }
func (q rxeQP) qp() uverbs.QP { return q.QP }

func (rxeDriver) createCQ(c *uverbs.Context, cqe uint32) (probeCQ, error) {
	cq, err := c.CreateRxeCQ(cqe)
	if err != nil {
		return nil, err
	}
	return rxeCQ{cq}, nil
}

func (rxeDriver) createQP(c *uverbs.Context, init uverbs.QPInit) (probeQP, error) {
	qp, err := c.CreateRxeQP(init)
	if err != nil {
		return nil, err
	}
	return rxeQP{qp}, nil
}

// mlx5Driver is ConnectX: the control path only.
type mlx5Driver struct{}

type mlx5CQ struct{ *uverbs.Mlx5CQ }
type mlx5QP struct{ *uverbs.Mlx5QP }

func (c mlx5CQ) cq() uverbs.CQ { return c.CQ }
func (q mlx5QP) qp() uverbs.QP { return q.QP }

func (mlx5Driver) createCQ(c *uverbs.Context, cqe uint32) (probeCQ, error) {
	cq, err := c.CreateMlx5CQ(cqe)
	if err != nil {
		return nil, err
	}
	return mlx5CQ{cq}, nil
}

func (mlx5Driver) createQP(c *uverbs.Context, init uverbs.QPInit) (probeQP, error) {
	qp, err := c.CreateMlx5QP(init)
	if err != nil {
		return nil, err
	}
	return mlx5QP{qp}, nil
}
