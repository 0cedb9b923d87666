package locator

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/cmconfig"
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
	abi, err := fsys.ReadAttr("sys/class/misc/rdma_cm/abi_version")
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
	dev, err := fsys.ReadAttr("sys/class/misc/rdma_cm/dev")
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
// that name devices (through nl) and their ports' default RoCE mode as
// configfs shows it (read only where the device's directory exists:
// nothing is made or mounted for an error message).
func OpenRDMACM(fsys sysfs.FS, nl CMNetlink) (*rdmacm.Channel, error) {
	node, err := RDMACM(fsys, nl)
	if err != nil {
		return nil, err
	}
	return rdmacm.OpenNode(node, rdmacm.Options{Describe: describer(fsys, nl)})
}

// describer names a device port for rdmacm's errors.
func describer(fsys sysfs.FS, nl CMNetlink) func(devIndex uint32, port uint8) rdmacm.PortInfo {
	if nl == nil {
		return nil
	}
	return func(devIndex uint32, port uint8) rdmacm.PortInfo {
		d, err := nl.Device(devIndex)
		if err != nil {
			return rdmacm.PortInfo{}
		}
		info := rdmacm.PortInfo{Device: d.Name}
		if def, err := cmconfig.Shown(fsys, d.Name, uint32(port)); err == nil {
			info.RoCE = def.RoCEMode.String()
		}
		return info
	}
}
