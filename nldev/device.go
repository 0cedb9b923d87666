package nldev

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NodeType is the RDMA node type (enum rdma_node_type).
type NodeType uint8

// Node types as the kernel reports them.
const (
	NodeCA          NodeType = 1
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

var nodeTypeNames = [...]string{"unknown", "ca", "switch", "router", "rnic", "usnic", "usnic_udp", "unspecified"}

// String returns the name rdma prints ("ca", "rnic", ...; "unknown" otherwise).
func (t NodeType) String() string {
	if int(t) < len(nodeTypeNames) {
		return nodeTypeNames[t]
	}
	return "unknown"
}

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
	NodeType       NodeType
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
			d.NodeType = NodeType(ad.Uint8())
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

// Vanished reports whether err, from a request about device devIndex, means
// the device went away after it was listed: the kernel answers EINVAL or
// ENODEV for an unknown index, and a fresh GET of the index fails the same
// way. A listing of every device skips such a device, as a listing made a
// moment later would.
func (c *Client) Vanished(devIndex uint32, err error) bool {
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENODEV) {
		return false
	}
	_, gone := c.Device(devIndex)
	return errors.Is(gone, unix.EINVAL) || errors.Is(gone, unix.ENODEV)
}

// DeviceByName resolves a device name (exact match), as rdma does client
// side. A missing name gives a *NotFoundError listing the existing devices.
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
	return Device{}, &NotFoundError{Name: name, Existing: names}
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
