package nldev

import (
	"encoding/binary"
	"errors"
)

// attrTypeMask drops NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type
// (NLA_TYPE_MASK): the kernel sets NLA_F_NESTED on some nests only.
const attrTypeMask = 0x3fff

var errBadAttr = errors.New("malformed netlink attribute")

// attrs walks the netlink attributes in a buffer without allocating, so a
// dump of many objects costs no garbage per object (netlink's
// AttributeDecoder allocates a decoder per nest). Values alias the buffer.
type attrs struct {
	b   []byte
	typ Attr
	val attrValue
	err error
}

func newAttrs(b []byte) attrs { return attrs{b: b} }

// next moves to the next attribute; false at the end or on a malformed
// one (then err is set).
func (a *attrs) next() bool {
	if len(a.b) < 4 {
		if len(a.b) != 0 {
			a.err = errBadAttr
		}
		return false
	}
	l := int(binary.NativeEndian.Uint16(a.b))
	if l < 4 || l > len(a.b) {
		a.err = errBadAttr
		return false
	}
	a.typ = Attr(binary.NativeEndian.Uint16(a.b[2:]) & attrTypeMask)
	a.val = a.b[4:l]
	a.b = a.b[min((l+3)&^3, len(a.b)):]
	return true
}

// attrValue is an attribute's payload. Short values read as zero rather
// than panicking: the kernel never sends them, fuzzed input may.
type attrValue []byte

func (v attrValue) u8() uint8 {
	if len(v) < 1 {
		return 0
	}
	return v[0]
}

func (v attrValue) u32() uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(v)
}

func (v attrValue) u64() uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(v)
}

// strz is a string value without its NUL terminator.
func (v attrValue) strz() []byte {
	for i, c := range v {
		if c == 0 {
			return v[:i]
		}
	}
	return v
}

// interner turns attribute strings into Go strings, allocating each
// distinct one once: a dump repeats the same few (device and module
// names, driver keys) on every object.
type interner struct{ m map[string]string }

// maxInterned bounds the table; strings beyond it are allocated each time.
const maxInterned = 1024

func (in *interner) str(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}
