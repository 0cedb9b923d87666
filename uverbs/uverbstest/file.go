package uverbstest

import (
	"encoding/binary"
	"errors"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// file is one open of the fake device (struct ib_uverbs_file): what a
// uverbs.Context talks to, as its Kernel. Its objects are numbered by
// handles of its own, as the kernel's are per file.
type file struct {
	d          *Device
	hasContext bool
	closed     bool
	objects    map[uint32]any // *pd, *mr, *cq, *qp, *ah by handle
	channels   []*channel
	async      *eventPipe // GET_CONTEXT's asynchronous event file; nil for the ioctl GET_CONTEXT
}

func (d *Device) openFile() (*file, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return nil, syscall.ENODEV
	}
	f := &file{d: d, objects: map[uint32]any{}}
	d.files[f] = true
	return f, nil
}

// newHandle returns the lowest free handle, as the kernel's xarray does.
func (f *file) newHandle(o any) uint32 {
	for h := uint32(0); ; h++ {
		if _, taken := f.objects[h]; !taken {
			f.objects[h] = o
			return h
		}
	}
}

// object returns the object of type T with handle h.
func object[T any](f *file, h uint32) (T, bool) {
	o, ok := f.objects[h].(T)
	return o, ok
}

// command is a write command as the kernel's method table has it.
type command struct {
	op    Op
	req   int  // the core request's size
	resp  int  // the core response's size; 0 for none
	udata bool // takes driver data
	run   func(f *file, req []byte, out response) error
}

// response is where a command's response goes: the core response at
// addr, the driver's response data after it.
type response struct {
	addr      uint64
	size      int // room for the core response (out_words)
	coreSize  int
	driverLen int // room for the driver's response data
}

// write copies the core response, zero-filling the rest of its room for
// commands without driver data.
func (r response) write(v any, udata bool) error {
	b := encode(v)
	if !udata && r.size > len(b) {
		b = append(b, make([]byte, r.size-len(b))...)
	}
	return copyToUser(r.addr, b)
}

// driver copies the driver's response data after the core response; the
// driver refuses with EINVAL when there is not room enough (rxe's
// "malformed udata").
func (r response) driver(b []byte) error {
	if r.driverLen < len(b) {
		return syscall.EINVAL
	}
	return copyToUser(r.addr+uint64(r.coreSize), b)
}

var commands = map[uint32]command{
	cmdGetContext:        {OpGetContext, 8, 8, true, (*file).getContext},
	cmdQueryDevice:       {OpQueryDevice, 8, 176, false, (*file).queryDevice},
	cmdQueryPort:         {OpQueryPort, 16, 40, false, (*file).queryPort},
	cmdAllocPD:           {OpAllocPD, 8, 4, true, (*file).allocPD},
	cmdDeallocPD:         {OpDeallocPD, 4, 0, false, (*file).deallocPD},
	cmdCreateAH:          {OpCreateAH, 56, 4, true, (*file).createAH},
	cmdDestroyAH:         {OpDestroyAH, 4, 0, false, (*file).destroyAH},
	cmdRegMR:             {OpRegMR, 40, 12, true, (*file).regMR},
	cmdDeregMR:           {OpDeregMR, 4, 0, false, (*file).deregMR},
	cmdCreateCompChannel: {OpCreateCompChannel, 8, 4, false, (*file).createCompChannel},
	cmdCreateCQ:          {OpCreateCQ, 32, 8, true, (*file).createCQ},
	cmdDestroyCQ:         {OpDestroyCQ, 16, 8, false, (*file).destroyCQ},
	cmdReqNotifyCQ:       {OpReqNotifyCQ, 8, 0, false, (*file).reqNotifyCQ},
	cmdCreateQP:          {OpCreateQP, 56, 32, true, (*file).createQP},
	cmdQueryQP:           {OpQueryQP, 16, 128, false, (*file).queryQP},
	cmdModifyQP:          {OpModifyQP, 112, 0, false, (*file).modifyQP},
	cmdDestroyQP:         {OpDestroyQP, 16, 4, false, (*file).destroyQP},
	cmdPostSend:          {OpPostSend, 24, 4, false, (*file).postSend},
}

