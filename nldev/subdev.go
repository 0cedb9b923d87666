package nldev

import (
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ParseDeviceType resolves a sub-device type name as rdma does
// (case-insensitive; smi is the only type).
func ParseDeviceType(name string) (uint8, error) {
	if strings.EqualFold(name, "smi") {
		return DeviceTypeSMI, nil
	}
	return 0, &InvalidArgumentError{fmt.Sprintf("invalid device type %q: the only type is smi", name)}
}

// AddSubDevice creates a sub-device name of type typ (DeviceTypeSMI) under
// device parent. Equivalent to `rdma dev add NAME type smi parent PARENT`.
// Only drivers with sub-device support (mlx5 with an InfiniBand SMI
// sub-device) accept it.
func (c *Client) AddSubDevice(name string, typ uint8, parent string) error {
	if err := ValidateDeviceName(name); err != nil {
		return err
	}
	p, err := c.DeviceByName(parent)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdNewDev, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), p.Index)
		ae.String(uint16(AttrDevName), name)
		ae.Uint8(uint16(AttrDevType), typ)
	})
	return wrap("dev add "+name, err, func(errno unix.Errno) string {
		switch errno {
		case unix.EOPNOTSUPP:
			return fmt.Sprintf("the driver of %s cannot create sub-devices (only drivers with sub-device support, such as mlx5 for an InfiniBand SMI sub-device, can)", parent)
		case unix.EINVAL:
			return "this kernel has no sub-devices (RDMA_NLDEV_CMD_NEWDEV, Linux 6.11), or " + parent + " went away"
		case unix.EEXIST, unix.ENFILE:
			return "an RDMA device named " + name + " already exists"
		}
		return ""
	})
}

// DeleteSubDevice removes a sub-device made by AddSubDevice. Equivalent to
// `rdma dev delete NAME`.
func (c *Client) DeleteSubDevice(name string) error {
	d, err := c.DeviceByName(name)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdDelDev, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), d.Index)
	})
	return wrap("dev delete "+name, err, func(errno unix.Errno) string {
		switch errno {
		case unix.EOPNOTSUPP:
			return name + " is not a sub-device (only devices made by dev add can be deleted; software devices go with link delete)"
		case unix.EINVAL:
			return "this kernel has no sub-devices (RDMA_NLDEV_CMD_DELDEV, Linux 6.11)"
		}
		return ""
	})
}
