package gid

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
)

// Entry is one populated slot of a port's GID table.
type Entry struct {
	Port   uint32
	Index  int
	GID    GID
	Type   Type
	Netdev string // the netdev of a RoCE GID; "" for IB
	// State is the state of the IPv6 address behind a RoCE GID (tentative
	// while duplicate address detection runs); readers of a live table
	// set it from ReadAddrStates.
	State AddrState
}

// IPv4 returns the IPv4 address of an IPv4-mapped RoCE GID.
func (e Entry) IPv4() (string, bool) {
	if e.Type == TypeIB {
		return "", false
	}
	addr, ok := e.GID.IPv4()
	if !ok {
		return "", false
	}
	return addr.String(), true
}

// String formats e as "3 ::ffff:10.9.0.1 RoCE v2 eth0", with the address
// state in parentheses when it is not usable.
func (e Entry) String() string {
	s := fmt.Sprintf("%d %s %s", e.Index, e.GID, e.Type)
	if e.Netdev != "" {
		s += " " + e.Netdev
	}
	if e.State != AddrUsable {
		s += " (" + e.State.String() + ")"
	}
	return s
}

// ReadTable reads the populated entries of the GID table of a port, in index
// order; what `show_gids DEV PORT` lists. Empty slots are skipped, and so are
// slots for which the kernel has no type (EINVAL): it reports those as
// invalid, e.g. a GID of a netdev in another network namespace.
func ReadTable(fsys sysfs.FS, dev string, port uint32) ([]Entry, error) {
	linkLayer, err := fsys.LinkLayer(dev, port)
	if err != nil {
		return nil, err
	}
	attrs, err := fsys.GIDAttrs(dev, port)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, a := range attrs {
		if a.GID == sysfs.ZeroGID || a.Type == "" {
			continue
		}
		g, err := Parse(a.GID)
		if err != nil {
			return nil, fmt.Errorf("%s/%d GID %d: %w", dev, port, a.Index, err)
		}
		if g.IsEmpty() {
			continue
		}
		typ, err := ParseSysfsType(a.Type, linkLayer)
		if err != nil {
			return nil, fmt.Errorf("%s/%d GID %d: %w", dev, port, a.Index, err)
		}
		entries = append(entries, Entry{Port: port, Index: a.Index, GID: g, Type: typ, Netdev: a.Netdev})
	}
	states, err := ReadAddrStates(fsys)
	if err != nil {
		return nil, err
	}
	states.Annotate(entries)
	return entries, nil
}

// Table is the GID table of one port.
type Table struct {
	Device  string
	Port    uint32
	Entries []Entry
}

// ReadTables reads the GID tables of port of device dev, of every port of
// dev (port 0), or of every port of every device (dev ""), skipping
// devices that vanish meanwhile unless dev names them. Equivalent to
// `show_gids [DEV [PORT]]`.
func ReadTables(fsys sysfs.FS, dev string, port uint32) ([]Table, error) {
	return readEachDevice(fsys, dev, port, readTables)
}

// readEachDevice reads the tables of the ports dev and port select, one
// device at a time with read, skipping devices that vanish meanwhile
// unless dev names them.
func readEachDevice(fsys sysfs.FS, dev string, port uint32, read func(sysfs.FS, []ib.PortRef) ([]Table, error)) ([]Table, error) {
	refs, err := fsys.ListPorts(dev, port)
	if err != nil {
		return nil, err
	}
	var tables []Table
	for len(refs) > 0 {
		n := 1 // the ports of one device
		for n < len(refs) && refs[n].Device == refs[0].Device {
			n++
		}
		devTables, err := read(fsys, refs[:n])
		switch {
		case sysfs.IsGone(err) && dev == "":
		case err != nil:
			return nil, err
		default:
			tables = append(tables, devTables...)
		}
		refs = refs[n:]
	}
	return tables, nil
}

func readTables(fsys sysfs.FS, refs []ib.PortRef) ([]Table, error) {
	tables := make([]Table, 0, len(refs))
	for _, ref := range refs {
		entries, err := ReadTable(fsys, ref.Device, ref.Port)
		if err != nil {
			return nil, err
		}
		tables = append(tables, Table{Device: ref.Device, Port: ref.Port, Entries: entries})
	}
	return tables, nil
}

// Family is an address family of RoCE GIDs.
type Family uint8

// Address families. The zero Family means any.
const (
	IPv4 Family = iota + 1
	IPv6
)

// String returns "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "any"
}

