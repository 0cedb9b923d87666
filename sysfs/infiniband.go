package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/ib"
)

// Device is an RDMA device as /sys/class/infiniband/DEV shows it; the
// sysfs counterpart of `ibstat`'s CA section.
type Device struct {
	Name         string
	NodeType     ib.NodeType // node_type "1: CA"
	NodeGUID     uint64      // node_guid "0c42:a103:0012:3456"
	SysImageGUID uint64
	FWVersion    string // fw_ver; "" when the driver has none
	NodeDesc     string
	HCAType      string // hca_type (mlx4, mlx5, ...); "" when absent
	BoardID      string // board_id; "" when absent
	// Netdev is the netdev a software device (rxe, siw) runs on, its
	// parent; "" for a hardware device (its ports' netdevs are the GIDs').
	Netdev string
	// Driver is the kernel driver of the device: the driver bound to its
	// parent bus device (device/driver, e.g. "mlx5_core"), or for software
	// devices, which have none, "rxe" (a CA with a parent netdev) or "siw"
	// (an RNIC with a parent netdev).
	Driver string
	Ports  []uint32 // the numbers under ports/, ascending
}

// Port is one port of an RDMA device as /sys/class/infiniband/DEV/ports/N
// shows it; the sysfs counterpart of `ibstatus`.
type Port struct {
	Port      uint32       // the port number, as in nldev.Port and ports.Port
	State     ib.PortState // state "4: ACTIVE"
	PhysState ib.PhysState // phys_state "5: LinkUp"
	// Rate is zero when the kernel cannot print it (EINVAL for an unknown
	// active width).
	Rate      Rate
	LinkLayer ib.LinkLayer // link_layer "Ethernet"
	LID       uint32
	SMLID     uint32
	LMC       uint8 // lid_mask_count
	SMSL      uint8
	CapMask   uint32
}

// DeviceNames lists the RDMA devices in class/infiniband, sorted. It is empty
// when ib_core is not loaded.
func (f FS) DeviceNames() ([]string, error) {
	names, err := f.listNames("class/infiniband")
	slices.Sort(names)
	return names, err
}

// Devices reads every device in class/infiniband, skipping devices that
// vanish while being read.
func (f FS) Devices() ([]Device, error) {
	names, err := f.DeviceNames()
	if err != nil {
		return nil, err
	}
	return readEach(names, f.Device)
}

// readEach reads every name with read, leaving out those that vanish
// (IsGone) and stopping at any other error.
func readEach[T any](names []string, read func(name string) (T, error)) ([]T, error) {
	all := make([]T, 0, len(names))
	for _, name := range names {
		v, err := read(name)
		if IsGone(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, v)
	}
	return all, nil
}

// Device reads the device attributes of class/infiniband/name. An error for
// which IsGone is true means the device does not exist (any more).
func (f FS) Device(name string) (Device, error) {
	if err := CheckName("RDMA device", name); err != nil {
		return Device{}, err
	}
	dir := "class/infiniband/" + name
	d := Device{Name: name}
	var err error
	var nodeType uint64
	if nodeType, err = f.readLeadingUint(dir + "/node_type"); err != nil {
		return Device{}, err
	}
	d.NodeType = ib.NodeType(nodeType)
	if d.NodeGUID, err = f.readGUID(dir + "/node_guid"); err != nil {
		return Device{}, err
	}
	if d.SysImageGUID, err = f.readGUID(dir + "/sys_image_guid"); err != nil {
		return Device{}, err
	}
	for _, opt := range []struct {
		file string
		to   *string
	}{
		{"fw_ver", &d.FWVersion},
		{"node_desc", &d.NodeDesc},
		{"hca_type", &d.HCAType},
		{"board_id", &d.BoardID},
		{"parent", &d.Netdev},
	} {
		if *opt.to, err = f.readOptional(dir + "/" + opt.file); err != nil {
			return Device{}, err
		}
	}
	if d.Driver, err = f.driver(dir, d); err != nil {
		return Device{}, err
	}
	if d.Ports, err = f.PortNumbers(name); err != nil {
		return Device{}, err
	}
	return d, nil
}

