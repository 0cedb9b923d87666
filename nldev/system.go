package nldev

import (
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Network namespace modes of the RDMA subsystem.
const (
	NetNSExclusive = 0
	NetNSShared    = 1
)

// System holds the RDMA subsystem settings RDMA_NLDEV_CMD_SYS_GET reports.
// Equivalent to `rdma system show`.
type System struct {
	// NetNSMode is NetNSExclusive or NetNSShared (devices visible in every
	// network namespace).
	NetNSMode      uint8
	PrivilegedQKey bool
	CopyOnFork     bool
	Monitor        bool // the kernel sends RDMA_NLDEV_CMD_MONITOR events (6.13+)

	attrSet
}

func (s *System) decode(ad *netlink.AttributeDecoder) error {
	for ad.Next() {
		a := Attr(ad.Type())
		switch a {
		case AttrSysNetnsMode:
			s.NetNSMode = ad.Uint8()
		case AttrSysPrivilegedQKeyMode:
			s.PrivilegedQKey = ad.Uint8() != 0
		case AttrSysCopyOnFork:
			s.CopyOnFork = ad.Uint8() != 0
		case AttrSysMonitorMode:
			s.Monitor = ad.Uint8() != 0
		default:
			continue
		}
		s.add(a)
	}
	return ad.Err()
}

// System returns the RDMA subsystem settings. Equivalent to `rdma system show`.
func (c *Client) System() (System, error) {
	var s System
	err := c.get(CmdSysGet, nil, s.decode)
	return s, wrap("get RDMA system settings", err, nil)
}

// SetNetNSMode sets the netns mode (NetNSShared or NetNSExclusive).
// Equivalent to `rdma system set netns shared|exclusive`.
func (c *Client) SetNetNSMode(mode uint8) error {
	_, err := c.execute(CmdSysSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint8(uint16(AttrSysNetnsMode), mode)
	})
	return wrap("set netns mode", err, func(errno unix.Errno) string {
		if errno == unix.EBUSY {
			return "other network namespaces exist; the mode can only change while there are none"
		}
		return ""
	})
}

// SetPrivilegedQKey allows (on) or forbids non-privileged use of controlled
// Q_Keys. Equivalent to `rdma system set privileged-qkey on|off` (Linux 6.7+).
func (c *Client) SetPrivilegedQKey(on bool) error {
	_, err := c.execute(CmdSysSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint8(uint16(AttrSysPrivilegedQKeyMode), boolByte(on))
	})
	return wrap("set privileged-qkey", err, func(errno unix.Errno) string {
		if errno == unix.EINVAL {
			return "this kernel has no privileged-qkey setting (Linux 6.7 or newer)"
		}
		return ""
	})
}
