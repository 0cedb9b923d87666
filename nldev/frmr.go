package nldev

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// FRMRPoolKey identifies a pool of fast-registration MRs the kernel keeps
// for a device (Linux 7.0).
type FRMRPoolKey struct {
	ATS             bool
	AccessFlags     uint32
	VendorKey       uint64
	NumDMABlocks    uint64
	KernelVendorKey uint64

	attrSet // FRMR_POOL_KEY_* present
}

// String is rdma's key text: vendor_key:num_dma_blocks:access_flags:ats,
// in hex.
func (k FRMRPoolKey) String() string {
	ats := "0"
	if k.ATS {
		ats = "1"
	}
	return fmt.Sprintf("%x:%x:%x:%s", k.VendorKey, k.NumDMABlocks, k.AccessFlags, ats)
}

// FRMRPool is one pool. Equivalent to a line of `rdma res show
// frmr_pools`.
type FRMRPool struct {
	DevIndex uint32
	Device   string
	Key      FRMRPoolKey // Has(AttrFRMRPoolKey)
	Queue    uint32      // FRMR_POOL_QUEUE_HANDLES
	InUse    uint64
	MaxInUse uint64
	Pinned   uint32 // FRMR_POOL_PINNED_HANDLES
	Driver   []DriverAttr

	attrSet
}

func (p *FRMRPool) decode(b []byte, in *interner) error {
	a := newAttrs(b)
	for a.next() {
		switch a.typ {
		case AttrFRMRPoolKey:
			k := newAttrs(a.val)
			for k.next() {
				switch k.typ {
				case AttrFRMRPoolKeyATS:
					p.Key.ATS = k.val.u8() != 0
				case AttrFRMRPoolKeyAccessFlags:
					p.Key.AccessFlags = k.val.u32()
				case AttrFRMRPoolKeyVendorKey:
					p.Key.VendorKey = k.val.u64()
				case AttrFRMRPoolKeyNumDMABlocks:
					p.Key.NumDMABlocks = k.val.u64()
				case AttrFRMRPoolKeyKernelVendorKey:
					p.Key.KernelVendorKey = k.val.u64()
				default:
					continue
				}
				p.Key.add(k.typ)
			}
		case AttrFRMRPoolQueueHandles:
			p.Queue = a.val.u32()
		case AttrFRMRPoolInUse:
			p.InUse = a.val.u64()
		case AttrFRMRPoolMaxInUse:
			p.MaxInUse = a.val.u64()
		case AttrFRMRPoolPinnedHandles:
			p.Pinned = a.val.u32()
		case AttrDriver:
			p.Driver = decodeDriverAttrs(p.Driver[:0], a.val, in)
		default:
			continue
		}
		p.add(a.typ)
	}
	return a.err
}

// errNoFRMRPools explains a kernel without FRMR pools.
func frmrExplain(errno unix.Errno) string {
	switch errno {
	case unix.EINVAL, unix.EOPNOTSUPP:
		return "not supported by this kernel (FRMR pools came with Linux 7.0) or by the device's driver"
	}
	return ""
}

// FRMRPools streams the FRMR pools of device q.DevIndex. Equivalent to one
// device of `rdma res show frmr_pools`.
func (c *Client) FRMRPools(q ResQuery, fn func(*FRMRPool) error) error {
	k := &resKind{name: "frmr_pools", table: AttrFRMRPools, entry: AttrFRMRPoolEntry}
	err := c.dumpTable(CmdFRMRPoolsGet, q.encode(0, 0), k, func(dev uint32, name string, entry []byte, in *interner) error {
		p := FRMRPool{DevIndex: dev, Device: name}
		if err := p.decode(entry, in); err != nil {
			return err
		}
		return fn(&p)
	})
	return wrap(fmt.Sprintf("list FRMR pools of RDMA device %d", q.DevIndex), err, frmrExplain)
}

// SetFRMRPoolsAging sets how many seconds an unused FRMR of device dev
// ages before the kernel frees it (not 0). Equivalent to `rdma res set
// frmr_pools dev DEV aging SECS`.
func (c *Client) SetFRMRPoolsAging(dev, seconds uint32) error {
	if seconds == 0 {
		return &InvalidArgumentError{"setting the aging period to zero is not supported"}
	}
	_, err := c.execute(CmdFRMRPoolsSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), dev)
		ae.Uint32(uint16(AttrFRMRPoolsAgingPeriod), seconds)
	})
	return wrap(fmt.Sprintf("set FRMR pool aging of RDMA device %d", dev), err, frmrExplain)
}

