package locator

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
)

// CMNetlink is what RDMA netlink tells about the RDMA CM: its character
// device, and the names of the devices it binds IDs to; *nldev.Client is
// one.
type CMNetlink interface {
	GlobalChardev(typ string) (nldev.Chardev, error)
	Device(index uint32) (nldev.Device, error)
}

var _ CMNetlink = (*nldev.Client)(nil)

// RDMACM finds the RDMA CM's character device below the root of fsys:
// the node RDMA netlink names (GET_CHARDEV "rdma_cm", which also loads
// rdma_ucm on demand, Linux 5.3 and later), else the one
// /sys/class/misc/rdma_cm describes. nl may be nil.
func RDMACM(fsys sysfs.FS, nl CMNetlink) (rdmacm.Node, error) {
	var nlErr error
	if nl != nil {
		ch, err := nl.GlobalChardev("rdma_cm")
		if err == nil {
			return rdmacm.Node{Path: fsys.Path("dev/infiniband/" + ch.Name), Dev: unix.Mkdev(unix.Major(ch.Dev), unix.Minor(ch.Dev)), ABI: ch.ABI}, nil
		}
		nlErr = err
	}
	abi, err := fsys.ReadAttr("class/misc/rdma_cm/abi_version")
	if errors.Is(err, fs.ErrNotExist) {
		if nlErr != nil {
			return rdmacm.Node{}, nlErr
		}
		return rdmacm.Node{}, fmt.Errorf("no RDMA CM device (/sys/class/misc/rdma_cm): load rdma_ucm: %w", err)
	}
	if err != nil {
		return rdmacm.Node{}, err
	}
	n := rdmacm.Node{Path: fsys.Path("dev/infiniband/rdma_cm")}
	if n.ABI, err = strconv.ParseUint(abi, 10, 32); err != nil {
		return n, fmt.Errorf("/sys/class/misc/rdma_cm/abi_version %q: %w", abi, err)
	}
	dev, err := fsys.ReadAttr("class/misc/rdma_cm/dev")
	if err != nil {
		return n, err
	}
	major, minor, ok := strings.Cut(dev, ":")
	ma, err1 := strconv.ParseUint(major, 10, 32)
	mi, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return n, fmt.Errorf("/sys/class/misc/rdma_cm/dev %q is not MAJOR:MINOR", dev)
	}
	n.Dev = unix.Mkdev(uint32(ma), uint32(mi))
	return n, nil
}

// OpenRDMACM opens the RDMA CM's character device (RDMACM) with errors
// that name devices (through nl) and the RoCE version of the source GID
// of a route: the type of that GID in the port's table, or where the
// table has it as both RoCE v1 and v2, the port's default mode as
// configfs shows it (read only where the device's directory exists:
// nothing is made or mounted for an error message).
func OpenRDMACM(fsys sysfs.FS, nl CMNetlink) (*rdmacm.Channel, error) {
	node, err := RDMACM(fsys, nl)
	if err != nil {
		return nil, err
	}
	return rdmacm.OpenNode(node, rdmacm.Options{Describe: describer(fsys, nl)})
}

// describer names a device port and the RoCE version of a GID on it for
// rdmacm's errors.
func describer(fsys sysfs.FS, nl CMNetlink) func(rdmacm.DevicePort, [16]byte) rdmacm.PortInfo {
	if nl == nil {
		return nil
	}
	return func(dp rdmacm.DevicePort, sgid [16]byte) rdmacm.PortInfo {
		d, err := nl.Device(dp.Index)
		if err != nil {
			return rdmacm.PortInfo{}
		}
		return rdmacm.PortInfo{Device: d.Name, RoCE: roceVersion(fsys, d.Name, uint32(dp.Port), gid.GID(sgid))}
	}
}

// roceVersion is the RoCE version the CM uses for sgid on a port: the
// GID's only type in the table, else the port's default mode.
func roceVersion(fsys sysfs.FS, dev string, port uint32, sgid gid.GID) string {
	if sgid.IsZero() {
		return ""
	}
	entries, err := gid.ReadTable(fsys, dev, port)
	if err != nil {
		return ""
	}
	types := map[gid.Type]bool{}
	for _, e := range entries {
		if e.GID == sgid {
			types[e.Type] = true
		}
	}
	if len(types) == 1 {
		for t := range types {
			return t.String()
		}
	}
	if def, err := cmconfig.Shown(fsys, dev, port); err == nil && types[def.RoCEMode] {
		return def.RoCEMode.String()
	}
	return ""
}

// CMDevice names the device of a device port the CM bound an ID to
// (QueryAddr's Addr.Device) by its node GUID in sysfs; where two devices
// share one (rxe devices on netdevs of one MAC) the one whose
// ibdev_index is the port's index.
func CMDevice(fsys sysfs.FS, p rdmacm.DevicePort) (string, error) {
	devs, err := fsys.Devices()
	if err != nil {
		return "", err
	}
	var names []string
	for _, d := range devs {
		if d.NodeGUID == p.NodeGUID {
			names = append(names, d.Name)
		}
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("the CM bound the connection to device index %d (node GUID %#x), which sysfs does not show", p.Index, p.NodeGUID)
	case 1:
		return names[0], nil
	}
	for _, n := range names {
		if idx, err := fsys.ReadAttr("class/infiniband/" + n + "/ibdev_index"); err == nil && idx == strconv.FormatUint(uint64(p.Index), 10) {
			return n, nil
		}
	}
	return names[0], nil
}
