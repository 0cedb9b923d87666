package udping

import (
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// newTestEndpoint is an endpoint on a fake device of its own.
func newTestEndpoint(t *testing.T) *endpoint {
	t.Helper()
	dev := uverbstest.NewDevice(uverbstest.Config{})
	c, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeallocPD(pd) })
	e, err := newEndpoint(Local{Context: c, PD: pd, Port: 1, GIDIndex: 1, GID: gid.GID(dev.GID(1)), MTU: ib.MTU1024}, NewQKey(), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close() })
	return e
}

// A wait woken by an interrupt (a prober woken by an op, maybe as a probe
// expires) or ended by its deadline is no failure of the queue pair: the
// prober remade its healthy queue pair on such a wake (restarts=1 on 6.1
// in a node that only resolved a black-holed peer again and again, firing
// PingmeshProberFailing for it).
func TestWaitInterruptedOrAtItsDeadline(t *testing.T) {
	e := newTestEndpoint(t)
	e.interrupt()
	if wcs, err := e.wait(time.Now().Add(time.Minute), time.Time{}); len(wcs) != 0 || err != nil {
		t.Errorf("interrupted: %d completions, %v; want none, no error", len(wcs), err)
	}
	if wcs, err := e.wait(time.Now().Add(20*time.Millisecond), time.Time{}); len(wcs) != 0 || err != nil {
		t.Errorf("at its deadline: %d completions, %v; want none, no error", len(wcs), err)
	}
}

// An interrupt ends a wait that polls (Spin) as well as one that sleeps.
func TestWaitInterruptedWhilePolling(t *testing.T) {
	e := newTestEndpoint(t)
	for _, spin := range []time.Duration{0, time.Hour} {
		done := make(chan error)
		go func() {
			_, err := e.wait(time.Time{}, time.Now().Add(spin))
			done <- err
		}()
		time.Sleep(10 * time.Millisecond)
		e.interrupt()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("spin %v: interrupted wait: %v", spin, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("spin %v: the interrupt did not end the wait", spin)
		}
	}
}
