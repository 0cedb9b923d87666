package uverbs

import (
	"encoding/binary"
)

// PortAttrEx is struct ib_uverbs_query_port_resp_ex, what the ioctl
// UVERBS_METHOD_QUERY_PORT returns (ibv_query_port in rdma-core): the
// write command's attributes, port_cap_flags2, and since Linux 6.8 the
// active speed beyond NDR (active_speed_ex: XDR is 256), which kernels
// before it leave zero.
type PortAttrEx struct {
	PortAttr
	PortCapFlags2 uint16
	Reserved      [2]uint8
	ActiveSpeedEx uint32
}

const (
	methodQueryPort   = 2 // UVERBS_METHOD_QUERY_PORT (UVERBS_OBJECT_DEVICE)
	queryPortPortNum  = 0 // UVERBS_ATTR_QUERY_PORT_PORT_NUM
	queryPortResp     = 1 // UVERBS_ATTR_QUERY_PORT_RESP
	ioctlMethodQPort  = "QUERY_PORT (ioctl)"
	queryPortRespSize = 48
)

// QueryPortEx returns the attributes of port number port, from 1, with
// port_cap_flags2 and active_speed_ex, through the ioctl ABI (Linux 4.20+);
// driverID is the device's enum rdma_driver_id. Where the ioctl method is
// missing, use QueryPort.
func (c *Context) QueryPortEx(driverID uint32, port uint8) (PortAttrEx, error) {
	var attr PortAttrEx
	attrs := []ioctlAttr{
		{AttrID: queryPortPortNum, Len: 8, Flags: attrFlagMandatory, Data: uint64(port)},
		{AttrID: queryPortResp, Len: queryPortRespSize, Flags: attrFlagMandatory, Data: c.ioctlOut(0)},
	}
	out, err := c.ioctl(ioctlMethodQPort, driverID, objectDevice, methodQueryPort, attrs)
	if err != nil {
		return attr, err
	}
	_, err = binary.Decode(out[:queryPortRespSize], binary.NativeEndian, &attr)
	return attr, err
}
