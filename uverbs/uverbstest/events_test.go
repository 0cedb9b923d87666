package uverbstest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// A completion arrives as an event: armed and empty, the queue is waited
// for through the channel; the wait returns once the SEND is done, and
// DESTROY_CQ counts the events read.
func TestCompletionEvent(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 5 * time.Millisecond}
	})
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	if n := b.cq.Poll(make([]uverbs.WC, 1)); n != 0 {
		t.Fatal("a completion before anything was sent")
	}
	b.recv(1, 0, 8)
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.cq.WaitEvent(ctx); err != nil {
		t.Fatal(err)
	}
	wcs := make([]uverbs.WC, 2)
	if n := b.cq.Poll(wcs); n != 1 {
		t.Fatalf("%d completions after the event, want 1", n)
	}
	wantWC(t, wcs[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 8)
	a.wait(1)
	// Armed again, with an event written and not read: DESTROY_CQ drops
	// it and counts only the one read.
	b.recv(3, 0, 8)
	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	a.post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	a.wait(1)
	if err := b.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	b.qp = nil
	ev, err := b.cq.DestroyEvents()
	if err != nil {
		t.Fatal(err)
	}
	b.cq = nil
	if ev.Comp != 1 || ev.Async != 0 {
		t.Errorf("DESTROY_CQ reports %+v events, want 1 completion event", ev)
	}
}

// Wait ends with its context: cancelled, or past its deadline, with no
// thread left behind and the queue still armed for the next wait.
func TestWaitCancelled(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := e.cq.Wait(ctx, make([]uverbs.WC, 4))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Wait did not return")
	}
	short, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	start := time.Now()
	_, err := e.cq.Wait(short, make([]uverbs.WC, 4))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 25*time.Millisecond {
		t.Errorf("Wait with a deadline: %v after %v", err, time.Since(start))
	}
	// Both waits armed the queue once: it stays armed until an event.
	if n := e.dev.Calls(uverbstest.OpReqNotifyCQ); n != 1 {
		t.Errorf("%d REQ_NOTIFY_CQ for two waits without an event, want 1", n)
	}
	e.recv(1, 0, 8)
	e.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	if wcs := e.wait(2); len(wcs) != 2 {
		t.Errorf("completions %+v", wcs)
	}
}

