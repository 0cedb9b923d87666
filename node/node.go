// Package node reads what a node's RDMA devices and ports look like, once:
// every device with its uverbs character device and driver, every port
// (ports.Reader: state, rate, width, MTU, netdev) with its GID table. The
// health checks (package health), the exporter's metrics (package
// exporter), and the responder and topology code derive their verdicts,
// metrics and answers from the same Snapshot, so a port is read once per
// check run or scrape. A device that vanishes while it is read is left out;
// what cannot be read of one device or port is a ReadError and the rest is
// read still.
package node

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Snapshot is a node's RDMA devices and ports as Reader.Read found them.
type Snapshot struct {
	Devices []Device
	Ports   []Port
	// DevicesErr and PortsErr are why the devices or the ports could not
	// be listed at all; the checks of that kind then fail as a whole.
	DevicesErr, PortsErr error
	// Errors are the parts of single devices and ports that could not be
	// read; the rest of the node is read still.
	Errors []ReadError

	uverbs map[string]nldev.Chardev // by device name, as netlink answered
}

// ReadError is a part of a device or port that could not be read.
type ReadError struct {
	Device string
	Port   uint32 // 0: the device as a whole
	What   string // e.g. "ports", "gids", "counters", "rate"
	Err    error
}

func (e *ReadError) Error() string {
	if e.Port == 0 {
		return fmt.Sprintf("%s: %s: %v", e.Device, e.What, e.Err)
	}
	return fmt.Sprintf("%s/%d: %s: %v", e.Device, e.Port, e.What, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Reader reads a Snapshot.
type Reader struct {
	Sysfs sysfs.FS
	// Netlink lists the devices and their ports; *nldev.Client is one
	// (and names each device's uverbs device and driver, which makes
	// reading GID tables one request a device).
	Netlink ports.Netlink
	// OpenVerbs, when set, opens a device's uverbs device for QUERY_PORT
	// (ports.Reader.OpenVerbs); nil opens the node netlink names, else
	// sysfs's (locator.Open).
	OpenVerbs func(dev string) (ports.PortQuerier, error)
}

// Read reads the devices and ports of the node. A device that vanishes
// while it is read is left out, as a moment later it would be; a device
// whose ports cannot be read is a ReadError and the other devices are
// read still. Only failures to list anything at all end up in DevicesErr
// and PortsErr; a kernel without RDMA netlink has no ports and no error.
func (src Reader) Read() *Snapshot {
	n := &Snapshot{}
	devs, err := src.Netlink.Devices()
	if err != nil {
		n.DevicesErr, n.PortsErr = err, err
		if errors.Is(err, nldev.ErrNoRDMANetlink) {
			n.PortsErr = nil
		}
		return n
	}
	for _, d := range devs {
		di := Device{Name: d.Name, Index: d.Index, Info: d}
		sd, err := src.Sysfs.Device(d.Name)
		if sysfs.IsGone(err) {
			continue // vanished since the listing
		} else if err != nil {
			n.Errors = append(n.Errors, ReadError{Device: d.Name, What: "device", Err: err})
		}
		di.Driver = sd.Driver
		// Netlink names the uverbs device in one request; sysfs has to
		// read the ibdev of every uverbs device to find it.
		var verbs string
		if cd, ok := src.Netlink.(chardevs); ok {
			if ch, err := cd.Chardev(d.Index, "uverbs"); err == nil {
				verbs = ch.Name
				if n.uverbs == nil {
					n.uverbs = map[string]nldev.Chardev{}
				}
				n.uverbs[d.Name] = ch
			}
		}
		if verbs == "" {
			if vd, err := src.Sysfs.VerbsDeviceFor(d.Name); err == nil {
				verbs = vd.Name
			}
		}
		if verbs != "" {
			di.Verbs = "/dev/infiniband/" + verbs
			if err := unix.Access(src.Sysfs.Path("dev/infiniband/"+verbs), unix.R_OK|unix.W_OK); err != nil {
				di.VerbsErr = err
			}
		}
		n.Devices = append(n.Devices, di)
	}
	r := ports.Reader{Sysfs: src.Sysfs, Netlink: src.Netlink, OpenVerbs: src.OpenVerbs}
	ps, err := r.Read("", 0)
	if err != nil {
		// One device failed the whole listing: read device by device so
		// that only that one is missing.
		ps = nil
		for _, d := range n.Devices {
			dp, derr := r.Read(d.Name, 0)
			switch {
			case derr == nil:
				ps = append(ps, dp...)
			case sysfs.IsGone(derr) || nldev.DeviceGone(src.Netlink, d.Index, derr) || isNotFound(derr):
			default:
				n.Errors = append(n.Errors, ReadError{Device: d.Name, What: "ports", Err: derr})
			}
		}
		if len(n.Devices) == 0 {
			n.PortsErr = err
		}
	}
	// A device with no port left is one that vanished after the listing
	// (Reader skipped it), unless netlink still knows it.
	hasPorts := map[string]bool{}
	for _, p := range ps {
		hasPorts[p.Device] = true
	}
	kept := n.Devices[:0]
	for _, d := range n.Devices {
		if !hasPorts[d.Name] {
			if _, err := src.Netlink.Device(d.Index); err != nil && nldev.DeviceGone(src.Netlink, d.Index, err) {
				continue
			}
		}
		kept = append(kept, d)
	}
	n.Devices = kept
	for _, p := range ps {
		n.Ports = append(n.Ports, Port{Port: p})
	}
	n.readGIDs(src)
	return n
}

// chardevs is what netlink answers about uverbs character devices;
// *nldev.Client has it.
type chardevs interface {
	Chardev(devIndex uint32, typ string) (nldev.Chardev, error)
}

var _ chardevs = (*nldev.Client)(nil)

// readGIDs reads the GID table of every port: with one uverbs
// QUERY_GID_TABLE a device when netlink can name the device's driver
// (gid.ReadTablesVerbs), else from sysfs, slot by slot (rxe has 1,024 a
// port).
func (n *Snapshot) readGIDs(src Reader) {
	var nodeOf gid.NodeFunc
	if len(n.uverbs) > 0 {
		nodeOf = func(dev string) (uverbs.Node, error) {
			ch, ok := n.uverbs[dev]
			if !ok {
				return uverbs.Node{}, fmt.Errorf("%s: %w", dev, sysfs.ErrNoVerbsDevice)
			}
			return locator.FromNetlink(ch), nil
		}
	}
	read := func(dev string) ([]gid.Table, error) {
		if nodeOf != nil {
			return gid.ReadTablesVerbs(src.Sysfs, dev, 0, nodeOf)
		}
		return gid.ReadTables(src.Sysfs, dev, 0)
	}
	// Every device in one call: one netdev name cache and one read of
	// the address states for all (a call per device reads every netdev's
	// ifindex per device). Should one device fail it, read device by
	// device so that only its ports go without GIDs.
	type portKey struct {
		dev  string
		port uint32
	}
	tables, err := read("")
	byPort := map[portKey][]gid.Entry{}
	errs := map[string]error{}
	if err == nil {
		for _, t := range tables {
			byPort[portKey{t.Device, t.Port}] = t.Entries
		}
	} else {
		for _, pi := range n.Ports {
			dev := pi.Port.Device
			if _, done := errs[dev]; done {
				continue
			}
			tables, err := read(dev)
			if sysfs.IsGone(err) || isNotFound(err) {
				err = nil // vanished meanwhile: no GIDs, as a moment later
			}
			errs[dev] = err
			for _, t := range tables {
				byPort[portKey{t.Device, t.Port}] = t.Entries
			}
		}
	}
	for i := range n.Ports {
		pi := &n.Ports[i]
		pi.GIDs = byPort[portKey{pi.Port.Device, pi.Port.Port}]
		pi.GIDErr = errs[pi.Port.Device]
	}
}

func isNotFound(err error) bool {
	var nf *ib.NotFoundError
	return errors.As(err, &nf)
}

// Active returns the ports whose state is ACTIVE (those a probe can use).
func (n *Snapshot) Active() []ports.Port {
	var out []ports.Port
	for _, p := range n.Ports {
		if p.Port.State == ib.PortActive {
			out = append(out, p.Port)
		}
	}
	return out
}

// Port is one port with its populated GID entries.
type Port struct {
	Port ports.Port
	GIDs []gid.Entry
	// GIDErr is why the GID table could not be read: an expected GID type
	// then fails as unverifiable, not as missing.
	GIDErr error
}

// Device is one RDMA device and its uverbs character device.
type Device struct {
	Name   string
	Index  uint32       // the netlink device index
	Info   nldev.Device // what netlink says of it
	Driver string       // as sysfs names it ("rxe", "mlx5_core")
	// Verbs is the path of the uverbs character device, "" when the
	// device has none (ib_uverbs not loaded).
	Verbs string
	// VerbsErr is why Verbs cannot be opened for reading and writing
	// (permission, missing node), nil when it can.
	VerbsErr error
}