// driver names the driver behind device d in dir.
func (f FS) driver(dir string, d Device) (string, error) {
	target, err := f.ReadLink("sys/" + dir + "/device/driver")
	switch {
	case err == nil:
		return path.Base(target), nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	case d.Netdev == "":
		return "", nil
	case d.NodeType == ib.NodeRNIC:
		return "siw", nil
	default:
		return "rxe", nil
	}
}

// PortNumbers lists the port numbers of device dev, ascending.
func (f FS) PortNumbers(dev string) ([]uint32, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return nil, err
	}
	dir := "class/infiniband/" + dev + "/ports"
	names, err := f.listNames(dir)
	if err != nil {
		return nil, err
	}
	if names == nil {
		// ports/ always exists, so the device itself is gone.
		if _, err := f.ReadAttr("class/infiniband/" + dev + "/node_type"); err != nil {
			return nil, err
		}
	}
	ports := make([]uint32, 0, len(names))
	for _, name := range names {
		n, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("sys/%s/%s: not a port number", dir, name)
		}
		ports = append(ports, uint32(n))
	}
	slices.Sort(ports)
	return ports, nil
}

// Port reads the attributes of port number port of device dev.
func (f FS) Port(dev string, port uint32) (Port, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return Port{}, err
	}
	dir := portDir(dev, port)
	p := Port{Port: port}
	var v uint64
	var err error
	if v, err = f.readLeadingUint(dir + "/state"); err != nil {
		return Port{}, err
	}
	p.State = ib.PortState(v)
	if v, err = f.readLeadingUint(dir + "/phys_state"); err != nil {
		return Port{}, err
	}
	p.PhysState = ib.PhysState(v)
	ll, err := f.ReadAttr(dir + "/link_layer")
	if err != nil {
		return Port{}, err
	}
	p.LinkLayer = ib.ParseLinkLayer(ll)
	if p.Rate, err = f.PortRate(dev, port); err != nil {
		return Port{}, err
	}
	for _, num := range []struct {
		file string
		bits int
		to   func(uint64)
	}{
		{"lid", 32, func(v uint64) { p.LID = uint32(v) }},
		{"sm_lid", 32, func(v uint64) { p.SMLID = uint32(v) }},
		{"lid_mask_count", 8, func(v uint64) { p.LMC = uint8(v) }},
		{"sm_sl", 8, func(v uint64) { p.SMSL = uint8(v) }},
		{"cap_mask", 32, func(v uint64) { p.CapMask = uint32(v) }},
	} {
		v, err := f.readUint(dir+"/"+num.file, num.bits)
		if err != nil {
			return Port{}, err
		}
		num.to(v)
	}
	return p, nil
}

// Ports reads every port of device dev.
func (f FS) Ports(dev string) ([]Port, error) {
	numbers, err := f.PortNumbers(dev)
	if err != nil {
		return nil, err
	}
	ports := make([]Port, 0, len(numbers))
	for _, n := range numbers {
		p, err := f.Port(dev, n)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// PKeys reads the P_Key table of a port (pkeys/N), in index order. It is
// empty when the port has no P_Key table (RoCE on some drivers).
func (f FS) PKeys(dev string, port uint32) ([]uint16, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return nil, err
	}
	dir := portDir(dev, port) + "/pkeys"
	indexes, err := f.tableIndexes(dir)
	if err != nil {
		return nil, err
	}
	pkeys := make([]uint16, len(indexes))
	for i, index := range indexes {
		v, err := f.readUint(dir+"/"+strconv.Itoa(index), 16)
		if err != nil {
			return nil, err
		}
		pkeys[i] = uint16(v)
	}
	return pkeys, nil
}

func portDir(dev string, port uint32) string {
	return "class/infiniband/" + dev + "/ports/" + strconv.FormatUint(uint64(port), 10)
}

// tableIndexes lists the numeric entries of a table directory (gids, pkeys)
// in ascending order: the kernel creates exactly one file per table slot.
func (f FS) tableIndexes(dir string) ([]int, error) {
	names, err := f.listNames(dir)
	if err != nil {
		return nil, err
	}
	indexes := make([]int, 0, len(names))
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("sys/%s/%s: not a table index", dir, name)
		}
		indexes = append(indexes, n)
	}
	slices.Sort(indexes)
	return indexes, nil
}

