package ib

import "strconv"

// MTU is an InfiniBand path MTU code (enum ib_mtu, ibv_mtu): 1 is 256 bytes
// up to 5, 4096 bytes; OPA adds 6 (8192) and 7 (10240). The zero MTU is
// none.
type MTU uint8

// MTU codes.
const (
	MTU256   MTU = 1
	MTU512   MTU = 2
	MTU1024  MTU = 3
	MTU2048  MTU = 4
	MTU4096  MTU = 5
	MTU8192  MTU = 6 // OPA only
	MTU10240 MTU = 7 // OPA only
)

// Bytes returns the MTU in bytes, or 0 for a code that is not an MTU.
func (m MTU) Bytes() int {
	switch {
	case m >= MTU256 && m <= MTU8192:
		return 128 << m
	case m == MTU10240:
		return 10240
	}
	return 0
}

// String returns the size in bytes, as `ibv_devinfo` prints it.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return strconv.Itoa(b)
	}
	return "invalid MTU " + strconv.Itoa(int(m))
}

// MTUFromBytes returns the code of an MTU given in bytes.
func MTUFromBytes(bytes int) (MTU, bool) {
	for m := MTU256; m <= MTU10240; m++ {
		if m.Bytes() == bytes {
			return m, true
		}
	}
	return 0, false
}

// LargestMTU returns the largest InfiniBand MTU (256 to 4096) that fits in
// bytes, or 0 when not even 256 does.
func LargestMTU(bytes int) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= bytes {
			return m
		}
	}
	return 0
}
