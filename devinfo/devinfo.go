// Package devinfo answers "what is this RDMA device?" in one place: every
// attribute `ibv_devinfo -v` prints (the extended QUERY_DEVICE and, per
// port, QUERY_PORT and the populated GIDs), the driver and the parent bus
// device, the character devices a process or container needs (uverbs,
// umad, issm, rdma_cm) and each port's netdev with its operational state
// (what `ibdev2netdev -v` shows). Equivalent to `grdma dev info`.
//
// It reads the device the way libibverbs does, without its sysfs walk:
// RDMA netlink lists the devices, their ports' netdevs and their character
// devices (GET_CHARDEV), and the uverbs device answers QUERY_DEVICE,
// QUERY_PORT and QUERY_GID_TABLE. Where the uverbs device cannot be
// opened (no permission, a container without /dev/infiniband, ib_uverbs
// not loaded) the device is read from sysfs instead, with fewer
// attributes, and Device.Note says why (Source is SourceSysfs).
package devinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Source says where a device's or port's attributes come from.
type Source string

// Sources.
const (
	// SourceVerbs: the uverbs commands, as ibv_devinfo.
	SourceVerbs Source = "verbs"
	// SourceSysfs: /sys/class/infiniband, because the uverbs device could
	// not be used; the attributes only verbs know are missing.
	SourceSysfs Source = "sysfs"
)

// Device is one RDMA device.
type Device struct {
	Name  string // hca_id
	Index uint32 // the netlink device index
	// NodeType gives ibv_devinfo's transport (Transport).
	NodeType ib.NodeType
	// Driver is the kernel driver: the driver bound to the parent bus
	// device ("mlx5_core"), or "rxe"/"siw" for the software devices.
	Driver string
	// BusDevice is the bus device the RDMA device sits on (its parent,
	// pci.RDMADevice's Attachment); nil for a software device (rxe, siw).
	BusDevice *pci.Attachment
	// FWVer is the firmware version as ibv_devinfo prints it.
	FWVer        string
	NodeGUID     uint64
	SysImageGUID uint64
	BoardID      string // "" when the device has none

	// Uverbs and RDMACM are the character devices' paths
	// (/dev/infiniband/uverbs0, /dev/infiniband/rdma_cm); "" when their
	// module is not loaded.
	Uverbs string
	RDMACM string

	// Attr is the extended QUERY_DEVICE answer, DriverAttr the driver's
	// additions (TSO, RSS hash, packet pacing: mlx5 only); Attr is nil
	// when Source is SourceSysfs.
	Attr           *uverbs.DeviceAttrEx
	DriverAttr     uverbs.DriverDeviceAttr
	NumCompVectors int

	Source Source
	// Note says why Source is SourceSysfs (the error opening uverbs).
	Note  string
	Ports []Port
}

// Port is one port of a device.
type Port struct {
	Port uint32
	// Attr is the QUERY_PORT answer. With Source SourceSysfs only the
	// fields sysfs shows are set (state, phys_state, LIDs, LMC, SM SL,
	// cap flags, width, speed, link layer) and the MTUs are MTUSource's.
	Attr      uverbs.PortAttrEx
	Source    Source
	MTUSource ports.MTUSource

	Netdev      string // "" when the port has none (in this namespace)
	NetdevIndex uint32
	// NetdevOperState is the netdev's operstate: "up", "down", ...
	NetdevOperState string

	// Umad and Issm are the port's ib_umad character devices; "" when
	// ib_umad is not loaded or the port has none (issm on RoCE).
	Umad string
	Issm string

	GIDs []gid.Entry
}

// Netlink is what this package needs of RDMA netlink; *nldev.Client has it.
type Netlink interface {
	Devices() ([]nldev.Device, error)
	PortsOf(d nldev.Device) ([]nldev.Port, error)
	Chardev(devIndex uint32, typ string) (nldev.Chardev, error)
	PortChardev(devIndex, port uint32, typ string) (nldev.Chardev, error)
	GlobalChardev(typ string) (nldev.Chardev, error)
	// Device looks a device up by index, to tell a vanished device.
	Device(devIndex uint32) (nldev.Device, error)
}

var _ Netlink = (*nldev.Client)(nil)

// Verbs is an open uverbs device; *uverbs.Context is one (see Open).
type Verbs interface {
	QueryDeviceEx() (uverbs.DeviceAttrEx, uverbs.DriverDeviceAttr, error)
	QueryPortEx(driverID uint32, port uint8) (uverbs.PortAttrEx, error)
	QueryPort(port uint8) (uverbs.PortAttr, error)
	QueryGIDTable(driverID uint32, maxEntries int) ([]uverbs.GIDEntry, error)
	CompVectors() int
	Close() error
}

var _ Verbs = (*uverbs.Context)(nil)

