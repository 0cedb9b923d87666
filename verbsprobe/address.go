package verbsprobe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
)

// NoGIDError means the port's GID table has no GID the queue pair can
// use as its address.
type NoGIDError struct {
	Device  string
	Port    uint32
	Entries []gid.Entry // the populated table
}

func (e *NoGIDError) Error() string {
	if len(e.Entries) == 0 {
		return fmt.Sprintf("no usable GID on %s/%d: the GID table is empty", e.Device, e.Port)
	}
	return fmt.Sprintf("no usable GID on %s/%d; the table has: %s", e.Device, e.Port, describeEntries(e.Entries))
}

// GIDIndexError means the GID index asked for names no usable GID.
type GIDIndexError struct {
	Device  string
	Port    uint32
	Index   int
	Slots   uint32      // the table's size
	Entries []gid.Entry // the populated table
}

func (e *GIDIndexError) Error() string {
	if e.Index >= int(e.Slots) {
		return fmt.Sprintf("GID index %d is out of range: %s/%d has %d GID slots (0-%d)",
			e.Index, e.Device, e.Port, e.Slots, int(e.Slots)-1)
	}
	have := "the table is empty"
	if len(e.Entries) > 0 {
		have = "the table has: " + describeEntries(e.Entries)
	}
	return fmt.Sprintf("GID index %d of %s/%d is empty; %s", e.Index, e.Device, e.Port, have)
}

// NoLIDError means an InfiniBand port has no LID to be addressed by.
type NoLIDError struct {
	Device string
	Port   uint32
	LID    uint16
}

func (e *NoLIDError) Error() string {
	return fmt.Sprintf("port %s/%d has no usable LID (%#x)", e.Device, e.Port, e.LID)
}

func describeEntries(entries []gid.Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}

// addressPreference is the order the gid selector is asked in when no
// index is given: RoCE v2 over IPv4 (routable, what NCCL and UCX prefer),
// then other RoCE v2 (global IPv6 before link-local), then anything (RoCE
// v1).
var addressPreference = []gid.Criteria{
	{Type: gid.TypeRoCEv2, Family: gid.IPv4},
	{Type: gid.TypeRoCEv2},
	{},
}

// chooseAddress picks how the queue pair addresses itself: a GID of the
// port on RoCE (always with a GRH), its LID on InfiniBand unless a GID
// index is given.
func (d *Device) chooseAddress(ctx context.Context, res *Result) (string, error) {
	detail, err := d.target.chooseAddress(ctx)
	res.GIDIndex, res.GID, res.GIDType, res.LID = d.addr.GIDIndex, d.addr.GID, d.addr.GIDType, d.addr.LID
	return detail, err
}

func (t *target) chooseAddress(ctx context.Context) (string, error) {
	dev, port := t.opts.Device, t.opts.Port
	ib := t.port.LinkLayer == ib.LinkLayerInfiniBand
	if ib {
		if t.port.LID == 0 || t.port.LID >= 0xc000 { // unassigned, or multicast/permissive
			return "", &NoLIDError{Device: dev, Port: port, LID: t.port.LID}
		}
		t.addr.LID = t.port.LID
		if t.opts.GIDIndex == AutoGID {
			return fmt.Sprintf("LID %#x, no GRH", t.addr.LID), nil
		}
	}
	var chosen gid.Entry
	var err error
	if t.opts.GIDIndex != AutoGID {
		chosen, err = t.gidAt(t.opts.GIDIndex)
	} else {
		chosen, err = t.selectGID()
	}
	if err != nil {
		return "", err
	}
	t.addr.GIDIndex, t.addr.GID, t.addr.GIDType = chosen.Index, chosen.GID, chosen.Type
	waited, err := t.awaitUsable(ctx, &chosen)
	if err != nil {
		return "", err
	}
	detail := "GID " + chosen.String()
	if ib {
		detail += fmt.Sprintf(", LID %#x", t.addr.LID)
	}
	if waited >= addressPoll {
		detail += fmt.Sprintf(", usable after %v of IPv6 duplicate address detection on %s", waited.Round(time.Millisecond), chosen.Netdev)
	}
	return detail, nil
}

// DefaultAddressWait is how long the probe waits for the IPv6 address of
// its GID to finish duplicate address detection: Linux's defaults take up
// to about two seconds after the netdev comes up (a random delay of up to
// rtr_solicit_delay, then retrans_time per dad_transmits).
const DefaultAddressWait = 5 * time.Second

// addressPoll is how often a tentative address is looked at again.
const addressPoll = 50 * time.Millisecond

// awaitUsable waits, within Options.AddressWait, until the address of
// the GID e stands for is usable: the kernel cannot resolve a tentative
// address, and the queue pair's RTR would wait for it and may time out.
// It returns how long it waited; e.State is updated. A DAD-failed address
// is an error at once.
func (t *target) awaitUsable(ctx context.Context, e *gid.Entry) (time.Duration, error) {
	limit := t.opts.AddressWait
	if limit == 0 {
		limit = DefaultAddressWait
	}
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for e.State == gid.AddrTentative {
		select {
		case <-time.After(addressPoll):
		case <-deadline.C:
			return limit, &AddressStateError{Device: t.opts.Device, Port: t.opts.Port, Entry: *e, Waited: limit}
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("interrupted waiting for duplicate address detection of %s on %s: %w", e.GID, e.Netdev, ctx.Err())
		}
		states, err := gid.ReadAddrStates(t.opts.Sysfs)
		if err != nil {
			return time.Since(start), err
		}
		e.State = states.Of(*e)
	}
	if e.State == gid.AddrDADFailed {
		return time.Since(start), &AddressStateError{Device: t.opts.Device, Port: t.opts.Port, Entry: *e}
	}
	return time.Since(start), nil
}