// Criteria says which GIDs are wanted; zero fields match anything.
type Criteria struct {
	Type   Type
	Family Family // IPv4: IPv4-mapped RoCE GIDs; IPv6: the other RoCE GIDs
	Netdev string
}

// String describes c, e.g. "RoCE v2 IPv4 GID on netdev eth0".
func (c Criteria) String() string {
	var words []string
	if c.Type != 0 {
		words = append(words, c.Type.String())
	}
	if c.Family != 0 {
		words = append(words, c.Family.String())
	}
	words = append(words, "GID")
	if c.Netdev != "" {
		words = append(words, "on netdev", c.Netdev)
	}
	return strings.Join(words, " ")
}

// Match reports whether e satisfies c.
func (c Criteria) Match(e Entry) bool {
	if c.Type != 0 && e.Type != c.Type {
		return false
	}
	if c.Netdev != "" && e.Netdev != c.Netdev {
		return false
	}
	switch c.Family {
	case IPv4:
		return e.Type != TypeIB && e.GID.IsIPv4Mapped()
	case IPv6:
		return e.Type != TypeIB && !e.GID.IsIPv4Mapped()
	}
	return true
}

// Filter returns the entries that satisfy c, in their order.
func Filter(entries []Entry, c Criteria) []Entry {
	var matched []Entry
	for _, e := range entries {
		if c.Match(e) {
			matched = append(matched, e)
		}
	}
	return matched
}

// Select returns the entry a job should use among those satisfying c: the
// first in table order, preferring usable addresses to tentative ones (the
// kernel cannot resolve an IPv6 address during duplicate address
// detection) and routable GIDs (IPv4 or global IPv6) to link-local ones,
// which cannot leave the subnet. A GID whose address failed DAD is never
// chosen. So "RoCE v2, IPv4, on eth0" answers NCCL_IB_GID_INDEX. When
// nothing matches, the error is a *NoMatchError that names what was asked
// and what the table has.
func Select(entries []Entry, c Criteria) (Entry, error) {
	best, bestRank := -1, 0
	for i, e := range entries {
		if !c.Match(e) || e.State == AddrDADFailed {
			continue
		}
		rank := 0
		if e.State == AddrTentative {
			rank += 2
		}
		if e.Type != TypeIB && e.GID.IsLinkLocal() {
			rank++
		}
		if best < 0 || rank < bestRank {
			best, bestRank = i, rank
		}
	}
	if best >= 0 {
		return entries[best], nil
	}
	return Entry{}, &NoMatchError{Criteria: c, Entries: entries}
}

// NoMatchError is Select's error when no entry satisfies the criteria.
type NoMatchError struct {
	Criteria Criteria
	Entries  []Entry // the table searched
}

func (e *NoMatchError) Error() string {
	if len(e.Entries) == 0 {
		return fmt.Sprintf("no %s: the GID table is empty", e.Criteria)
	}
	have := make([]string, len(e.Entries))
	for i, entry := range e.Entries {
		have[i] = entry.String()
	}
	return fmt.Sprintf("no %s; the table has: %s", e.Criteria, strings.Join(have, ", "))
}

// Choice is the GID Select chose in one port's table.
type Choice struct {
	Device string
	Port   uint32
	Entry  Entry
}

// Line is the line `grdma gid show -q` prints for the choice: the bare
// index when one port was asked about (so NCCL_IB_GID_INDEX=$(...)
// works), "DEV/PORT INDEX" among several.
func (c Choice) Line(severalPorts bool) string {
	if !severalPorts {
		return strconv.Itoa(c.Entry.Index)
	}
	return fmt.Sprintf("%s/%d %d", c.Device, c.Port, c.Entry.Index)
}

// PortError is a port whose table has no GID satisfying the criteria, or
// could not be read.
type PortError struct {
	Device string
	Port   uint32
	Err    error
}

func (e *PortError) Error() string { return fmt.Sprintf("%s/%d: %v", e.Device, e.Port, e.Err) }

func (e *PortError) Unwrap() error { return e.Err }

// SelectEach runs Select on every table: the choices, in table order,
// and a *PortError for each port without a match.
func SelectEach(tables []Table, c Criteria) (choices []Choice, misses []error) {
	for _, t := range tables {
		e, err := Select(t.Entries, c)
		if err != nil {
			misses = append(misses, &PortError{Device: t.Device, Port: t.Port, Err: err})
			continue
		}
		choices = append(choices, Choice{Device: t.Device, Port: t.Port, Entry: e})
	}
	return choices, misses
}