// Armed for solicited completions only, a queue's event comes with the
// first SEND that asks for it; the completions before it come with it.
func TestSolicitedEvents(t *testing.T) {
	fab := uverbstest.NewFabric()
	a := newEnd(t, fab.NewDevice(uverbstest.Config{}))
	b := newEndSignalling(t, fab.NewDevice(uverbstest.Config{}), false)
	a.connect(b, defaultLink)
	b.connect(a, defaultLink)
	b.recv(1, 0, 8)
	b.recv(2, 8, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan int)
	go func() {
		n, err := b.cq.WaitSolicited(ctx, make([]uverbs.WC, 4))
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	a.post(uverbs.SendWR{ID: 3, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	a.wait(1)
	select {
	case n := <-got:
		// Poll found the first receive before arming, which is fine:
		// then the wait never blocked.
		if n != 1 {
			t.Errorf("%d completions", n)
		}
		return
	case <-time.After(50 * time.Millisecond):
	}
	a.post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSolicited, SGL: []uverbs.SGE{a.sge(0, 8)}})
	if n := <-got; n != 2 {
		t.Errorf("the solicited event brought %d completions, want both receives", n)
	}
}

// One channel serves two queues: each waiter gets its own queue's event,
// whoever reads the channel.
func TestSharedChannel(t *testing.T) {
	dev := uverbstest.NewDevice(uverbstest.Config{})
	e := newEnd(t, dev)
	e.connect(e, defaultLink)
	other, err := e.c.CreateRxeCQWith(uverbs.CQInit{CQE: 4, Channel: e.ch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	otherDone := make(chan error, 1)
	go func() { _, err := other.Wait(ctx, make([]uverbs.WC, 1)); otherDone <- err }()
	e.recv(1, 0, 8)
	e.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	e.wait(2)
	select {
	case err := <-otherDone:
		t.Fatalf("the other queue's waiter returned (%v) without a completion", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := other.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err == nil {
		t.Error("a waiter on a destroyed queue returned no error")
	}
}

// A closed channel wakes its waiters; a queue without a channel cannot be
// waited for.
func TestChannelClosedAndMissing(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	done := make(chan error)
	go func() { _, err := e.cq.Wait(context.Background(), make([]uverbs.WC, 1)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	e.ch.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Wait on a closed channel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the channel did not wake the waiter")
	}
	plain, err := e.c.CreateRxeCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Destroy()
	if _, err := plain.Wait(context.Background(), make([]uverbs.WC, 1)); err == nil {
		t.Error("Wait on a CQ without a channel returned no error")
	}
	if err := plain.Arm(false); err == nil {
		t.Error("Arm on a CQ without a channel returned no error")
	}
}

// Interrupt ends the WaitUntil it finds parked, or the next one when none
// waits, once; Wait, with a context, ignores it.
func TestWaitUntilInterrupted(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	wcs := make([]uverbs.WC, 4)
	e.ch.Interrupt()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.cq.Wait(ctx, wcs); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with an interrupt pending: %v, want its context's end", err)
	}
	if n, err := e.cq.WaitUntil(time.Time{}, wcs); n != 0 || !errors.Is(err, uverbs.ErrInterrupted) {
		t.Errorf("WaitUntil after Interrupt: %d, %v; want ErrInterrupted", n, err)
	}
	// Taken: the next wait lasts until its deadline.
	deadline := time.Now().Add(20 * time.Millisecond)
	if n, err := e.cq.WaitUntil(deadline, wcs); n != 0 || err != nil || time.Now().Before(deadline) {
		t.Errorf("WaitUntil after an interrupted one: %d, %v before its deadline (%v)", n, err, time.Now().Before(deadline))
	}
	done := make(chan error)
	go func() { _, err := e.cq.WaitUntil(time.Time{}, wcs); done <- err }()
	time.Sleep(20 * time.Millisecond) // parked in the poller, most likely
	e.ch.Interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, uverbs.ErrInterrupted) {
			t.Errorf("interrupted WaitUntil: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Interrupt did not end the WaitUntil")
	}
	// Completions come first; the interrupt waits for the next call.
	if err := e.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	e.recv(1, 0, 8)
	e.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cq.WaitEvent(ctx); err != nil { // a completion is queued
		t.Fatal(err)
	}
	e.ch.Interrupt()
	n, err := e.cq.WaitUntil(time.Time{}, wcs)
	if n == 0 || err != nil {
		t.Fatalf("WaitUntil with completions and an interrupt: %d, %v; want the completions", n, err)
	}
	if n < 2 {
		e.wait(2 - n)
	}
	if n, err := e.cq.WaitUntil(time.Time{}, wcs); n != 0 || !errors.Is(err, uverbs.ErrInterrupted) {
		t.Errorf("WaitUntil after the completions: %d, %v; want ErrInterrupted", n, err)
	}
}

// A WaitUntil with the deadline of the one before does not set it on the
// file again (a responder waits until its next chore, many times), yet a
// wake in between (Interrupt, a context's end) is not left on the file:
// the next wait with that deadline sleeps until an event or the deadline.
func TestWaitUntilSameDeadline(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 50 * time.Millisecond}
	})
	wcs := make([]uverbs.WC, 4)
	deadline := time.Now().Add(10 * time.Second)
	receive := func(id uint64, what string) {
		t.Helper()
		b.recv(id, 0, 8)
		a.post(uverbs.SendWR{ID: id + 100, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		n, err := b.cq.WaitUntil(deadline, wcs)
		if err != nil || n != 1 {
			t.Fatalf("%s: %d, %v; want the receive", what, n, err)
		}
		wantWC(t, wcs[0], id, uverbs.WCSuccess, uverbs.WCRecv, 8)
		a.wait(1)
	}
	receive(1, "the first wait")
	receive(2, "a wait with the same deadline")

	// Interrupted while parked: the file's deadline is a wake's now.
	done := make(chan error)
	go func() { _, err := b.cq.WaitUntil(deadline, wcs); done <- err }()
	time.Sleep(20 * time.Millisecond) // parked in the poller, most likely
	b.ch.Interrupt()
	if err := <-done; !errors.Is(err, uverbs.ErrInterrupted) {
		t.Fatalf("interrupted WaitUntil: %v", err)
	}
	receive(3, "the same deadline after an interrupt")

	// A context's end wakes the reader the same way.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.cq.Wait(ctx, wcs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a context: %v", err)
	}
	receive(4, "the same deadline after a context's end")

	// A deadline that passed ends the wait; the same one again ends at
	// once, a later one waits for its event.
	near := time.Now().Add(20 * time.Millisecond)
	for i := range 2 {
		if n, err := b.cq.WaitUntil(near, wcs); n != 0 || err != nil || time.Now().Before(near) {
			t.Fatalf("wait %d to a deadline: %d, %v before it (%v)", i+1, n, err, time.Now().Before(near))
		}
	}
	receive(5, "a later deadline after one passed")
}

// WaitUntil sleeps on the channel until an event: completions that come
// while it waits are returned.
func TestWaitUntilEvent(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 5 * time.Millisecond}
	})
	b.recv(1, 0, 8)
	got := make(chan []uverbs.WC)
	go func() {
		wcs := make([]uverbs.WC, 4)
		n, err := b.cq.WaitUntil(time.Now().Add(10*time.Second), wcs)
		if err != nil {
			t.Error(err)
		}
		got <- wcs[:n]
	}()
	a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
	wcs := <-got
	if len(wcs) != 1 {
		t.Fatalf("%d completions, want the receive", len(wcs))
	}
	wantWC(t, wcs[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 8)
	a.wait(1)
}

