package pci

import (
	"fmt"
	"strconv"
	"strings"
)

// Address is a PCI function's address: domain, bus, device (slot) and
// function, "0000:3b:00.0" as the kernel names it.
type Address struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0..31
	Function uint8 // 0..7
}

// String formats a as the kernel does ("%04x:%02x:%02x.%d").
func (a Address) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%d", a.Domain, a.Bus, a.Device, a.Function)
}

// MarshalText writes the kernel's form, so that JSON shows "0000:3b:00.0".
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses the kernel's form.
func (a *Address) UnmarshalText(b []byte) error {
	v, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Less orders addresses by domain, bus, device and function: the order
// of lspci and of nvidia-smi's GPU numbering.
func (a Address) Less(b Address) bool { return a.Compare(b) < 0 }

// Compare returns -1, 0 or 1 as a sorts before, with or after b.
func (a Address) Compare(b Address) int {
	x := uint64(a.Domain)<<16 | uint64(a.Bus)<<8 | uint64(a.Device)<<3 | uint64(a.Function)
	y := uint64(b.Domain)<<16 | uint64(b.Bus)<<8 | uint64(b.Device)<<3 | uint64(b.Function)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// ParseAddress parses "DDDD:BB:DD.F" (a domain of four or more hex digits:
// VMD domains have five) or "BB:DD.F" (domain 0, as lspci prints it).
func ParseAddress(s string) (Address, error) {
	bad := func() (Address, error) {
		return Address{}, fmt.Errorf("PCI address %q: want DDDD:BB:DD.F, e.g. 0000:3b:00.0", s)
	}
	parts := strings.Split(s, ":")
	var dom, bus, devfn string
	switch len(parts) {
	case 3:
		dom, bus, devfn = parts[0], parts[1], parts[2]
		if len(dom) < 4 || len(dom) > 8 {
			return bad()
		}
	case 2:
		dom, bus, devfn = "0", parts[0], parts[1]
	default:
		return bad()
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	if !ok || len(bus) != 2 || len(dev) != 2 || len(fn) != 1 {
		return bad()
	}
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 8, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || v > 31 || f > 7 {
		return bad()
	}
	return Address{Domain: uint32(d), Bus: uint8(b), Device: uint8(v), Function: uint8(f)}, nil
}

// isAddress reports whether a path component names a PCI function as the
// kernel writes it ("0000:3b:00.0").
func isAddress(s string) bool {
	if len(s) < 12 || s[len(s)-8] != ':' || s[len(s)-5] != ':' || s[len(s)-2] != '.' {
		return false
	}
	_, err := ParseAddress(s)
	return err == nil
}
