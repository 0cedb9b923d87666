package gid_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/sysfs"
)

// recordedTables reads the GID tables of the rxe sysfs captured on 6.12
// (rxe0: 0 fe80::..., 1 ::ffff:10.9.0.1, 2 fd00:9::1 on veth0).
func recordedTables(t *testing.T) []gid.Table {
	t.Helper()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := gid.ReadTables(fsys, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// without returns the tables with rxe0's entries matching drop removed:
// what the kernel's table holds once that address is gone.
func without(tables []gid.Table, drop func(gid.Entry) bool) []gid.Table {
	out := make([]gid.Table, len(tables))
	for i, tb := range tables {
		out[i] = gid.Table{Device: tb.Device, Port: tb.Port}
		for _, e := range tb.Entries {
			if tb.Device != "rxe0" || !drop(e) {
				out[i].Entries = append(out[i].Entries, e)
			}
		}
	}
	return out
}

func TestSelectionDiff(t *testing.T) {
	before := recordedTables(t)
	v2IPv4 := gid.Criteria{Type: gid.TypeRoCEv2, Family: gid.IPv4}
	after := without(before, func(e gid.Entry) bool { _, ok := e.IPv4(); return ok })
	changes := gid.SelectionOf(before, v2IPv4).Diff(gid.SelectionOf(after, v2IPv4), after)
	if len(changes) != 1 || changes[0].Device != "rxe0" || changes[0].Old == nil || changes[0].Old.Index != 1 || changes[0].New != nil {
		t.Fatalf("IPv4 address removed: %+v", changes)
	}
	// Back again: the GID returns at its index.
	changes = gid.SelectionOf(after, v2IPv4).Diff(gid.SelectionOf(before, v2IPv4), before)
	if len(changes) != 1 || changes[0].Old != nil || changes[0].New == nil || changes[0].New.Index != 1 {
		t.Fatalf("IPv4 address added: %+v", changes)
	}
	// With any family, losing IPv4 moves the choice to fd00:9::1 (2).
	changes = gid.SelectionOf(before, gid.Criteria{}).Diff(gid.SelectionOf(after, gid.Criteria{}), after)
	if len(changes) != 1 || changes[0].Old.Index != 1 || changes[0].New.Index != 2 {
		t.Fatalf("any family: %+v", changes)
	}
	if c := gid.SelectionOf(before, v2IPv4).Diff(gid.SelectionOf(before, v2IPv4), before); len(c) != 0 {
		t.Fatalf("no change reported as %+v", c)
	}
}

// TestWatcherRun: an event makes the watcher read again; a change is
// reported once, then nothing until the next one.
func TestWatcherRun(t *testing.T) {
	before := recordedTables(t)
	after := without(before, func(e gid.Entry) bool { _, ok := e.IPv4(); return ok })
	states := [][]gid.Table{before, before, after, after}
	reads := 0
	events := make(chan struct{}, 1)
	w := gid.Watcher{
		Read: func() ([]gid.Table, error) {
			tb := states[min(reads, len(states)-1)]
			reads++
			return tb, nil
		},
		Criteria: gid.Criteria{Type: gid.TypeRoCEv2, Family: gid.IPv4},
		Events:   events,
		Settle:   time.Millisecond,
		Interval: time.Hour,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events <- struct{}{}
	var got []gid.Change
	stop := errors.New("stop")
	err := w.Run(ctx, func(c gid.Change) error {
		got = append(got, c)
		return stop
	})
	if !errors.Is(err, stop) || len(got) != 1 || got[0].Device != "rxe0" || got[0].New != nil {
		t.Fatalf("err %v, changes %+v after %d reads", err, got, reads)
	}
}
