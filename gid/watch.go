package gid

import (
	"context"
	"errors"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Change is a port whose selected GID (Select's choice) changed: Old and
// New are nil when the port had, or has, no GID matching the criteria.
type Change struct {
	Device string
	Port   uint32
	Old    *Entry
	New    *Entry
}

// Selection is what Select chose on each port, by "DEV/PORT".
type Selection map[portKey]*Entry

type portKey struct {
	dev  string
	port uint32
}

// SelectionOf runs Select on each table and records the choices.
func SelectionOf(tables []Table, c Criteria) Selection {
	s := Selection{}
	for _, t := range tables {
		if e, err := Select(t.Entries, c); err == nil {
			s[portKey{t.Device, t.Port}] = &e
		} else {
			s[portKey{t.Device, t.Port}] = nil
		}
	}
	return s
}

// Diff lists the ports whose choice differs between s (before) and next,
// in next's table order; a port that appeared or vanished counts too.
func (s Selection) Diff(next Selection, tables []Table) []Change {
	var out []Change
	seen := map[portKey]bool{}
	for _, t := range tables {
		k := portKey{t.Device, t.Port}
		seen[k] = true
		old, had := s[k]
		cur := next[k]
		if had && sameEntry(old, cur) || !had && cur == nil {
			continue
		}
		out = append(out, Change{Device: t.Device, Port: t.Port, Old: old, New: cur})
	}
	for k, old := range s {
		if !seen[k] && old != nil {
			out = append(out, Change{Device: k.dev, Port: k.port, Old: old})
		}
	}
	return out
}

func sameEntry(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Index == b.Index && a.GID == b.GID && a.Type == b.Type && a.Netdev == b.Netdev
}

// Watcher reports changes of the GID a job would use on each port: the
// index or GID Select chooses with Criteria. The kernel rewrites RoCE GID
// tables when a netdev gains or loses an IP address, so a job started
// before with NCCL_IB_GID_INDEX can end up on another address, or on
// none.
type Watcher struct {
	// Read returns the GID tables to watch (ReadTablesVerbs, say).
	Read     func() ([]Table, error)
	Criteria Criteria
	// Events wakes the watcher: a table is read again at once, then after
	// Settle (the kernel updates GID tables from a workqueue, after the
	// address event). Nil: only Interval.
	Events <-chan struct{}
	Settle time.Duration // default 200ms
	// Interval reads the tables regardless of events (default 5s): GID
	// changes without an address event (a netdev moved) are seen too.
	Interval time.Duration
}

// Run reads the tables, then calls fn for each change until ctx ends or
// fn or a read fails. It returns ctx.Err() when ctx ends.
func (w *Watcher) Run(ctx context.Context, fn func(Change) error) error {
	settle, interval := w.Settle, w.Interval
	if settle <= 0 {
		settle = 200 * time.Millisecond
	}
	if interval <= 0 {
		interval = 5 * time.Second
	}
	tables, err := w.Read()
	if err != nil {
		return err
	}
	sel := SelectionOf(tables, w.Criteria)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	events := w.Events
	var again <-chan time.Time // the settle re-read after an event
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-events:
			if !ok {
				events = nil // the source ended: Interval goes on
				continue
			}
			again = time.After(settle)
		case <-again:
			again = nil
		case <-tick.C:
		}
		tables, err := w.Read()
		if err != nil {
			return err
		}
		next := SelectionOf(tables, w.Criteria)
		for _, c := range sel.Diff(next, tables) {
			if err := fn(c); err != nil {
				return err
			}
		}
		sel = next
	}
}

// AddressEvents subscribes to the kernel's IPv4 and IPv6 address and link
// notifications (rtnetlink) and signals on the returned channel, without
// blocking, whenever one arrives. It stops when ctx ends.
func AddressEvents(ctx context.Context) (<-chan struct{}, error) {
	const groups = unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Groups: groups})
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	go func() {
		defer close(ch)
		for {
			if _, err := conn.Receive(); err != nil {
				var opErr *netlink.OpError
				if errors.As(err, &opErr) && errors.Is(opErr.Err, unix.ENOBUFS) {
					// Events were lost: a re-read catches up anyway.
				} else {
					return
				}
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
