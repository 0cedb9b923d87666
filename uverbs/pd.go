package uverbs

// PD is a protection domain (ibv_pd): the memory regions and queue pairs
// made in it may work together.
type PD struct{ Handle uint32 }

// allocPDReq is struct ib_uverbs_alloc_pd.
type allocPDReq struct{ Response uint64 }

// allocPDResp is struct ib_uverbs_alloc_pd_resp.
type allocPDResp struct{ PDHandle uint32 }

// deallocPDReq is struct ib_uverbs_dealloc_pd; DEALLOC_PD has no response.
type deallocPDReq struct{ PDHandle uint32 }

func (r *allocPDReq) setResponse(addr uint64) { r.Response = addr }

// objectDriverRoom is the room given to the driver's response data of
// ALLOC_PD: ib_copy_to_udata does not check the room it is given, and
// drivers answer with up to 8 bytes (mlx5 its pdn, irdma its pd_id).
const objectDriverRoom = 16

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (PD, error) {
	var resp allocPDResp
	var driverOut [objectDriverRoom]byte
	err := c.execute(cmdAllocPD, &allocPDReq{}, nil, &resp, driverOut[:])
	return PD{Handle: resp.PDHandle}, err
}

// DeallocPD frees a protection domain (ibv_dealloc_pd). The kernel refuses
// (EBUSY) while a memory region or queue pair still uses it.
func (c *Context) DeallocPD(pd PD) error {
	return c.execute(cmdDeallocPD, &deallocPDReq{PDHandle: pd.Handle}, nil, nil, nil)
}