// AddressStateError means the address behind the chosen GID cannot be
// used: still tentative when the wait ran out, or it failed duplicate
// address detection.
type AddressStateError struct {
	Device string
	Port   uint32
	Entry  gid.Entry
	Waited time.Duration // the bound that ran out; 0 for a DAD failure
}

func (e *AddressStateError) Error() string {
	if e.Entry.State == gid.AddrDADFailed {
		return fmt.Sprintf("GID %d %s of %s/%d is unusable: IPv6 duplicate address detection on %s failed",
			e.Entry.Index, e.Entry.GID, e.Device, e.Port, e.Entry.Netdev)
	}
	return fmt.Sprintf("GID %d %s of %s/%d is still tentative after %v: IPv6 duplicate address detection on %s has not finished",
		e.Entry.Index, e.Entry.GID, e.Device, e.Port, e.Waited.Round(time.Millisecond), e.Entry.Netdev)
}

// gidAt returns the populated GID slot index.
func (t *target) gidAt(index int) (gid.Entry, error) {
	if index < int(t.port.GIDTblLen) {
		e, ok, err := t.readGID(index)
		if err != nil || ok {
			if err == nil {
				one := []gid.Entry{e}
				err = t.annotate(one)
				e = one[0]
			}
			return e, err
		}
	}
	entries, err := t.table()
	if err != nil {
		return gid.Entry{}, err
	}
	return gid.Entry{}, &GIDIndexError{Device: t.opts.Device, Port: t.opts.Port, Index: index,
		Slots: t.port.GIDTblLen, Entries: entries}
}

// selectGID returns the entry the gid selector chooses by
// addressPreference. The table is read slot by slot (rxe has 1024, each a
// sysfs file) only until the first choice of the first preference, the
// first routable match in table order, turns up.
func (t *target) selectGID() (gid.Entry, error) {
	var entries []gid.Entry
	for i := range int(t.port.GIDTblLen) {
		e, ok, err := t.readGID(i)
		if err != nil {
			return gid.Entry{}, err
		}
		if !ok {
			continue
		}
		if addressPreference[0].Match(e) && !e.GID.IsLinkLocal() {
			return e, nil
		}
		entries = append(entries, e)
	}
	if err := t.annotate(entries); err != nil {
		return gid.Entry{}, err
	}
	for _, c := range addressPreference[1:] {
		if e, err := gid.Select(entries, c); err == nil {
			return e, nil
		}
	}
	return gid.Entry{}, &NoGIDError{Device: t.opts.Device, Port: t.opts.Port, Entries: entries}
}

// annotate sets the address state of entries from the kernel's IPv6
// address list.
func (t *target) annotate(entries []gid.Entry) error {
	if t.opts.Open != nil {
		return nil // no sysfs: the opener's device has no IPv6 address list
	}
	states, err := gid.ReadAddrStates(t.opts.Sysfs)
	if err != nil {
		return err
	}
	states.Annotate(entries)
	return nil
}

// readGID reads slot index of the port's GID table; false when it holds
// no usable GID. It skips what gid.ReadTable skips.
func (t *target) readGID(index int) (gid.Entry, bool, error) {
	if t.opts.Open != nil {
		entries, err := t.verbsTable()
		for _, e := range entries {
			if e.Index == index {
				return e, true, nil
			}
		}
		return gid.Entry{}, false, err
	}
	a, err := t.opts.Sysfs.GIDAttr(t.opts.Device, t.opts.Port, index)
	if err != nil || a.GID == sysfs.ZeroGID || a.Type == "" {
		return gid.Entry{}, false, err
	}
	g, err := gid.Parse(a.GID)
	if err != nil || g.IsEmpty() {
		return gid.Entry{}, false, err
	}
	typ, err := gid.ParseSysfsType(a.Type, t.port.LinkLayer)
	if err != nil {
		return gid.Entry{}, false, err
	}
	return gid.Entry{Port: t.opts.Port, Index: index, GID: g, Type: typ, Netdev: a.Netdev}, true, nil
}

// table is the port's populated GID table.
func (t *target) table() ([]gid.Entry, error) {
	if t.opts.Open != nil {
		return t.verbsTable()
	}
	return gid.ReadTable(t.opts.Sysfs, t.opts.Device, t.opts.Port)
}

// verbsTable is the port's GID table as QUERY_GID_TABLE gives it, read
// once: where the device was opened by Options.Open, not found in sysfs.
func (t *target) verbsTable() ([]gid.Entry, error) {
	if t.gids == nil {
		raw, err := t.verbs.QueryGIDTable(t.verbs.Node.DriverID, int(t.port.GIDTblLen))
		if err != nil {
			return nil, err
		}
		byPort, err := gid.FromVerbsTable(t.opts.Device, raw, func(uint32) string { return "" })
		if err != nil {
			return nil, err
		}
		t.gids = append([]gid.Entry{}, byPort[t.opts.Port]...)
	}
	return t.gids, nil
}
