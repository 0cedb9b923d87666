package nldev

import (
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// linkModules names the module providing each soft-RDMA link type
// (they register the alias rdma-link-TYPE).
var linkModules = map[string]string{"rxe": "rdma_rxe", "siw": "siw"}

// AddLink creates a software RDMA device (rxe, siw) named name on top of a
// network device. Equivalent to `rdma link add NAME type TYPE netdev NETDEV`.
func (c *Client) AddLink(name, linkType, netdev string) error {
	if err := ValidateDeviceName(name); err != nil {
		return err
	}
	if err := validateShortName("link type", linkType); err != nil {
		return err
	}
	if err := validateShortName("netdev", netdev); err != nil {
		return err
	}
	_, err := c.execute(CmdNewLink, true, func(ae *netlink.AttributeEncoder) {
		ae.String(uint16(AttrDevName), name)
		ae.String(uint16(AttrLinkType), linkType)
		ae.String(uint16(AttrNetdevName), netdev)
	})
	return wrap("link add "+name, err, func(errno unix.Errno) string {
		switch errno {
		case unix.ENODEV:
			return "netdev " + netdev + " not found"
		case unix.EINVAL:
			if mod, ok := linkModules[linkType]; ok {
				return "link type " + linkType + " is not available: load " + mod
			}
			return "link type " + linkType + " is not available: no kernel module provides rdma-link-" + linkType + " (known types: rxe, siw)"
		case unix.EEXIST:
			return "netdev " + netdev + " already has an " + linkType + " device"
		case unix.ENFILE:
			return "an RDMA device named " + name + " already exists"
		case unix.ENOENT:
			if linkType == "rxe" {
				return "the kernel could not set up rxe: rdma_rxe needs crc32 (load crc32_generic)"
			}
		case unix.EPERM:
			if hasNetAdmin() {
				return linkType + " refuses netdev " + netdev + ": it must be a real device, not a VLAN or other upper device"
			}
		}
		return ""
	})
}

// DeleteLink removes a software RDMA device created by AddLink. Equivalent
// to `rdma link delete NAME`.
func (c *Client) DeleteLink(name string) error {
	d, err := c.DeviceByName(name)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdDelLink, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), d.Index)
	})
	return wrap("link delete "+name, err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return name + " is not a software link (only devices made by link add, such as rxe and siw, can be deleted)"
		}
		return ""
	})
}
