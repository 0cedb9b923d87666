package pci

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/grdma/grdma/sysfs"
)

// Attachment is where an RDMA device or a netdev sits: the bus device its
// driver is bound to and the PCI function its DMA goes through.
type Attachment struct {
	// Bus is the bus of the device ("pci", "auxiliary"); "" for a
	// virtual device (veth, or rxe on one).
	Bus string `json:"bus,omitempty"`
	// Name is the bus device, "0000:3b:00.0" or "mlx5_core.sf.2"; "" for
	// a virtual device.
	Name string `json:"name,omitempty"`
	// Driver is the driver bound to the bus device ("mlx5_core").
	Driver string `json:"driver,omitempty"`
	// Function is the PCI function: Name itself on the pci bus, else the
	// nearest function above the bus device (an auxiliary device or
	// subfunction sits below its PCI function); nil when there is none.
	Function *Address `json:"function"`
	// Netdev is the netdev a software RDMA device (rxe, siw) runs on,
	// through which it was mapped; "" for a hardware device.
	Netdev string `json:"netdev,omitempty"`
}

// RDMADevice maps the RDMA device dev (class/infiniband/DEV) to where it
// sits. A hardware device has a device link to its bus device (NCCL's
// realpath of /sys/class/infiniband/DEV/device); a software device has
// none and takes the place of the netdev named in its parent file. A
// device that does not exist is fs.ErrNotExist; a software device on a
// virtual netdev has an Attachment with only Netdev set.
func RDMADevice(fsys fs.ReadLinkFS, dev string) (Attachment, error) {
	if err := sysfs.CheckName("RDMA device", dev); err != nil {
		return Attachment{}, err
	}
	dir := "sys/class/infiniband/" + dev
	if _, err := fsys.Lstat(dir); err != nil {
		return Attachment{}, err
	}
	a, err := busDevice(fsys, dir+"/device")
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	parent, ok := readText(fsys, dir+"/parent")
	if !ok || parent == "" {
		return Attachment{}, nil
	}
	a, err = Netdev(fsys, parent)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // the netdev went away; the device goes with it
	}
	a.Netdev = parent
	return a, err
}

// Netdev maps the netdev name (class/net/NAME) to the bus device it sits
// on: the zero Attachment for a virtual one (lo, veth, bonds). A netdev
// that does not exist is fs.ErrNotExist.
func Netdev(fsys fs.ReadLinkFS, name string) (Attachment, error) {
	if err := sysfs.CheckName("netdev", name); err != nil {
		return Attachment{}, err
	}
	dir := "sys/class/net/" + name
	if _, err := fsys.Lstat(dir); err != nil {
		return Attachment{}, err
	}
	a, err := busDevice(fsys, dir+"/device")
	if errors.Is(err, fs.ErrNotExist) {
		return Attachment{}, nil
	}
	return a, err
}

// busDevice follows the device link link to the bus device.
func busDevice(fsys fs.ReadLinkFS, link string) (Attachment, error) {
	dir, err := Resolve(fsys, link)
	if err != nil {
		return Attachment{}, err
	}
	a := Attachment{Name: path.Base(dir), Driver: linkBase(fsys, dir+"/driver")}
	a.Bus = linkBase(fsys, dir+"/subsystem")
	parts := strings.Split(dir, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if isAddress(parts[i]) {
			addr, _ := ParseAddress(parts[i])
			a.Function = &addr
			break
		}
	}
	if a.Bus == "" && a.Function != nil && a.Name == a.Function.String() {
		a.Bus = "pci" // a captured tree without the subsystem link
	}
	return a, nil
}
