package uverbs

// RegDMABufMR registers length bytes at offset of the dma-buf fd as a
// memory region of pd (ibv_reg_dmabuf_mr; ioctl ABI, Linux 5.12+).
// driverID is the device's enum rdma_driver_id (nldev.Chardev.DriverID). A
// device whose driver cannot import dma-bufs has no such method: the
// kernel answers EPROTONOSUPPORT (or EOPNOTSUPP).
func (c *Context) RegDMABufMR(driverID uint32, pd PD, offset, length, iova uint64, fd int, access Access) (MR, error) {
	mandatory := func(id uint16, length uint16, data uint64) ioctlAttr {
		return ioctlAttr{AttrID: id, Len: length, Flags: attrFlagMandatory, Data: data}
	}
	attrs := []ioctlAttr{
		mandatory(regDMABufMRHandle, 0, 0),
		mandatory(regDMABufMRPDHandle, 0, uint64(pd.Handle)),
		mandatory(regDMABufMROffset, 8, offset),
		mandatory(regDMABufMRLength, 8, length),
		mandatory(regDMABufMRIOVA, 8, iova),
		mandatory(regDMABufMRFD, 4, uint64(uint32(int32(fd)))), // an int, copied in
		{AttrID: regDMABufMRAccess, Len: 4, Data: uint64(access)},
		mandatory(regDMABufMRRespLKey, 4, c.ioctlOut(0)),
		mandatory(regDMABufMRRespRKey, 4, c.ioctlOut(1)),
	}
	out, err := c.ioctl(ioctlMethodRegDMABuf, driverID, objectMR, methodRegDMABufMR, attrs)
	if err != nil {
		return MR{}, err
	}
	return MR{Handle: uint32(attrs[0].Data), LKey: out.u32(0), RKey: out.u32(1)}, nil
}

// ProbeDMABufImport asks the device whether it can import dma-bufs the way
// NCCL does: register a dma-buf MR with fd -1. The kernel reaches the fd
// lookup (EBADF) only when the device implements dma-buf registration; it
// refuses earlier (EOPNOTSUPP, EPROTONOSUPPORT) when it does not. The
// returned error is the kernel's answer; nil only if, against the odds, a
// registration with fd -1 succeeded (the region is released again).
func (c *Context) ProbeDMABufImport(driverID uint32) error {
	pd, err := c.AllocPD()
	if err != nil {
		return err
	}
	defer c.DeallocPD(pd)
	mr, err := c.RegDMABufMR(driverID, pd, 0, 0, 0, -1, 0)
	if err == nil {
		c.DeregMR(mr)
	}
	return err
}
