package uverbstest

import (
	"encoding/binary"
	"syscall"
	"unsafe"
)

// attrValidOutput is UVERBS_ATTR_F_VALID_OUTPUT, which the kernel sets on
// the outputs it wrote.
const attrValidOutput = 2

// method is an ioctl method the fake answers.
type method struct {
	op        Op
	mandatory []uint16 // attributes it needs
	known     []uint16 // every attribute it knows
	run       func(f *file, attrs map[uint16]*ioctlAttr) error
}

var methods = map[[2]uint16]method{
	{objectDevice, methodGetContext}: {OpGetContextIoctl, nil,
		[]uint16{attrGetContextNumCompVecs, attrGetContextCoreSupport, attrUHWIn, attrUHWOut}, (*file).getContextIoctl},
	{objectDevice, methodQueryPort}: {OpQueryPortIoctl, []uint16{attrQueryPortPortNum, attrQueryPortResp},
		[]uint16{attrQueryPortPortNum, attrQueryPortResp}, (*file).queryPortIoctl},
	{objectDevice, methodQueryGIDTable}: {OpQueryGIDTable,
		[]uint16{attrGIDTableEntrySize, attrGIDTableRespEntries, attrGIDTableRespNumEntries},
		[]uint16{attrGIDTableEntrySize, attrGIDTableFlags, attrGIDTableRespEntries, attrGIDTableRespNumEntries},
		(*file).queryGIDTable},
	// rxe cannot import dma-bufs: the method answers EOPNOTSUPP.
	{objectMR, methodRegDMABufMR}: {OpRegDMABufMR, nil, []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8},
		func(*file, map[uint16]*ioctlAttr) error { return syscall.EOPNOTSUPP }},
}

// Ioctl runs one RDMA_VERBS_IOCTL as ib_uverbs_ioctl does: the header
// checked, the method found, its attributes checked, outputs written and
// flagged in the caller's attributes.
func (f *file) Ioctl(msg []byte) error {
	if len(msg) < ioctlHeaderSize {
		return syscall.EINVAL
	}
	var hdr ioctlHeader
	decode(msg, &hdr)
	if int(hdr.Length) != len(msg) || int(hdr.Length) != ioctlHeaderSize+ioctlAttrSize*int(hdr.NumAttrs) {
		return syscall.EINVAL
	}
	if hdr.Reserved1 != 0 || hdr.Reserved2 != 0 {
		return syscall.EPROTONOSUPPORT
	}
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.closed {
		return syscall.EBADF
	}
	if d.removed {
		return syscall.EIO
	}
	if hdr.DriverID != d.cfg.DriverID {
		return syscall.EINVAL
	}
	m, ok := methods[[2]uint16{hdr.ObjectID, hdr.MethodID}]
	if !ok {
		return syscall.EPROTONOSUPPORT
	}
	attrs := map[uint16]*ioctlAttr{}
	for i := range int(hdr.NumAttrs) {
		a := (*ioctlAttr)(unsafe.Pointer(&msg[ioctlHeaderSize+i*ioctlAttrSize]))
		if !contains(m.known, a.AttrID) {
			if a.Flags&attrFlagMandatory != 0 {
				return syscall.EPROTONOSUPPORT
			}
			continue
		}
		if _, dup := attrs[a.AttrID]; dup {
			return syscall.EINVAL
		}
		attrs[a.AttrID] = a
	}
	for _, id := range m.mandatory {
		if attrs[id] == nil {
			return syscall.EINVAL
		}
	}
	if err := d.call(m.op); err != nil {
		return err
	}
	if m.op != OpGetContextIoctl && !f.hasContext {
		return syscall.EINVAL
	}
	return m.run(f, attrs)
}

func contains(ids []uint16, id uint16) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// output copies b to an output attribute's buffer, at most its length,
// and flags it written.
func output(a *ioctlAttr, b []byte) error {
	if a == nil {
		return nil
	}
	n := min(int(a.Len), len(b))
	if err := copyToUser(a.Data, b[:n]); err != nil {
		return err
	}
	a.Flags |= attrValidOutput
	return nil
}

func (f *file) getContextIoctl(attrs map[uint16]*ioctlAttr) error {
	if f.hasContext {
		return syscall.EINVAL
	}
	if a := attrs[attrGetContextNumCompVecs]; a != nil && a.Len != 4 {
		return syscall.EINVAL
	}
	if a := attrs[attrGetContextCoreSupport]; a != nil && a.Len != 8 {
		return syscall.EINVAL
	}
	if err := output(attrs[attrGetContextNumCompVecs], binary.NativeEndian.AppendUint32(nil, uint32(f.d.cfg.CompVectors))); err != nil {
		return err
	}
	if err := output(attrs[attrGetContextCoreSupport], binary.NativeEndian.AppendUint64(nil, coreSupportOptionalMRAccess)); err != nil {
		return err
	}
	f.hasContext = true
	return nil
}

func (f *file) queryPortIoctl(attrs map[uint16]*ioctlAttr) error {
	num := attrs[attrQueryPortPortNum]
	if num.Len > 8 || num.Data > 0xff {
		return syscall.EINVAL
	}
	p, ok := f.d.port(uint8(num.Data))
	if !ok {
		return syscall.EINVAL
	}
	resp := attrs[attrQueryPortResp]
	if resp.Len < 40 { // the legacy response at least
		return syscall.EINVAL
	}
	attr := f.d.portAttr(p)
	b := encode(&attr)
	// What the buffer has beyond the response is zeroed.
	if int(resp.Len) > len(b) {
		b = append(b, make([]byte, int(resp.Len)-len(b))...)
	}
	return output(resp, b)
}

func (f *file) queryGIDTable(attrs map[uint16]*ioctlAttr) error {
	entrySize := attrs[attrGIDTableEntrySize].Data
	if entrySize == 0 || entrySize > 0xffff {
		return syscall.EINVAL
	}
	if fl := attrs[attrGIDTableFlags]; fl != nil && fl.Data != 0 {
		return syscall.EINVAL
	}
	entries := attrs[attrGIDTableRespEntries]
	room := int(entries.Len) / int(entrySize)
	if room == 0 {
		return syscall.EINVAL
	}
	var table []byte
	n := 0
	for _, p := range f.d.ports {
		for _, g := range p.GIDs {
			e := encode(&g)
			if int(entrySize) < len(e) {
				e = e[:entrySize]
			} else {
				e = append(e, make([]byte, int(entrySize)-len(e))...)
			}
			table = append(table, e...)
			n++
		}
	}
	if n > room {
		return syscall.EINVAL
	}
	if err := output(entries, table); err != nil {
		return err
	}
	return output(attrs[attrGIDTableRespNumEntries], binary.NativeEndian.AppendUint64(nil, uint64(n)))
}