// Write runs one command as ib_uverbs_write does: it checks the header
// (verify_hdr), the context and the method, then runs it.
func (f *file) Write(b []byte) (int, error) {
	d := f.d
	if len(b) < size(cmdHeader{}) {
		return 0, syscall.EINVAL
	}
	var hdr cmdHeader
	decode(b, &hdr)
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.closed {
		return 0, syscall.EBADF
	}
	if hdr.Command&cmdFlagExtended != 0 {
		return f.writeEx(hdr, b)
	}
	c, ok := commands[hdr.Command]
	if !ok {
		// Unknown, or not enabled for rxe (POLL_CQ, POST_RECV, ...).
		return 0, syscall.EOPNOTSUPP
	}
	if int(hdr.InWords)*4 != len(b) {
		return 0, syscall.EINVAL
	}
	if len(b)-8 < c.req {
		return 0, syscall.ENOSPC
	}
	out := int(hdr.OutWords) * 4
	if out < c.resp {
		return 0, syscall.ENOSPC
	}
	if err := d.call(c.op); err != nil {
		return 0, err
	}
	if !f.hasContext && hdr.Command != cmdGetContext {
		return 0, syscall.EINVAL
	}
	body := b[8:]
	// Request bytes beyond the core request are driver data for the
	// commands that take some and must be zero for the others.
	if !c.udata && slices.ContainsFunc(body[c.req:], func(x byte) bool { return x != 0 }) {
		return 0, syscall.EOPNOTSUPP
	}
	r := response{size: out, coreSize: c.resp, driverLen: out - c.resp}
	if c.resp > 0 {
		r.addr = binary.NativeEndian.Uint64(body)
	}
	if err := c.run(f, body, r); err != nil {
		return 0, err
	}
	return len(b), nil
}

