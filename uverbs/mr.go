package uverbs

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access is a set of access rights of a memory region or queue pair
// (enum ib_uverbs_access_flags, ibv_access_flags).
type Access uint32

// Access rights. Remote write and remote atomic need local write.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
)

// MR is a registered memory region (ibv_mr): the device may read and write
// [Addr, Addr+Length) with LKey locally and, as its access allows, remotely
// with RKey.
type MR struct {
	Handle uint32
	LKey   uint32
	RKey   uint32
	Addr   uint64
	Length uint64
}

// regMRReq is struct ib_uverbs_reg_mr.
type regMRReq struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

// regMRResp is struct ib_uverbs_reg_mr_resp.
type regMRResp struct {
	MRHandle uint32
	LKey     uint32
	RKey     uint32
}

// deregMRReq is struct ib_uverbs_dereg_mr; DEREG_MR has no response.
type deregMRReq struct{ MRHandle uint32 }

func (r *regMRReq) setResponse(addr uint64) { r.Response = addr }

// RegMR registers buf in pd (ibv_reg_mr), with the device address equal to
// the virtual address. The kernel pins buf's pages, which counts against
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK (ENOMEM beyond it).
// buf must stay mapped until DeregMR, and must not be Go heap memory,
// which the runtime may release while the device still uses it: allocate
// it with AllocBuffer.
func (c *Context) RegMR(pd PD, buf []byte, access Access) (MR, error) {
	if len(buf) == 0 {
		return MR{}, fmt.Errorf("uverbs: REG_MR of an empty buffer")
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	req := regMRReq{Start: addr, Length: uint64(len(buf)), HCAVA: addr, PDHandle: pd.Handle, AccessFlags: uint32(access)}
	var resp regMRResp
	var driverOut [objectDriverRoom]byte
	if err := c.execute(cmdRegMR, &req, nil, &resp, driverOut[:]); err != nil {
		return MR{}, err
	}
	return MR{Handle: resp.MRHandle, LKey: resp.LKey, RKey: resp.RKey, Addr: addr, Length: uint64(len(buf))}, nil
}

// DeregMR deregisters a memory region (ibv_dereg_mr) and unpins its pages.
func (c *Context) DeregMR(mr MR) error {
	return c.execute(cmdDeregMR, &deregMRReq{MRHandle: mr.Handle}, nil, nil, nil)
}

// AllocBuffer returns n bytes (rounded up to whole pages) of zeroed,
// page-aligned anonymous memory outside the Go heap, for memory regions
// and driver queues. Free it with FreeBuffer once the device is done with
// it.
func AllocBuffer(n int) ([]byte, error) {
	page := unix.Getpagesize()
	size := (n + page - 1) / page * page
	if size == 0 {
		size = page
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("uverbs: allocating %d bytes: %w", size, err)
	}
	return b, nil
}

// FreeBuffer unmaps a buffer from AllocBuffer; nil is a no-op.
func FreeBuffer(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}