// Two queues on one channel: a WaitUntil behind the other's reader gets
// its queue's event, ends at its deadline, and Interrupt ends one wait.
func TestWaitUntilSharedChannel(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	other, err := e.c.CreateRxeCQWith(uverbs.CQInit{CQE: 4, Channel: e.ch})
	if err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() { _, err := other.WaitUntil(time.Time{}, make([]uverbs.WC, 1)); otherDone <- err }()
	time.Sleep(20 * time.Millisecond) // other reads the channel, most likely
	wcs := make([]uverbs.WC, 4)
	e.recv(1, 0, 8)
	e.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(0, 8)}})
	for got := 0; got < 2; {
		n, err := e.cq.WaitUntil(time.Now().Add(10*time.Second), wcs)
		if err != nil || n == 0 {
			t.Fatalf("WaitUntil on a shared channel: %d, %v after %d completions", n, err, got)
		}
		got += n
	}
	deadline := time.Now().Add(20 * time.Millisecond)
	if n, err := e.cq.WaitUntil(deadline, wcs); n != 0 || err != nil || time.Now().Before(deadline) {
		t.Errorf("WaitUntil behind another: %d, %v before its deadline (%v)", n, err, time.Now().Before(deadline))
	}
	select {
	case err := <-otherDone:
		t.Fatalf("the other queue's waiter returned (%v) without a completion", err)
	default:
	}
	// One interrupt, one wait ended: the other's, the only one.
	e.ch.Interrupt()
	select {
	case err := <-otherDone:
		if !errors.Is(err, uverbs.ErrInterrupted) {
			t.Errorf("the other's interrupted WaitUntil: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Interrupt did not end the other's WaitUntil")
	}
	deadline = time.Now().Add(20 * time.Millisecond)
	if n, err := e.cq.WaitUntil(deadline, wcs); n != 0 || err != nil || time.Now().Before(deadline) {
		t.Errorf("WaitUntil after the other took the interrupt: %d, %v before its deadline (%v)", n, err, time.Now().Before(deadline))
	}
	if err := other.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// WaitUntil as the channel's only waiter allocates nothing: an event loop
// waits for every packet, and on an emulated CPU each allocation and timer
// costs tens of microseconds.
func TestWaitUntilAllocs(t *testing.T) {
	e := newEnd(t, uverbstest.NewDevice(uverbstest.Config{}))
	e.connect(e, defaultLink)
	wcs := make([]uverbs.WC, 4)
	if _, err := e.cq.WaitUntil(time.Now(), wcs); err != nil { // arms the queue, once
		t.Fatal(err)
	}
	waits := map[string]func() (int, error){
		"to its deadline": func() (int, error) { return e.cq.WaitUntil(time.Now().Add(time.Millisecond), wcs) },
		"interrupted": func() (int, error) {
			e.ch.Interrupt()
			return e.cq.WaitUntil(time.Time{}, wcs)
		},
	}
	for name, wait := range waits {
		var err error
		if allocs := testing.AllocsPerRun(50, func() {
			if _, werr := wait(); werr != nil && !errors.Is(werr, uverbs.ErrInterrupted) {
				err = werr
			}
		}); allocs != 0 || err != nil {
			t.Errorf("WaitUntil %s: %v allocations, %v", name, allocs, err)
		}
	}
}

// A queue alone on its channel: WaitUntil takes the event that ends its
// sleep as the wake and leaves it in the file, for the next wait to read
// before it arms the queue again (one read(2) less between a wake and the
// program's answer). The file never holds more than that event.
func TestWaitUntilLeavesItsEvent(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 2 * time.Millisecond}
	})
	wcs := make([]uverbs.WC, 4)
	for i := range 20 {
		b.recv(uint64(i), 0, 8)
		arms := b.dev.Calls(uverbstest.OpReqNotifyCQ)
		type waited struct {
			n   int
			err error
		}
		done := make(chan waited, 1)
		go func() {
			n, err := b.cq.WaitUntil(time.Now().Add(10*time.Second), wcs)
			done <- waited{n, err}
		}()
		// The send after the queue is armed: its completion makes an event.
		for b.dev.Calls(uverbstest.OpReqNotifyCQ) == arms {
			time.Sleep(100 * time.Microsecond)
		}
		a.post(uverbs.SendWR{ID: uint64(100 + i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		w := <-done
		if w.err != nil || w.n != 1 {
			t.Fatalf("wait %d: %d, %v; want the receive", i+1, w.n, w.err)
		}
		wantWC(t, wcs[0], uint64(i), uverbs.WCSuccess, uverbs.WCRecv, 8)
		if got := b.dev.UnreadEvents(); got != 1 {
			t.Fatalf("after wait %d: %d events unread, want the one of this wait", i+1, got)
		}
		a.wait(1)
	}
	// Another kind of wait takes it as read already: it sleeps until its
	// context ends, and leaves nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if n, err := b.cq.Wait(ctx, wcs); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait after WaitUntil's: %d, %v; want its context's end", n, err)
	}
	if got := b.dev.UnreadEvents(); got != 0 {
		t.Errorf("after Wait: %d events unread", got)
	}
}

// WaitUntil after the queue was armed or waited for another way, or a
// WaitUntil ended armed: an event that came while nobody waited may be
// in the file, the queue disarmed by it. The next WaitUntil takes it and
// arms the queue again: the completion after it still wakes the wait
// (a lost wake would sleep until the deadline).
func TestWaitUntilAfterOtherWaits(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 5 * time.Millisecond}
	})
	wcs := make([]uverbs.WC, 4)
	// arrive: a receive completes while nobody waits, and its event
	// comes (the queue is armed); the next WaitUntil finds it polling.
	arrive := func(what string) {
		t.Helper()
		b.recv(1, 0, 8)
		a.post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		a.wait(1)
		for end := time.Now().Add(10 * time.Second); b.dev.UnreadEvents() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: no event for the receive", what)
			}
		}
		if n, err := b.cq.WaitUntil(time.Now().Add(10*time.Second), wcs); n != 1 || err != nil {
			t.Fatalf("%s: %d, %v; want the receive that came", what, n, err)
		}
	}
	// exchange: a receive that completes after WaitUntil went to sleep.
	exchange := func(what string) {
		t.Helper()
		b.recv(3, 0, 8)
		a.post(uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		deadline := time.Now().Add(5 * time.Second)
		if n, err := b.cq.WaitUntil(deadline, wcs); n != 1 || err != nil {
			t.Fatalf("%s: %d, %v (deadline passed: %v); want the receive", what, n, err, !time.Now().Before(deadline))
		}
		a.wait(1)
	}

	if err := b.cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	arrive("armed with Arm")
	exchange("WaitUntil after Arm")

	near := time.Now().Add(20 * time.Millisecond)
	if n, err := b.cq.WaitUntil(near, wcs); n != 0 || err != nil {
		t.Fatalf("WaitUntil to its deadline: %d, %v", n, err)
	}
	arrive("after a WaitUntil ended at its deadline")
	exchange("WaitUntil after one ended at its deadline")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.cq.Wait(ctx, wcs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a context: %v", err)
	}
	arrive("after a Wait's context ended")
	exchange("WaitUntil after a Wait")

	b.ch.Interrupt()
	if _, err := b.cq.WaitUntil(time.Time{}, wcs); !errors.Is(err, uverbs.ErrInterrupted) {
		t.Fatalf("interrupted WaitUntil: %v", err)
	}
	exchange("WaitUntil after an interrupted one")
}

