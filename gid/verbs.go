package gid

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// NodeFunc returns a device's uverbs node with its enum rdma_driver_id,
// which the uverbs ioctl ABI needs, from RDMA netlink (nldev's
// Chardev(index, "uverbs")): the device is opened without a sysfs walk.
type NodeFunc func(dev string) (uverbs.Node, error)

// ReadTablesVerbs is ReadTables with one uverbs QUERY_GID_TABLE request per
// device (what ibv_devinfo -v does, Linux 5.9+) instead of up to three
// sysfs reads per slot (rxe has 1,024 slots a port: thousands of reads a
// device). A device whose uverbs device cannot be used (no ib_uverbs, no
// permission, an older kernel) is read from sysfs.
func ReadTablesVerbs(fsys sysfs.FS, dev string, port uint32, nodeOf NodeFunc) ([]Table, error) {
	names := NewNetdevs(fsys)
	states, err := ReadAddrStates(fsys)
	if err != nil {
		return nil, err
	}
	return readEachDevice(fsys, dev, port, func(fsys sysfs.FS, refs []ib.PortRef) ([]Table, error) {
		tables, err := tablesFromVerbs(fsys, refs, nodeOf, names)
		if err != nil {
			return readTables(fsys, refs)
		}
		for _, t := range tables {
			states.Annotate(t.Entries)
		}
		return tables, nil
	})
}

// tablesFromVerbs asks the device for its GID table and splits it into
// the requested ports.
func tablesFromVerbs(fsys sysfs.FS, refs []ib.PortRef, nodeOf NodeFunc, names *Netdevs) ([]Table, error) {
	dev := refs[0].Device
	node, err := nodeOf(dev)
	if err != nil {
		return nil, err
	}
	id := node.DriverID
	ctx, err := uverbs.Open(fsys.Root(), dev, node)
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	portNums, err := fsys.PortNumbers(dev)
	if err != nil {
		return nil, err
	}
	room := 0
	for _, p := range portNums {
		if p > math.MaxUint8 { // uverbs numbers ports in 8 bits: sysfs then
			return nil, fmt.Errorf("%s: port %d is beyond the uverbs ABI's 8-bit port numbers", dev, p)
		}
		attr, err := ctx.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		room += int(attr.GIDTblLen)
	}
	raw, err := ctx.QueryGIDTable(id, room)
	if err != nil {
		return nil, err
	}
	byPort, err := FromVerbsTable(dev, raw, names.Name)
	if err != nil {
		return nil, err
	}
	tables := make([]Table, 0, len(refs))
	for _, ref := range refs {
		tables = append(tables, Table{Device: dev, Port: ref.Port, Entries: byPort[ref.Port]})
	}
	return tables, nil
}

// FromVerbsTable converts the answer of QUERY_GID_TABLE for device dev:
// the populated entries of each port, by index; netdev names the netdev of
// an ifindex.
func FromVerbsTable(dev string, raw []uverbs.GIDEntry, netdev func(ifindex uint32) string) (map[uint32][]Entry, error) {
	byPort := map[uint32][]Entry{}
	for _, r := range raw {
		e, err := FromVerbs(r, netdev)
		if err != nil {
			return nil, fmt.Errorf("%s/%d GID %d: %w", dev, r.Port, r.Index, err)
		}
		if !e.GID.IsEmpty() {
			byPort[r.Port] = append(byPort[r.Port], e)
		}
	}
	for _, entries := range byPort {
		slices.SortFunc(entries, func(a, b Entry) int { return a.Index - b.Index })
	}
	return byPort, nil
}

// FromVerbs converts a GID entry of QUERY_GID_TABLE; netdev names the
// netdev of an ifindex.
func FromVerbs(r uverbs.GIDEntry, netdev func(ifindex uint32) string) (Entry, error) {
	e := Entry{Port: r.Port, Index: int(r.Index), GID: GID(r.GID)}
	switch r.Type {
	case uverbs.GIDTypeIB:
		e.Type = TypeIB
	case uverbs.GIDTypeRoCEv1:
		e.Type = TypeRoCEv1
	case uverbs.GIDTypeRoCEv2:
		e.Type = TypeRoCEv2
	default:
		return e, fmt.Errorf("%w %d", ErrUnknownType, r.Type)
	}
	if r.NetdevIfindex != 0 {
		e.Netdev = netdev(r.NetdevIfindex)
	}
	return e, nil
}

// Netdevs names netdevs by ifindex for GID table entries, which carry only
// the index: first from the names it was told (Add, e.g. the ports' own
// netdevs, which RDMA netlink names), then, at the first index it was not
// told, from every netdev in class/net under the sysfs root, read once. A
// Netdevs is for one goroutine.
type Netdevs struct {
	fsys   sysfs.FS
	byIdx  map[uint32]string
	loaded bool
}

// NewNetdevs returns a Netdevs reading class/net under fsys.
func NewNetdevs(fsys sysfs.FS) *Netdevs {
	return &Netdevs{fsys: fsys, byIdx: map[uint32]string{}}
}

// Add tells n the name of netdev ifindex.
func (n *Netdevs) Add(ifindex uint32, name string) {
	if ifindex != 0 && name != "" {
		n.byIdx[ifindex] = name
	}
}

// Name returns the name of netdev ifindex, "" for one that does not exist.
func (n *Netdevs) Name(ifindex uint32) string {
	if name, ok := n.byIdx[ifindex]; ok || n.loaded {
		return name
	}
	n.loaded = true
	entries, _ := n.fsys.ReadDir("sys/class/net")
	for _, de := range entries {
		s, err := n.fsys.ReadAttr(path.Join("class/net", de.Name(), "ifindex"))
		if err != nil {
			continue
		}
		i, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		if _, told := n.byIdx[uint32(i)]; err == nil && !told {
			n.byIdx[uint32(i)] = de.Name()
		}
	}
	return n.byIdx[ifindex]
}