// FRMRPoolField is a field of an FRMR pool that a filter of `res show
// frmr_pools` compares (all numeric).
type FRMRPoolField uint8

// FRMR pool fields.
const (
	FRMRPoolATS FRMRPoolField = iota + 1
	FRMRPoolAccessFlags
	FRMRPoolVendorKey
	FRMRPoolNumDMABlocks
	FRMRPoolQueue
	FRMRPoolInUse
	FRMRPoolMaxInUse
	FRMRPoolPinned
)

// FRMRPoolSelect is what `res show frmr_pools [dev DEV] [FILTER VALUE]...`
// asks for: the pools of Device ("" for every device) whose fields are in
// their filters' lists.
type FRMRPoolSelect struct {
	Device  string
	Filters map[FRMRPoolField]NumList
}

// Match reports whether rdma prints pool p (res_frmr_pools_line): a field
// the pool lacks never matches a filter on it.
func (sel *FRMRPoolSelect) Match(p *FRMRPool) bool {
	for f, l := range sel.Filters {
		var v uint64
		var ok bool
		switch f {
		case FRMRPoolATS:
			v, ok = boolU64(p.Key.ATS), p.Key.Has(AttrFRMRPoolKeyATS)
		case FRMRPoolAccessFlags:
			v, ok = uint64(p.Key.AccessFlags), p.Key.Has(AttrFRMRPoolKeyAccessFlags)
		case FRMRPoolVendorKey:
			v, ok = p.Key.VendorKey, p.Key.Has(AttrFRMRPoolKeyVendorKey)
		case FRMRPoolNumDMABlocks:
			v, ok = p.Key.NumDMABlocks, p.Key.Has(AttrFRMRPoolKeyNumDMABlocks)
		case FRMRPoolQueue:
			v, ok = uint64(p.Queue), p.Has(AttrFRMRPoolQueueHandles)
		case FRMRPoolInUse:
			v, ok = p.InUse, p.Has(AttrFRMRPoolInUse)
		case FRMRPoolMaxInUse:
			v, ok = p.MaxInUse, p.Has(AttrFRMRPoolMaxInUse)
		case FRMRPoolPinned:
			v, ok = uint64(p.Pinned), p.Has(AttrFRMRPoolPinnedHandles)
		}
		if !ok || !l.Contains(v) {
			return false
		}
	}
	return true
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// FRMRPoolList lists the FRMR pools sel selects, device by device, as
// `rdma res show frmr_pools` does.
func (c *Client) FRMRPoolList(sel FRMRPoolSelect, driverDetails bool, fn func(*FRMRPool) error) error {
	devs, err := c.devicesNamed(sel.Device)
	if err != nil {
		return err
	}
	for _, d := range devs {
		err := c.FRMRPools(ResQuery{DevIndex: d.Index, DriverDetails: driverDetails}, func(p *FRMRPool) error {
			if sel.Match(p) {
				return fn(p)
			}
			return nil
		})
		if err != nil && !(sel.Device == "" && c.Gone(d.Index, err)) {
			return err
		}
	}
	return nil
}

// SetFRMRPoolPinned sets how many FRMRs the pool with key k of device dev
// keeps pinned. Equivalent to `rdma res set frmr_pools dev DEV pinned KEY
// N`.
func (c *Client) SetFRMRPoolPinned(dev uint32, k FRMRPoolKey, pinned uint32) error {
	_, err := c.execute(CmdFRMRPoolsSet, true, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(AttrDevIndex), dev)
		ae.Uint32(uint16(AttrFRMRPoolPinnedHandles), pinned)
		ae.Nested(uint16(AttrFRMRPoolKey), func(nae *netlink.AttributeEncoder) error {
			nae.Uint8(uint16(AttrFRMRPoolKeyATS), boolByte(k.ATS))
			nae.Uint32(uint16(AttrFRMRPoolKeyAccessFlags), k.AccessFlags)
			nae.Uint64(uint16(AttrFRMRPoolKeyVendorKey), k.VendorKey)
			nae.Uint64(uint16(AttrFRMRPoolKeyNumDMABlocks), k.NumDMABlocks)
			return nil
		})
	})
	return wrap(fmt.Sprintf("set pinned FRMRs of pool %s of RDMA device %d", k, dev), err, frmrExplain)
}