// writeEx runs an extended command (only QUERY_DEVICE).
func (f *file) writeEx(hdr cmdHeader, b []byte) (int, error) {
	if hdr.Command != cmdFlagExtended|exCmdQueryDevice {
		return 0, syscall.EOPNOTSUPP
	}
	if len(b) < 8+16 {
		return 0, syscall.EINVAL
	}
	var ex exHeader
	decode(b[8:], &ex)
	if (int(hdr.InWords)+int(ex.ProviderInWords))*8 != len(b)-24 {
		return 0, syscall.EINVAL
	}
	if hdr.InWords < 1 {
		return 0, syscall.ENOSPC
	}
	if ex.Reserved != 0 {
		return 0, syscall.EINVAL
	}
	if err := f.d.call(OpQueryDeviceEx); err != nil {
		return 0, err
	}
	if !f.hasContext {
		return 0, syscall.EINVAL
	}
	// struct ib_uverbs_ex_query_device: comp_mask and reserved, both 0.
	if binary.NativeEndian.Uint64(b[24:]) != 0 {
		return 0, syscall.EINVAL
	}
	attr := f.d.attr
	full := encode(&attr)
	room := int(hdr.OutWords) * 8
	n := min(room, len(full))
	attr.ResponseLength = uint32(n)
	full = encode(&attr)
	if err := copyToUser(ex.Response, full[:n]); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (f *file) getContext(req []byte, out response) error {
	if f.hasContext {
		return syscall.EINVAL
	}
	if f.d.cfg.Driver != "rxe" && len(req) > 8 {
		return syscall.EINVAL // driver data the fake does not know
	}
	p, err := newEventPipe()
	if err != nil {
		return err
	}
	resp := struct{ AsyncFD, NumCompVectors uint32 }{uint32(p.user), uint32(f.d.cfg.CompVectors)}
	if err := out.write(&resp, true); err != nil {
		p.close()
		p.closeUser()
		return err
	}
	f.async = p
	f.hasContext = true
	return nil
}

func (f *file) queryDevice(_ []byte, out response) error {
	return out.write(&f.d.attr.Base, false)
}

func (f *file) queryPort(req []byte, out response) error {
	var r queryPortReq
	decode(req, &r)
	p, ok := f.d.port(r.PortNum)
	if !ok {
		return syscall.EINVAL
	}
	attr := f.d.portAttr(p)
	return out.write(&attr.PortAttr, false)
}

// portAttr is a port's QUERY_PORT answer: the recorded rxe port with the
// port's own state, MTUs, link layer, LID and GID table size.
func (d *Device) portAttr(p *Port) uverbs.PortAttrEx {
	var a uverbs.PortAttrEx
	if _, err := binary.Decode(recordedPort, binary.NativeEndian, &a); err != nil {
		panic(err)
	}
	a.State, a.PhysState, a.LinkLayer = p.State, p.PhysState, p.LinkLayer
	a.ActiveMTU, a.MaxMTU, a.LID = p.ActiveMTU, p.MaxMTU, p.LID
	if p.LinkLayer == ib.LinkLayerInfiniBand {
		a.Flags = 0 // no GRH required
	}
	return a
}

type pd struct {
	handle uint32
	users  int // MRs and QPs
}

func (f *file) allocPD(_ []byte, out response) error {
	p := &pd{}
	p.handle = f.newHandle(p)
	if err := out.write(&struct{ PDHandle uint32 }{p.handle}, true); err != nil {
		delete(f.objects, p.handle)
		return err
	}
	return nil
}

func (f *file) deallocPD(req []byte, _ response) error {
	var r handleReq
	decode(req, &r)
	p, ok := object[*pd](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	if p.users > 0 {
		return syscall.EBUSY
	}
	delete(f.objects, r.Handle)
	return nil
}

// mr is a registered memory region: [addr, addr+length) of the process,
// addressed by the device as [iova, iova+length).
type mr struct {
	handle     uint32
	pd         *pd
	addr, iova uint64
	length     uint64
	access     uverbs.Access
	key        uint32
	file       *file
}

// rxe's access flags it supports for memory regions.
const supportedAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead |
	uverbs.AccessRemoteAtomic | 1<<4 | 1<<5 | 1<<6 // MW_BIND, ZERO_BASED, ON_DEMAND

func (f *file) regMR(req []byte, out response) error {
	var r regMRReq
	decode(req, &r)
	page := uint64(unix.Getpagesize())
	access := uverbs.Access(r.AccessFlags)
	switch {
	case r.Start%page != r.HCAVA%page:
		return syscall.EINVAL
	case access&(uverbs.AccessRemoteWrite|uverbs.AccessRemoteAtomic) != 0 && access&uverbs.AccessLocalWrite == 0:
		return syscall.EINVAL
	case access&^supportedAccess != 0:
		return syscall.EOPNOTSUPP
	case r.Length == 0 || r.Length > f.d.attr.Base.MaxMRSize:
		return syscall.EINVAL
	}
	p, ok := object[*pd](f, r.PDHandle)
	if !ok {
		return syscall.EINVAL
	}
	// Pinning faults the pages in: memory that is not mapped fails.
	if err := touch(r.Start, r.Length, page); err != nil {
		return err
	}
	d := f.d
	d.tab.Lock()
	if d.cfg.PinLimit > 0 && d.pinned+int64(r.Length) > d.cfg.PinLimit {
		d.tab.Unlock()
		return syscall.ENOMEM
	}
	index := d.nextMR
	for d.mrs[index] != nil || index == 0 {
		index = (index + 1) & 0xffffff
	}
	d.nextMR = (index + 1) & 0xffffff
	m := &mr{pd: p, addr: r.Start, iova: r.HCAVA, length: r.Length, access: access, file: f,
		key: index<<8 | uint32(d.rand.Uint32()&0xff)}
	d.mrs[index] = m
	d.pinned += int64(r.Length)
	d.tab.Unlock()
	m.handle = f.newHandle(m)
	p.users++
	rkey := uint32(0)
	if access&(uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic) != 0 {
		rkey = m.key
	}
	if err := out.write(&regMRResp{MRHandle: m.handle, LKey: m.key, RKey: rkey}, true); err != nil {
		f.dropMR(m)
		return err
	}
	return nil
}

// touch reads a byte of every page of [start, start+length).
func touch(start, length, page uint64) error {
	return guarded(func() {
		for a := start &^ (page - 1); a < start+length; a += page {
			_ = *(*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&a)))
		}
	})
}