// readOptional reads an attribute that not every driver has; a missing file
// yields "". A device that vanished still fails, on the next mandatory read.
func (f FS) readOptional(name string) (string, error) {
	s, err := f.ReadAttr(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return s, err
}

// readLeadingUint reads the number of a "%d: %s" attribute (state,
// phys_state, node_type).
func (f FS) readLeadingUint(name string) (uint64, error) {
	s, err := f.ReadAttr(name)
	if err != nil {
		return 0, err
	}
	num, _, _ := strings.Cut(s, ":")
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, 8)
	if err != nil {
		return 0, fmt.Errorf("sys/%s: %q: want \"<number>: <name>\"", name, s)
	}
	return v, nil
}

// readUint reads a number in C notation ("0x5", "0xa651e848", "12"), the way
// libibumad's sys_read_uint does with strtoul(..., 0).
func (f FS) readUint(name string, bits int) (uint64, error) {
	s, err := f.ReadAttr(name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(s), 0, bits)
	if err != nil {
		return 0, fmt.Errorf("sys/%s: %w", name, err)
	}
	return v, nil
}

func (f FS) readGUID(name string) (uint64, error) {
	s, err := f.ReadAttr(name)
	if err != nil {
		return 0, err
	}
	v, err := ParseGUID(s)
	if err != nil {
		return 0, fmt.Errorf("sys/%s: %w", name, err)
	}
	return v, nil
}

// ParseGUID parses a GUID in the sysfs form "0c42:a103:0012:3456" (four
// big-endian 16-bit groups), as libibumad's sys_read_guid does.
func ParseGUID(s string) (uint64, error) {
	groups := strings.Split(s, ":")
	if len(groups) != 4 {
		return 0, fmt.Errorf("GUID %q: want four groups of 4 hex digits", s)
	}
	var guid uint64
	for _, g := range groups {
		if len(g) != 4 {
			return 0, fmt.Errorf("GUID %q: want four groups of 4 hex digits", s)
		}
		v, err := strconv.ParseUint(g, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("GUID %q: want four groups of 4 hex digits", s)
		}
		guid = guid<<16 | v
	}
	return guid, nil
}

// PortRate reads ports/N/rate of device dev; the zero Rate when the kernel
// cannot print it (EINVAL for an unknown active width).
func (f FS) PortRate(dev string, port uint32) (Rate, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return Rate{}, err
	}
	dir := portDir(dev, port)
	rate, err := f.ReadAttr(dir + "/rate")
	switch {
	case isNoEntry(err):
		return Rate{}, nil
	case err != nil:
		return Rate{}, err
	}
	r, err := ParseRate(rate)
	if err != nil {
		return Rate{}, fmt.Errorf("sys/%s/rate: %w", dir, err)
	}
	return r, nil
}

// LinkLayer reads ports/N/link_layer of device dev.
func (f FS) LinkLayer(dev string, port uint32) (ib.LinkLayer, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return 0, err
	}
	ll, err := f.ReadAttr(portDir(dev, port) + "/link_layer")
	if err != nil {
		return 0, err
	}
	return ib.ParseLinkLayer(ll), nil
}

// ListPorts lists the ports that dev and port name, by device name and port
// number: port of dev, every port of dev (port 0), or every port of every
// device (dev ""), the DEV[/PORT] argument of rdma. Devices that vanish
// while being listed are left out unless dev names them; a missing device
// or port asked for is an *ib.NotFoundError.
func (f FS) ListPorts(dev string, port uint32) ([]ib.PortRef, error) {
	if dev != "" {
		if err := CheckName("RDMA device", dev); err != nil {
			return nil, err
		}
	}
	devices := []string{dev}
	if dev == "" {
		var err error
		if devices, err = f.DeviceNames(); err != nil {
			return nil, err
		}
	}
	var refs []ib.PortRef
	for _, d := range devices {
		numbers, err := f.PortNumbers(d)
		switch {
		case IsGone(err) && dev == "":
			continue
		case IsGone(err):
			return nil, &ib.NotFoundError{Device: d}
		case err != nil:
			return nil, err
		}
		if port != 0 {
			if !slices.Contains(numbers, port) {
				return nil, &ib.NotFoundError{Device: d, Port: port}
			}
			numbers = []uint32{port}
		}
		for _, n := range numbers {
			refs = append(refs, ib.PortRef{Device: d, Port: n})
		}
	}
	return refs, nil
}