// A queue whose WaitUntil left its event in the file, then joined on its
// channel by another: its waits read the file for both now, and take that
// event as read already, not as a new one.
func TestWaitUntilThenShared(t *testing.T) {
	a, b, fab := pair(t, defaultLink)
	fab.Impair(func(uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Delay: 5 * time.Millisecond}
	})
	wcs := make([]uverbs.WC, 4)
	receive := func(id uint64, what string) {
		t.Helper()
		b.recv(id, 0, 8)
		a.post(uverbs.SendWR{ID: id + 100, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}})
		deadline := time.Now().Add(5 * time.Second)
		if n, err := b.cq.WaitUntil(deadline, wcs); n != 1 || err != nil {
			t.Fatalf("%s: %d, %v (deadline passed: %v); want the receive", what, n, err, !time.Now().Before(deadline))
		}
		a.wait(1)
	}
	receive(1, "alone on the channel")
	if got := b.dev.UnreadEvents(); got > 1 {
		t.Fatalf("%d events unread after a wait alone, want at most its own", got)
	}
	other, err := b.c.CreateRxeCQWith(uverbs.CQInit{CQE: 4, Channel: b.ch})
	if err != nil {
		t.Fatal(err)
	}
	receive(2, "sharing the channel")
	receive(3, "sharing the channel, again")
	if err := other.Destroy(); err != nil {
		t.Fatal(err)
	}
	receive(4, "alone again")
	receive(5, "alone again, again")
	if got := b.dev.UnreadEvents(); got > 1 {
		t.Errorf("%d events unread at the end, want at most the last wait's", got)
	}
}
