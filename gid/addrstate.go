package gid

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strconv"
)

// AddrState is the state of the IP address a RoCE GID stands for, as the
// kernel's IPv6 duplicate address detection (DAD) leaves it. The kernel
// resolves a GID to a MAC address (modify QP to RTR, rdma_cm) only through
// a usable address: while an IPv6 address is tentative that resolution
// waits, and under load runs out (ETIMEDOUT).
type AddrState uint8

// Address states. The zero AddrState is usable: IPv4 addresses (no DAD),
// InfiniBand GIDs, IPv6 addresses past DAD, and addresses the reader could
// not see (another network namespace) all are.
const (
	AddrUsable    AddrState = iota
	AddrTentative           // IPv6 DAD still running
	AddrDADFailed           // IPv6 DAD found the address on another host
)

// String returns "usable", "tentative" or "dadfailed" (ip-address(8)'s word).
func (s AddrState) String() string {
	switch s {
	case AddrUsable:
		return "usable"
	case AddrTentative:
		return "tentative"
	case AddrDADFailed:
		return "dadfailed"
	}
	return fmt.Sprintf("AddrState(%d)", uint8(s))
}

// IfInet6Path is the file, relative to a root such as sysfs.FS's, that
// lists the IPv6 addresses of the reading process's network namespace.
const IfInet6Path = "proc/net/if_inet6"

// Address flags of /proc/net/if_inet6 (IFA_F_* in linux/if_addr.h).
const (
	ifaDADFailed  = 0x08
	ifaOptimistic = 0x04 // usable while still tentative (RFC 4429)
	ifaTentative  = 0x40
)

// AddrStates holds the IPv6 addresses that are not usable, by netdev.
// The zero value (nil) knows of none: every address is usable.
type AddrStates map[addrKey]AddrState

type addrKey struct {
	netdev string
	addr   netip.Addr
}

// ReadAddrStates reads the states of the IPv6 addresses of the reading
// process's network namespace from fsys (IfInet6Path). A kernel without
// IPv6 has no such file: then no address is tentative.
func ReadAddrStates(fsys fs.FS) (AddrStates, error) {
	data, err := fs.ReadFile(fsys, IfInet6Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseIfInet6(data)
}

// ParseIfInet6 parses /proc/net/if_inet6: one address a line, as 32 hex
// digits, then the ifindex, prefix length, scope and flags in hex, then the
// netdev name.
func ParseIfInet6(data []byte) (AddrStates, error) {
	var states AddrStates
	for n, line := range bytes.Split(data, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 6 || len(fields[0]) != 32 {
			return nil, fmt.Errorf("%s line %d: want 6 fields and a 32-digit address: %q", IfInet6Path, n+1, line)
		}
		var a [16]byte
		for i := range a {
			b, err := strconv.ParseUint(string(fields[0][2*i:2*i+2]), 16, 8)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: address %q: %w", IfInet6Path, n+1, fields[0], err)
			}
			a[i] = byte(b)
		}
		flags, err := strconv.ParseUint(string(fields[4]), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: flags %q: %w", IfInet6Path, n+1, fields[4], err)
		}
		state := AddrUsable
		switch {
		case flags&ifaDADFailed != 0:
			state = AddrDADFailed
		case flags&ifaTentative != 0 && flags&ifaOptimistic == 0:
			state = AddrTentative
		}
		if state == AddrUsable {
			continue
		}
		if states == nil {
			states = AddrStates{}
		}
		states[addrKey{string(fields[5]), netip.AddrFrom16(a)}] = state
	}
	return states, nil
}

// Of returns the state of the address behind e: usable unless e is a RoCE
// GID of an IPv6 address that its netdev holds tentative or DAD-failed.
func (s AddrStates) Of(e Entry) AddrState {
	if len(s) == 0 || e.Type == TypeIB || e.GID.IsIPv4Mapped() {
		return AddrUsable
	}
	return s[addrKey{e.Netdev, e.GID.Addr()}]
}

// Annotate sets the State of every entry.
func (s AddrStates) Annotate(entries []Entry) {
	for i := range entries {
		entries[i].State = s.Of(entries[i])
	}
}
