package nldev

// attrSet records which attributes a kernel reply carried, so that callers
// can tell "absent" from "zero" (rdma prints a field only when present).
type attrSet [2]uint64

func (s *attrSet) add(a Attr) {
	if a < 128 {
		s[a/64] |= 1 << (a % 64)
	}
}

// Has reports whether the kernel's reply carried attribute a.
func (s attrSet) Has(a Attr) bool {
	return a < 128 && s[a/64]&(1<<(a%64)) != 0
}
