package udping

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// cancelledAfterDeadline is a context cancelled just after the deadline
// of a wait within it passed: its Err says so, but its Done never closed
// in time to end the wait (Run's wake by an op, racing a probe's expiry).
type cancelledAfterDeadline struct{ context.Context }

func (cancelledAfterDeadline) Err() error { return context.Canceled }

// A wait whose deadline passes just before its context is cancelled (a
// prober woken by an op as a probe expires) is the caller's wake, not a
// failed queue pair: the prober remade its healthy queue pair on it
// (restarts=1 on 6.1 in a node that only resolved a black-holed peer
// again and again, firing PingmeshProberFailing for it).
func TestWaitWokenAtItsDeadline(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{})
	c, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeallocPD(pd)
	e, err := newEndpoint(Local{Context: c, PD: pd, Port: 1, GIDIndex: 1, GID: gid.GID(dev.GID(1)), MTU: ib.MTU1024}, NewQKey(), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	wcs, err := e.wait(cancelledAfterDeadline{context.Background()}, time.Now().Add(20*time.Millisecond), time.Time{})
	if len(wcs) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("woken at its deadline: %d completions, %v; want context.Canceled (Run goes on)", len(wcs), err)
	}
	// The deadline alone is no error.
	if wcs, err := e.wait(context.Background(), time.Now().Add(20*time.Millisecond), time.Time{}); len(wcs) != 0 || err != nil {
		t.Errorf("at its deadline: %d completions, %v; want none, no error", len(wcs), err)
	}
}
