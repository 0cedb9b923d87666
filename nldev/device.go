package nldev

import (
	"errors"
	"fmt"

	"github.com/grdma/grdma/ib"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// DeviceTypeSMI marks an SMI sub-device (RDMA_DEVICE_TYPE_SMI).
const DeviceTypeSMI = 1

// Device is an RDMA device as RDMA_NLDEV_CMD_GET reports it.
// Equivalent to one entry of `rdma dev show`.
type Device struct {
	Index          uint32
	Name           string
	NumPorts       uint32 // PORT_INDEX in a device reply is rdma_end_port()
	CapFlags       uint64 // device_cap_flags
	FWVersion      string
	NodeGUID       uint64 // host order, as sysfs prints it
	SysImageGUID   uint64
	NodeType       ib.NodeType
	DIM            uint8 // adaptive moderation: 0 off, 1 on
	Type           uint8 // DeviceTypeSMI for sub-devices
	ParentName     string
	NameAssignType uint8  // 1 when the name was chosen by user space
	Protocol       string // "ib", "roce", "iw", "opa", "usnic"

	attrSet
}

func (d *Device) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrDevIndex:
			d.Index = ad.Uint32()
		case AttrDevName:
			d.Name = ad.String()
		case AttrPortIndex:
			d.NumPorts = ad.Uint32()
		case AttrCapFlags:
			d.CapFlags = ad.Uint64()
		case AttrFWVersion:
			d.FWVersion = ad.String()
		case AttrNodeGUID:
			d.NodeGUID = ad.Uint64()
		case AttrSysImageGUID:
			d.SysImageGUID = ad.Uint64()
		case AttrDevNodeType:
			d.NodeType = ib.NodeType(ad.Uint8())
		case AttrDevDIM:
			d.DIM = ad.Uint8()
		case AttrDevType:
			d.Type = ad.Uint8()
		case AttrParentName:
			d.ParentName = ad.String()
		case AttrNameAssignType:
			d.NameAssignType = ad.Uint8()
		case AttrDevProtocol:
			d.Protocol = ad.String()
		default:
			continue // attributes of newer kernels
		}
		d.add(a)
	}
	return ad.Err()
}

// Devices lists every RDMA device visible in the socket's network namespace,
// in kernel index order. Equivalent to `rdma dev show`.
func (c *Client) Devices() ([]Device, error) {
	var devs []Device
	err := c.dump(CmdGet, nil, func() { devs = devs[:0] }, func(b []byte) error {
		var d Device
		if err := decodeMessage(b, d.decode); err != nil {
			return err
		}
		devs = append(devs, d)
		return nil
	})
	return devs, wrap("list RDMA devices", err, nil)
}

// Gone reports whether err, an answer about the device of index, means
// that the device went away: the kernel answers EINVAL (or ENODEV) for an
// index no device has, uverbs answers EIO on a device being removed, and a
// fresh look-up of the index fails with EINVAL or ENODEV. Listings of every device skip such a device, as a listing made a
// moment later would; the one place this rule lives.
func (c *Client) Gone(index uint32, err error) bool { return DeviceGone(c, index, err) }

// DeviceLookup looks a device up by index; *Client is one.
type DeviceLookup interface {
	Device(index uint32) (Device, error)
}

// DeviceGone is Client.Gone for any DeviceLookup (a fake in tests).
func DeviceGone(c DeviceLookup, index uint32, err error) bool {
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EIO) {
		return false
	}
	_, again := c.Device(index)
	return errors.Is(again, unix.EINVAL) || errors.Is(again, unix.ENODEV)
}

// Device returns the device with the given kernel index.
func (c *Client) Device(index uint32) (Device, error) {
	var d Device
	err := c.get(CmdGet, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), index)
	}, d.decode)
	return d, wrap(fmt.Sprintf("get RDMA device %d", index), err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return "no RDMA device has this index"
		}
		return ""
	})
}

// DeviceByName resolves a device name (exact match), as rdma does client
// side. A missing name gives an *ib.NotFoundError listing the existing devices.
func (c *Client) DeviceByName(name string) (Device, error) {
	devs, err := c.Devices()
	if err != nil {
		return Device{}, err
	}
	return FindDevice(devs, name)
}

// FindDevice picks the device named name from a list.
func FindDevice(devs []Device, name string) (Device, error) {
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
		names = append(names, d.Name)
	}
	return Device{}, &ib.NotFoundError{Device: name, Existing: names}
}

// RenameDevice renames an RDMA device. Equivalent to
// `rdma dev set NAME name NEWNAME`.
func (c *Client) RenameDevice(name, newName string) error {
	if err := ValidateDeviceName(newName); err != nil {
		return err
	}
	d, err := c.DeviceByName(name)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), d.Index)
		ae.String(uint16(AttrDevName), newName)
	})
	return wrap("rename "+name+" to "+newName, err, func(errno unix.Errno) string {
		switch errno {
		case unix.EEXIST, unix.ENFILE:
			return "an RDMA device named " + newName + " already exists"
		case unix.EINVAL:
			return "the kernel rejected the name " + newName
		}
		return ""
	})
}

// SetDeviceNetNS moves an RDMA device into the network namespace open as
// nsFD. Equivalent to `rdma dev set NAME netns NS`. The RDMA subsystem must
// be in exclusive netns mode (`rdma system set netns exclusive`).
func (c *Client) SetDeviceNetNS(name string, nsFD int) error {
	d, err := c.DeviceByName(name)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), d.Index)
		ae.Uint32(uint16(AttrNetNSFD), uint32(nsFD))
	})
	return wrap("move "+name+" to another network namespace", err, func(errno unix.Errno) string {
		switch errno {
		case unix.EOPNOTSUPP:
			// Two causes; the mode tells which.
			if s, serr := c.System(); serr == nil && s.Has(AttrSysNetnsMode) && s.NetNSMode == NetNSShared {
				return "not possible in shared netns mode (run: grdma sys set netns exclusive)"
			}
			return "the driver of " + name + " cannot move devices between network namespaces (rxe and siw cannot)"
		case unix.EBADF, unix.EINVAL:
			return "the target is not a network namespace"
		}
		return ""
	})
}

// SetAdaptiveModeration turns the device's adaptive interrupt moderation
// (DIM) on or off. Equivalent to `rdma dev set NAME adaptive-moderation on`.
func (c *Client) SetAdaptiveModeration(name string, on bool) error {
	d, err := c.DeviceByName(name)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), d.Index)
		ae.Uint8(uint16(AttrDevDIM), boolByte(on))
	})
	return wrap("set adaptive-moderation of "+name, err, func(errno unix.Errno) string {
		if errno == unix.EOPNOTSUPP {
			return "device " + name + " has no adaptive moderation"
		}
		return ""
	})
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
