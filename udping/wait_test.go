package udping

import (
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// newTestEndpoint is an endpoint on a fake device of its own.
func newTestEndpoint(t *testing.T) *endpoint {
	t.Helper()
	return newEndpointOn(t, uverbstest.NewDevice(uverbstest.Config{}))
}

// newEndpointOn is an endpoint on dev.
func newEndpointOn(t *testing.T, dev *uverbstest.Device) *endpoint {
	t.Helper()
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

// Only a receive wakes a sleeping endpoint: its own send's completion
// waits for the next wake (on 6.12 rxe completes a send from its worker,
// and the responder woke twice for each echo). That wake returns it,
// first, so that the send slot is free again.
func TestWaitSendsDoNotWake(t *testing.T) {
	fab := uverbstest.NewFabric()
	e, f := newEndpointOn(t, fab.NewDevice(uverbstest.Config{})), newEndpointOn(t, fab.NewDevice(uverbstest.Config{}))
	ah, err := e.ah(f.addr.GID)
	if err != nil {
		t.Fatal(err)
	}
	defer e.l.Context.DestroyAH(ah)
	const sleep = 300 * time.Millisecond
	type waited struct {
		wcs  []uverbs.WC
		err  error
		took time.Duration
	}
	done := make(chan waited)
	start := time.Now()
	go func() {
		wcs, err := e.wait(start.Add(sleep), time.Time{})
		done <- waited{append([]uverbs.WC(nil), wcs...), err, time.Since(start)}
	}()
	time.Sleep(20 * time.Millisecond) // e sleeps
	slot, out, ok := e.sendBuf(HeaderSize)
	if !ok {
		t.Fatal("no send slot")
	}
	PutHeader(out, Header{Kind: KindProbe, Session: 1, ID: 1})
	if err := e.send(slot, HeaderSize, &ah, f.addr); err != nil {
		t.Fatal(err)
	}
	// f's receive is there, so e's send completed.
	wcs, err := f.wait(time.Now().Add(10*time.Second), time.Time{})
	if err != nil || len(wcs) != 1 || wcs[0].WRID&sendFlag != 0 || wcs[0].Status != uverbs.WCSuccess {
		t.Fatalf("f's wait: %v, %v; want its receive", wcs, err)
	}
	w := <-done
	if w.err != nil || w.took < sleep {
		t.Fatalf("e's wait: %v after %v; want its whole %v (a send's completion woke it)", w.err, w.took, sleep)
	}
	if len(w.wcs) != 1 || w.wcs[0].WRID != sendFlag|uint64(slot) || w.wcs[0].Status != uverbs.WCSuccess {
		t.Fatalf("e's wait returned %v; want its send's completion", w.wcs)
	}
}
