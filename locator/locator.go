// Package locator finds the uverbs character device of an RDMA device and
// opens it: through RDMA netlink (GET_CHARDEV names the node, its device
// number and the driver, with nothing read in sysfs) or through sysfs
// (class/infiniband_verbs/uverbsN/ibdev, the kernel's uverbs ABI version
// and the device's driver). It sits above nldev, sysfs and uverbs, so
// that uverbs stays a client of the character device alone, beside the
// RDMA CM's.
package locator

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// FromNetlink is the uverbs node RDMA netlink's GET_CHARDEV reply names.
func FromNetlink(ch nldev.Chardev) uverbs.Node {
	return uverbs.Node{Name: ch.Name, Major: unix.Major(ch.Dev), Minor: unix.Minor(ch.Dev), DriverID: ch.DriverID}
}

// FromSysfs finds the uverbs node of RDMA device ibdev in sysfs: the
// class/infiniband_verbs/uverbsN whose ibdev it is, and the device's
// driver. Errors: sysfs.ErrNoVerbsDevice when ib_uverbs serves no such
// device (or is not loaded), or the kernel's uverbs ABI is not the one
// package uverbs speaks.
func FromSysfs(fsys sysfs.FS, ibdev string) (uverbs.Node, error) {
	abi, err := fsys.VerbsABIVersion()
	if errors.Is(err, fs.ErrNotExist) {
		return uverbs.Node{}, fmt.Errorf("%s: %w: ib_uverbs is not loaded", ibdev, sysfs.ErrNoVerbsDevice)
	}
	if err != nil {
		return uverbs.Node{}, err
	}
	if abi != uverbs.ABIVersion {
		return uverbs.Node{}, fmt.Errorf("%s: kernel uverbs ABI %d, want %d", ibdev, abi, uverbs.ABIVersion)
	}
	vd, err := fsys.VerbsDeviceFor(ibdev)
	if err != nil {
		return uverbs.Node{}, err
	}
	dev, err := fsys.Device(ibdev)
	if err != nil {
		return uverbs.Node{}, err
	}
	return uverbs.Node{Name: vd.Name, Major: vd.Major, Minor: vd.Minor, Driver: dev.Driver}, nil
}

// OpenSysfs opens the uverbs device of RDMA device ibdev as sysfs names
// it (FromSysfs), below the root of fsys.
func OpenSysfs(fsys sysfs.FS, ibdev string) (*uverbs.Context, error) {
	node, err := FromSysfs(fsys, ibdev)
	if err != nil {
		return nil, err
	}
	return uverbs.Open(fsys.Root(), ibdev, node)
}

// Chardever names the character devices of an RDMA device over RDMA
// netlink; *nldev.Client is one.
type Chardever interface {
	Chardev(devIndex uint32, typ string) (nldev.Chardev, error)
}

var _ Chardever = (*nldev.Client)(nil)

// Open opens the uverbs device of RDMA device ibdev, whose netlink index
// is devIndex, below the root of fsys: the node nl names (nothing read in
// sysfs), or, where nl is nil or does not answer (a kernel without
// GET_CHARDEV), the one sysfs names, which also says why none can be
// opened.
func Open(fsys sysfs.FS, nl Chardever, devIndex uint32, ibdev string) (*uverbs.Context, error) {
	if nl != nil {
		if ch, err := nl.Chardev(devIndex, "uverbs"); err == nil {
			return uverbs.Open(fsys.Root(), ibdev, FromNetlink(ch))
		}
	}
	return OpenSysfs(fsys, ibdev)
}