// Reader reads devices. A Reader is for one goroutine.
type Reader struct {
	Sysfs   sysfs.FS
	Netlink Netlink
	// OpenVerbs opens the uverbs device node of RDMA device dev; nil
	// means uverbs.Open below the root of Sysfs.
	OpenVerbs func(dev string, node uverbs.Node) (Verbs, error)

	// unserved are the character device types whose module is not
	// loaded: its class is missing in sysfs, or the kernel answered
	// ENOENT after trying to load it (a usermode helper each time). They
	// are not asked again.
	unserved map[string]bool
	netdevs  *gid.Netdevs // names the netdevs of GIDs, for every device
}

// Read returns device dev, or every device ("" for dev), ordered as
// netlink lists them. A device that vanishes while being read is left out
// unless it is the one asked for; a device that does not exist is an
// *nldev.NotFoundError.
func (r *Reader) Read(dev string) ([]Device, error) {
	devs, err := r.Netlink.Devices()
	if err != nil {
		return nil, err
	}
	if dev != "" {
		d, err := nldev.FindDevice(devs, dev)
		if err != nil {
			return nil, err
		}
		devs = []nldev.Device{d}
	}
	r.unserved = map[string]bool{}
	r.netdevs = gid.NewNetdevs(r.Sysfs)
	// Asking for the device of a module that is not loaded makes the kernel
	// try to load it (a usermode helper each time): look for the classes
	// the modules make first.
	if r.absent("class/infiniband_mad") { // ib_umad
		r.unserved["umad"], r.unserved["issm"] = true, true
	}
	rdmaCM := ""
	if len(devs) > 0 && !r.absent("class/misc/rdma_cm") { // rdma_ucm
		if ch, err := r.Netlink.GlobalChardev("rdma_cm"); err == nil {
			rdmaCM = chardevPath(ch)
		}
	}
	var result []Device
	for _, nd := range devs {
		d, err := r.readDevice(nd)
		if dev == "" && (sysfs.IsGone(err) || nldev.DeviceGone(r.Netlink, nd.Index, err)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d.RDMACM = rdmaCM
		result = append(result, d)
	}
	return result, nil
}

// absent reports whether sys/name does not exist.
func (r *Reader) absent(name string) bool {
	_, err := os.Lstat(r.Sysfs.Path("sys/" + name))
	return errors.Is(err, fs.ErrNotExist)
}

// chardevPath is where a character device netlink names lives.
func chardevPath(ch nldev.Chardev) string {
	if ch.Name == "" || strings.ContainsAny(ch.Name, "/\x00") {
		return ""
	}
	return "/dev/infiniband/" + ch.Name
}

func (r *Reader) readDevice(nd nldev.Device) (Device, error) {
	d := Device{Name: nd.Name, Index: nd.Index, NodeType: nd.NodeType, NodeGUID: nd.NodeGUID,
		SysImageGUID: nd.SysImageGUID, FWVer: nd.FWVersion}
	nlPorts, err := r.Netlink.PortsOf(nd)
	if err != nil {
		return d, err
	}
	if err := r.addBus(&d); err != nil {
		return d, err
	}
	if d.BusDevice != nil { // software devices (rxe, siw) have no board_id
		if d.BoardID, err = r.optionalAttr(d.Name, "board_id"); err != nil {
			return d, err
		}
	}
	ch, err := r.Netlink.Chardev(nd.Index, "uverbs")
	var verbs Verbs
	if err == nil {
		d.Uverbs = chardevPath(ch)
		if d.Driver == "" {
			d.Driver = uverbs.DriverName(ch.DriverID)
		}
		verbs, err = r.open(nd.Name, locator.FromNetlink(ch))
	}
	if err != nil {
		if nldev.DeviceGone(r.Netlink, nd.Index, err) {
			return d, err
		}
		d.Source, d.Note = SourceSysfs, err.Error()
		return d, r.fromSysfs(&d, nlPorts)
	}
	defer verbs.Close()
	d.Source = SourceVerbs
	if err := r.fromVerbs(&d, verbs, ch.DriverID, nlPorts); err != nil {
		return d, err
	}
	return d, r.addPortExtras(&d, nlPorts)
}

func (r *Reader) open(dev string, node uverbs.Node) (Verbs, error) {
	if r.OpenVerbs != nil {
		return r.OpenVerbs(dev, node)
	}
	c, err := uverbs.Open(r.Sysfs.Root(), dev, node)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// addBus reads the bus device and its driver (pci.RDMADevice, the one
// mapping of RDMA devices to bus devices). A software device (rxe, siw)
// has none: pci.RDMADevice places it at its netdev's function for
// topology, but that bus device is the netdev's, not its own; its driver
// is named from netlink's driver id (readDevice) or by the sysfs fallback.
func (r *Reader) addBus(d *Device) error {
	a, err := pci.RDMADevice(r.Sysfs, d.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // not in this sysfs: netlink alone describes it
	}
	if err != nil || a.Netdev != "" || a.Name == "" {
		return err
	}
	d.BusDevice = &a
	if a.Driver != "" {
		d.Driver = a.Driver
	}
	return nil
}

// optionalAttr reads class/infiniband/DEV/name, "" when it does not exist.
func (r *Reader) optionalAttr(dev, name string) (string, error) {
	v, err := r.Sysfs.ReadAttr("class/infiniband/" + dev + "/" + name)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return "", nil
	}
	return v, err
}

// fromVerbs fills in the device and its ports from the uverbs device.
func (r *Reader) fromVerbs(d *Device, verbs Verbs, driverID uint32, nlPorts []nldev.Port) error {
	attr, drv, err := verbs.QueryDeviceEx()
	if err != nil {
		return err
	}
	d.Attr, d.DriverAttr, d.NumCompVectors = &attr, drv, verbs.CompVectors()
	d.FWVer = FormatFWVer(d.Driver, attr.Base.FWVer)
	d.NodeGUID, d.SysImageGUID = attr.Base.NodeGUID.Uint64(), attr.Base.SysImageGUID.Uint64()
	room := 0
	// An int: the kernel clamps phys_port_cnt to 255, which a uint8 counter
	// would never pass.
	for port := 1; port <= int(attr.Base.PhysPortCnt); port++ {
		n := uint8(port)
		pa, err := verbs.QueryPortEx(driverID, n)
		if err != nil {
			// Kernels before the ioctl method: the write command.
			var legacy uverbs.PortAttr
			if legacy, err = verbs.QueryPort(n); err != nil {
				return err
			}
			pa = uverbs.PortAttrEx{PortAttr: legacy}
		}
		d.Ports = append(d.Ports, Port{Port: uint32(n), Attr: pa, Source: SourceVerbs, MTUSource: ports.MTUFromVerbs})
		room += int(pa.GIDTblLen)
	}
	if room == 0 {
		return nil
	}
	entries, err := verbs.QueryGIDTable(driverID, min(room, maxGIDEntries))
	if err != nil {
		// Kernels before 5.9: the GIDs from sysfs.
		for i := range d.Ports {
			if d.Ports[i].GIDs, err = gid.ReadTable(r.Sysfs, d.Name, d.Ports[i].Port); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range nlPorts {
		r.netdevs.Add(p.NetdevIndex, p.Netdev)
	}
	byPort, err := gid.FromVerbsTable(d.Name, entries, r.netdevs.Name)
	if err != nil {
		return err
	}
	for i := range d.Ports {
		d.Ports[i].GIDs = byPort[d.Ports[i].Port]
	}
	return nil
}

// maxGIDEntries is the most GID entries one QUERY_GID_TABLE answer can
// hold (its length is a 16-bit byte count).
const maxGIDEntries = 0xffff / 32

// addPortExtras adds each port's netdev, its operstate and the port's
// character devices.
func (r *Reader) addPortExtras(d *Device, nlPorts []nldev.Port) error {
	for i := range d.Ports {
		p := &d.Ports[i]
		for _, np := range nlPorts {
			if np.Port == p.Port {
				p.Netdev, p.NetdevIndex = np.Netdev, np.NetdevIndex
			}
		}
		if p.Netdev != "" {
			state, err := r.Sysfs.ReadAttr("class/net/" + p.Netdev + "/operstate")
			switch {
			case err == nil:
				p.NetdevOperState = state
			case !sysfs.IsGone(err):
				return err
			}
		}
		p.Umad = r.portChardev(d.Index, p.Port, "umad")
		if p.Umad != "" {
			p.Issm = r.portChardev(d.Index, p.Port, "issm")
		}
	}
	return nil
}

// portChardev returns the path of a port's character device of type typ,
// "" when there is none.
func (r *Reader) portChardev(devIndex, port uint32, typ string) string {
	if r.unserved[typ] {
		return ""
	}
	ch, err := r.Netlink.PortChardev(devIndex, port, typ)
	if errors.Is(err, unix.ENOENT) {
		r.unserved[typ] = true
	}
	if err != nil {
		return ""
	}
	return chardevPath(ch)
}

// FormatFWVer formats a raw firmware version as the providers of
// libibverbs do: mlx5 "16.35.2000" (%d.%d.%04d), mlx4 %d.%d.%03d, the
// others %d.%d.%d of its 16-bit fields major, minor and sub-minor.
func FormatFWVer(driver string, raw uint64) string {
	major, minor, sub := (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff
	switch driver {
	case "mlx5_core":
		return fmt.Sprintf("%d.%d.%04d", major, minor, sub)
	case "mlx4_core":
		return fmt.Sprintf("%d.%d.%03d", major, minor, sub)
	}
	return fmt.Sprintf("%d.%d.%d", major, minor, sub)
}
