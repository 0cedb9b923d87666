// Package gid models RDMA GIDs (Global Identifiers) and port GID tables:
// parsing and formatting, GID types, reading a table from sysfs, and
// choosing the GID index a job should use — the questions `show_gids`
// (mlnx-tools) and `ibv_devinfo -v` answer, and that NCCL_IB_GID_INDEX and
// UCX_IB_GID_INDEX need.
package gid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/grdma/grdma/ib"
)

// GID is a 16-byte RDMA GID. An InfiniBand GID is a subnet prefix and a port
// GUID; a RoCE GID is an IPv6 address, or an IPv4-mapped one
// (::ffff:a.b.c.d) for IPv4.
type GID [16]byte

// Parse parses a GID in the sysfs form, eight groups of four hex digits
// ("fe80:0000:0000:0000:0c42:a1ff:fe12:3456"), or in any IPv6 text form
// ("fe80::c42:a1ff:fe12:3456", "::ffff:10.9.0.1").
func Parse(s string) (GID, error) {
	if g, ok := parseSysfs(s); ok {
		return g, nil
	}
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is6() || addr.Zone() != "" {
		return GID{}, fmt.Errorf("GID %q: want IPv6 text or eight groups of 4 hex digits", s)
	}
	return GID(addr.As16()), nil
}

// parseSysfs parses exactly the kernel's "%pI6" form, as libibverbs'
// query_sysfs_gid does.
func parseSysfs(s string) (GID, bool) {
	var g GID
	if len(s) != 39 {
		return g, false
	}
	for i := range 8 {
		group := s[i*5 : i*5+4]
		if i < 7 && s[i*5+4] != ':' {
			return g, false
		}
		v, err := strconv.ParseUint(group, 16, 16)
		if err != nil {
			return g, false
		}
		binary.BigEndian.PutUint16(g[i*2:], uint16(v))
	}
	return g, true
}

// String returns the IPv6 text form, e.g. "::ffff:10.9.0.1" or
// "fe80::c42:a1ff:fe12:3456", as `ibv_devinfo` prints RoCE v2 GIDs.
func (g GID) String() string { return g.Addr().String() }

// SysfsString returns the sysfs form, eight groups of four hex digits, as
// `show_gids` and `ibv_devinfo` (for IB and RoCE v1) print GIDs.
func (g GID) SysfsString() string {
	var b strings.Builder
	b.Grow(39)
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler with the IPv6 text form.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what Parse
// accepts.
func (g *GID) UnmarshalText(text []byte) error {
	parsed, err := Parse(string(text))
	if err != nil {
		return err
	}
	*g = parsed
	return nil
}

// Addr returns g as an IPv6 address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// IsZero reports whether g is the zero GID, which sysfs shows for an empty
// table slot.
func (g GID) IsZero() bool { return g == GID{} }

// IsEmpty reports whether g identifies no port: the zero GID, or the bare
// link-local prefix fe80:: with a zero interface ID. `show_gids` skips both.
func (g GID) IsEmpty() bool {
	return g.InterfaceID() == 0 && (g.SubnetPrefix() == 0 || g.SubnetPrefix() == linkLocalPrefix)
}

const linkLocalPrefix = 0xfe80_0000_0000_0000

// IsIPv4Mapped reports whether g is an IPv4-mapped address, ::ffff:a.b.c.d:
// the form of the GIDs of a netdev's IPv4 addresses.
func (g GID) IsIPv4Mapped() bool { return g.Addr().Is4In6() }

// IPv4 returns the IPv4 address of an IPv4-mapped GID.
func (g GID) IPv4() (netip.Addr, bool) {
	if !g.IsIPv4Mapped() {
		return netip.Addr{}, false
	}
	return g.Addr().Unmap(), true
}

// IsLinkLocal reports whether g is in fe80::/10. InfiniBand GIDs with the
// default subnet prefix, and RoCE GIDs of IPv6 link-local addresses, are.
func (g GID) IsLinkLocal() bool { return g.Addr().IsLinkLocalUnicast() }

// SubnetPrefix returns the upper 64 bits (the IB subnet prefix).
func (g GID) SubnetPrefix() uint64 { return binary.BigEndian.Uint64(g[:8]) }

// InterfaceID returns the lower 64 bits (the IB port GUID).
func (g GID) InterfaceID() uint64 { return binary.BigEndian.Uint64(g[8:]) }

// Type is the type of a GID table entry (enum ibv_gid_type).
type Type uint8

// GID types. The zero Type is none (in Criteria: any).
const (
	TypeIB Type = iota + 1
	TypeRoCEv1
	TypeRoCEv2
)

// String returns "IB", "RoCE v1" or "RoCE v2".
func (t Type) String() string {
	switch t {
	case TypeIB:
		return "IB"
	case TypeRoCEv1:
		return "RoCE v1"
	case TypeRoCEv2:
		return "RoCE v2"
	}
	return "unknown"
}

// Version returns the VER column of `show_gids`: "v1" for IB and RoCE v1,
// "v2" for RoCE v2.
func (t Type) Version() string {
	switch t {
	case TypeIB, TypeRoCEv1:
		return "v1"
	case TypeRoCEv2:
		return "v2"
	}
	return ""
}

// ErrUnknownType means a GID type name that is not one of the known ones.
var ErrUnknownType = errors.New("unknown GID type")

// ParseSysfsType converts gid_attrs/types/N text to a Type. The kernel
// names IB and RoCE v1 alike, "IB/RoCE v1"; the port's link layer tells
// them apart.
func ParseSysfsType(text string, linkLayer ib.LinkLayer) (Type, error) {
	switch text {
	case "IB/RoCE v1":
		if linkLayer.IsInfiniBand() {
			return TypeIB, nil
		}
		return TypeRoCEv1, nil
	case "RoCE v2":
		return TypeRoCEv2, nil
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownType, text)
}

// ParseType parses a type as a user writes it: "ib", "v1", "v2", "roce v1",
// "RoCE v2" (case-insensitive).
func ParseType(s string) (Type, error) {
	switch strings.ToLower(s) {
	case "ib":
		return TypeIB, nil
	case "v1", "roce v1", "rocev1", "roce_v1":
		return TypeRoCEv1, nil
	case "v2", "roce v2", "rocev2", "roce_v2":
		return TypeRoCEv2, nil
	}
	return 0, fmt.Errorf("%w %q: want ib, v1 or v2", ErrUnknownType, s)
}
