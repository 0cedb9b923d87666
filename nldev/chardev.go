package nldev

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Chardev is a character device of an RDMA device, as
// RDMA_NLDEV_CMD_GET_CHARDEV reports it. iproute2 has no equivalent.
type Chardev struct {
	Name string // "uverbs0"
	ABI  uint64 // the ABI version of the interface
	Dev  uint64 // huge_encode_dev(dev_t)
	// DriverID is the kernel's enum rdma_driver_id of the device (uverbs
	// only): the ioctl ABI refuses requests that name another driver.
	DriverID uint32

	attrSet
}

func (ch *Chardev) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrChardevName:
			ch.Name = ad.String()
		case AttrChardevABI:
			ch.ABI = ad.Uint64()
		case AttrChardev:
			ch.Dev = ad.Uint64()
		case AttrUverbsDriverID:
			// The UAPI comment says u64; kernels send a u32.
			if ad.Len() == 8 {
				ch.DriverID = uint32(ad.Uint64())
			} else {
				ch.DriverID = ad.Uint32()
			}
		default:
			continue
		}
		ch.add(a)
	}
	return ad.Err()
}

// Chardev returns the character device of type typ ("uverbs", ...) of a
// device.
func (c *Client) Chardev(devIndex uint32, typ string) (Chardev, error) {
	return c.chardev(typ, fmt.Sprintf("get %s device of RDMA device %d", typ, devIndex), func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
	})
}

// PortChardev returns the character device of type typ of one port of a
// device: "umad" and "issm" (ib_umad) are per port.
func (c *Client) PortChardev(devIndex, port uint32, typ string) (Chardev, error) {
	return c.chardev(typ, fmt.Sprintf("get %s device of RDMA device %d port %d", typ, devIndex, port), func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), devIndex)
		ae.Uint32(uint16(AttrPortIndex), port)
	})
}

// GlobalChardev returns a character device that serves every device,
// such as "rdma_cm" (rdma_ucm's /dev/infiniband/rdma_cm).
func (c *Client) GlobalChardev(typ string) (Chardev, error) {
	return c.chardev(typ, "get "+typ+" device", func(*netlink.AttributeEncoder) {})
}

func (c *Client) chardev(typ, what string, encode func(ae *netlink.AttributeEncoder)) (Chardev, error) {
	var ch Chardev
	err := c.get(CmdGetChardev, func(ae *netlink.AttributeEncoder) {
		encode(ae)
		ae.String(uint16(AttrChardevType), typ)
	}, ch.decode)
	return ch, wrap(what, err, func(errno unix.Errno) string {
		if errno == unix.ENOENT || errno == unix.EINVAL || errno == unix.EOPNOTSUPP {
			return "no " + typ + " device (is its module, e.g. " + chardevModule(typ) + ", loaded?)"
		}
		return ""
	})
}

// chardevModule names the kernel module that serves character devices of
// type typ.
func chardevModule(typ string) string {
	switch typ {
	case "umad", "issm":
		return "ib_umad"
	case "rdma_cm":
		return "rdma_ucm"
	}
	return "ib_uverbs"
}