func (f *file) deregMR(req []byte, _ response) error {
	var r handleReq
	decode(req, &r)
	m, ok := object[*mr](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	f.dropMR(m)
	return nil
}

func (f *file) dropMR(m *mr) {
	d := f.d
	d.tab.Lock()
	delete(d.mrs, m.key>>8)
	d.pinned -= int64(m.length)
	d.tab.Unlock()
	delete(f.objects, m.handle)
	m.pd.users--
}

func (f *file) createCompChannel(_ []byte, out response) error {
	p, err := newEventPipe()
	if err != nil {
		return err
	}
	ch := &channel{pipe: p, file: f, pushed: map[uint64]uint32{}}
	if err := out.write(&struct{ FD uint32 }{uint32(p.user)}, false); err != nil {
		p.close()
		p.closeUser()
		return err
	}
	f.channels = append(f.channels, ch)
	return nil
}

// lookupChannel returns the channel whose descriptor the process named: it
// must be this file's, and still the same open file.
func (f *file) lookupChannel(fd int32) (*channel, error) {
	for _, ch := range f.channels {
		if ch.pipe.user == int(fd) && ch.pipe.isUsers(int(fd)) {
			return ch, nil
		}
	}
	return nil, syscall.EBADF
}

func (f *file) createCQ(req []byte, out response) error {
	var r createCQReq
	decode(req, &r)
	d := f.d
	if d.cfg.Driver != "rxe" {
		return syscall.EINVAL // driver data the fake does not know
	}
	if r.CQE == 0 || r.CQE > d.attr.Base.MaxCQE || r.CompVector >= uint32(d.cfg.CompVectors) {
		return syscall.EINVAL
	}
	if out.driverLen < mmapInfoSize {
		return syscall.EINVAL
	}
	var ch *channel
	if r.CompChannel >= 0 {
		var err error
		if ch, err = f.lookupChannel(r.CompChannel); err != nil {
			return err
		}
	}
	rg, n, err := newRing(r.CQE, rxeCQESize)
	if err != nil {
		return syscall.ENOMEM
	}
	c := &cq{file: f, userHandle: r.UserHandle, ring: rg, ch: ch}
	c.handle = f.newHandle(c)
	d.offerMmap(rg)
	if err := errors.Join(out.write(&createCQResp{CQHandle: c.handle, CQE: n}, true), out.driver(encode(&rg.info))); err != nil {
		f.dropCQ(c)
		return err
	}
	if ch != nil {
		ch.cqs++
	}
	return nil
}

// offerMmap gives a ring its mmap offset: device-wide, page-aligned, as
// rxe's.
func (d *Device) offerMmap(r *ring) {
	page := uint64(unix.Getpagesize())
	r.info = mmapInfo{Offset: d.nextMmap * page, Size: uint32(len(r.mem))}
	d.nextMmap += uint64(len(r.mem)) / page
}

func (f *file) destroyCQ(req []byte, out response) error {
	var r destroyReq
	decode(req, &r)
	c, ok := object[*cq](f, r.Handle)
	if !ok {
		return syscall.EINVAL
	}
	c.mu.Lock()
	users := c.users
	c.mu.Unlock()
	if users > 0 {
		return syscall.EBUSY
	}
	reported := f.dropCQ(c)
	return out.write(&struct{ Comp, Async uint32 }{reported, 0}, false)
}

// dropCQ destroys a completion queue and returns the events its channel
// delivered (written and read).
func (f *file) dropCQ(c *cq) uint32 {
	c.mu.Lock()
	c.destroyed = true
	c.mu.Unlock()
	delete(f.objects, c.handle)
	f.d.destroyRing(c.ring)
	if c.ch == nil {
		return 0
	}
	c.ch.cqs--
	return c.ch.drop(c.userHandle)
}

func (f *file) reqNotifyCQ(req []byte, _ response) error {
	var r reqNotifyCQReq
	decode(req, &r)
	c, ok := object[*cq](f, r.CQHandle)
	if !ok {
		return syscall.EINVAL
	}
	c.mu.Lock()
	if r.SolicitedOnly != 0 {
		c.notify |= notifySolicited
	} else {
		c.notify |= notifyNext
	}
	c.mu.Unlock()
	return nil
}

// disassociate is the device going away under an open file: channels
// and the event file end (the process reads EIO), queue pairs stop.
func (f *file) disassociate() {
	for _, o := range f.objects {
		if q, ok := o.(*qp); ok {
			q.stop()
		}
	}
	for _, ch := range f.channels {
		ch.pipe.close()
	}
	if f.async != nil {
		f.async.close()
	}
}

// Close releases everything the file made, as closing the device does.
func (f *file) Close() error {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.closed {
		return syscall.EBADF
	}
	f.closed = true
	// Queue pairs first: they use the others.
	for _, o := range f.objects {
		if q, ok := o.(*qp); ok {
			f.dropQP(q)
		}
	}
	for _, o := range f.objects {
		switch o := o.(type) {
		case *cq:
			f.dropCQ(o)
		case *mr:
			f.dropMR(o)
		case *ah:
			f.dropAH(o)
		}
	}
	clear(f.objects)
	for _, ch := range f.channels {
		ch.pipe.close()
	}
	f.channels = nil
	if f.async != nil {
		f.async.close()
	}
	delete(d.files, f)
	return nil
}

// Mmap maps an rxe queue: once, at the offset the driver data named, at
// most its size.
func (f *file) Mmap(offset int64, length int) ([]byte, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.call(OpMmap); err != nil {
		return nil, err
	}
	for _, r := range f.rings() {
		if int64(r.info.Offset) != offset || r.mapped || r.destroyed {
			continue
		}
		if length <= 0 || length > len(r.mem) {
			return nil, syscall.EINVAL
		}
		r.mapped = true
		return r.mem[:length:length], nil
	}
	return nil, syscall.EINVAL
}

// Munmap unmaps a queue Mmap mapped.
func (f *file) Munmap(b []byte) error {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) == 0 {
		return syscall.EINVAL
	}
	for _, r := range append(f.rings(), d.orphanRings()...) {
		if r.mem != nil && &r.mem[0] == &b[0] && r.mapped && !r.unmapped {
			r.unmapped = true
			r.release()
			delete(d.orphans, r)
			return nil
		}
	}
	return syscall.EINVAL
}

// destroyRing is a ring's object going: its memory goes once the process
// unmaps it too.
func (d *Device) destroyRing(r *ring) {
	r.destroyed = true
	r.release()
	if r.mem != nil {
		d.orphans[r] = true
	}
}

func (d *Device) orphanRings() []*ring {
	rs := make([]*ring, 0, len(d.orphans))
	for r := range d.orphans {
		rs = append(rs, r)
	}
	return rs
}

// rings returns the file's live rings.
func (f *file) rings() []*ring {
	var rs []*ring
	for _, o := range f.objects {
		switch o := o.(type) {
		case *cq:
			rs = append(rs, o.ring)
		case *qp:
			rs = append(rs, o.sq, o.rq)
		}
	}
	return rs
}
