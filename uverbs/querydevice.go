package uverbs

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"
)

// The extended QUERY_DEVICE command (IB_USER_VERBS_EX_CMD_QUERY_DEVICE):
// the attributes of QUERY_DEVICE and those added since (on-demand paging,
// timestamps, RSS, tag matching, ...), what ibv_query_device_ex returns
// and `ibv_devinfo -v` prints.

const (
	// cmdFlagExtended marks an extended command
	// (IB_USER_VERBS_CMD_FLAG_EXTENDED); its header is followed by an
	// ib_uverbs_ex_cmd_hdr and its sizes count 8-byte words.
	cmdFlagExtended  = 0x80000000
	exCmdQueryDevice = 1 // IB_USER_VERBS_EX_CMD_QUERY_DEVICE
)

// exCmdHdr is struct ib_uverbs_ex_cmd_hdr.
type exCmdHdr struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

// exQueryDeviceReq is struct ib_uverbs_ex_query_device.
type exQueryDeviceReq struct {
	CompMask uint32
	Reserved uint32
}

// ODPCaps is struct ib_uverbs_odp_caps: on-demand paging support.
type ODPCaps struct {
	GeneralCaps      uint64 // ODP_SUPPORT (1), ODP_SUPPORT_IMPLICIT (2)
	PerTransportCaps ODPTransportCaps
	Reserved         uint32
}

// ODPTransportCaps are the on-demand paging operations each transport
// supports (IB_ODP_SUPPORT_SEND 1, RECV 2, WRITE 4, READ 8, ATOMIC 16,
// SRQ_RECV 32).
type ODPTransportCaps struct {
	RCODPCaps uint32
	UCODPCaps uint32
	UDODPCaps uint32
}

// RSSCaps is struct ib_uverbs_rss_caps.
type RSSCaps struct {
	SupportedQPTs              uint32 // bit 1<<qp_type
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	Reserved                   uint32
}

// TMCaps is struct ib_uverbs_tm_caps: tag matching.
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32 // IBV_TM_CAP_RC (1)
	MaxOps         uint32
	MaxSGE         uint32
	Reserved       uint32
}

// CQModerationCaps is struct ib_uverbs_cq_moderation_caps.
type CQModerationCaps struct {
	MaxCQModerationCount  uint16
	MaxCQModerationPeriod uint16 // microseconds
	Reserved              uint32
}

// DeviceAttrEx is struct ib_uverbs_ex_query_device_resp: the extended
// device attributes. The kernel fills as much of it as it knows
// (ResponseLength bytes); the rest stays zero.
type DeviceAttrEx struct {
	Base             DeviceAttr
	CompMask         uint32
	ResponseLength   uint32
	ODPCaps          ODPCaps
	TimestampMask    uint64
	HCACoreClock     uint64 // kHz
	DeviceCapFlagsEx uint64 // device_cap_flags (64 bits: RAW_SCATTER_FCS 1<<34, PCI_WRITE_END_PADDING 1<<36, ...)
	RSSCaps          RSSCaps
	MaxWQTypeRQ      uint32
	RawPacketCaps    uint32
	TMCaps           TMCaps
	CQModerationCaps CQModerationCaps
	MaxDMSize        uint64
	XRCODPCaps       uint32
	Reserved         uint32
}

// DriverDeviceAttr is what some drivers add to the extended device
// attributes in their own response data (mlx5: struct
// mlx5_ib_query_device_resp); zero for drivers without it, as libibverbs
// reports them.
type DriverDeviceAttr struct {
	MaxTSO              uint32
	TSOSupportedQPTs    uint32
	RxHashFieldsMask    uint64
	RxHashFunction      uint8
	QPRateLimitMin      uint32 // kbit/s
	QPRateLimitMax      uint32 // kbit/s
	PacingSupportedQPTs uint32
}

// mlx5QueryDeviceResp is struct mlx5_ib_query_device_resp, mlx5's
// response data to the extended QUERY_DEVICE; the nested arrays are the
// members of structs whose layout alone matters here.
type mlx5QueryDeviceResp struct {
	CompMask       uint32
	ResponseLength uint32
	TSOCaps        struct{ MaxTSO, SupportedQPTs uint32 }
	RSSCaps        struct {
		RxHashFieldsMask uint64
		RxHashFunction   uint8
		Reserved         [7]uint8
	}
	CQECompCaps      [2]uint32
	PacketPacingCaps struct {
		QPRateLimitMin, QPRateLimitMax, SupportedQPTs uint32
		CapFlags                                      uint8
		Reserved                                      [3]uint8
	}
	MLX5IBSupportMultiPktSendWQEs uint32
	Flags                         uint32
	SWParsingCaps                 [2]uint32
	StridingRQCaps                [6]uint32
	TunnelOffloadsCaps            uint32
	DCIStreamsCaps                [2]uint8
	Reserved                      uint16
}

// QueryDeviceEx returns the extended device attributes (ibv_query_device_ex)
// and, for drivers that report them in their response data (mlx5), the
// TSO, RSS hash and packet pacing capabilities.
func (c *Context) QueryDeviceEx() (DeviceAttrEx, DriverDeviceAttr, error) {
	var attr DeviceAttrEx
	var drv DriverDeviceAttr
	var driverOut []byte
	if c.Node.Driver == mlx5Driver {
		driverOut = make([]byte, binary.Size(mlx5QueryDeviceResp{}))
	}
	if err := c.executeEx(exCmdQueryDevice, &exQueryDeviceReq{}, &attr, driverOut); err != nil {
		return attr, drv, err
	}
	if driverOut != nil {
		var m mlx5QueryDeviceResp
		if _, err := binary.Decode(driverOut, binary.NativeEndian, &m); err != nil {
			return attr, drv, err
		}
		drv = DriverDeviceAttr{MaxTSO: m.TSOCaps.MaxTSO, TSOSupportedQPTs: m.TSOCaps.SupportedQPTs,
			RxHashFieldsMask: m.RSSCaps.RxHashFieldsMask, RxHashFunction: m.RSSCaps.RxHashFunction,
			QPRateLimitMin: m.PacketPacingCaps.QPRateLimitMin, QPRateLimitMax: m.PacketPacingCaps.QPRateLimitMax,
			PacingSupportedQPTs: m.PacketPacingCaps.SupportedQPTs}
	}
	return attr, drv, nil
}

// executeEx runs one extended command: the header counts the core request
// and response in 8-byte words, the ib_uverbs_ex_cmd_hdr names the
// response buffer and counts the driver's response data.
func (c *Context) executeEx(command uint32, req, resp any, driverOut []byte) error {
	name := exCommandNames[command]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arena == nil {
		return &CommandError{Device: c.name, Command: name, Err: os.ErrClosed}
	}
	coreSize := binary.Size(resp)
	respSize := coreSize + len(driverOut)
	if respSize > maxResponse {
		return fmt.Errorf("uverbs: %s response of %d bytes exceeds %d", name, respSize, maxResponse)
	}
	out := c.arena[arenaSize-maxResponse:][:respSize]
	clear(out)
	msg, err := encodeExCommand(command, req, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), coreSize, len(driverOut))
	if err != nil {
		return err
	}
	if err := c.write(name, msg); err != nil {
		return err
	}
	if _, err := binary.Decode(out, binary.NativeEndian, resp); err != nil {
		return fmt.Errorf("uverbs: decoding %s response: %w", name, err)
	}
	copy(driverOut, out[coreSize:])
	return nil
}

var exCommandNames = map[uint32]string{exCmdQueryDevice: "EX_QUERY_DEVICE"}

// encodeExCommand returns the write() buffer of an extended command with
// no driver request data: header, extended header, core request.
func encodeExCommand(command uint32, req any, response uint64, coreOut, driverOut int) ([]byte, error) {
	reqSize := binary.Size(req)
	if reqSize%8 != 0 || coreOut%8 != 0 || driverOut%8 != 0 || reqSize/8 > 0xffff || coreOut/8 > 0xffff || driverOut/8 > 0xffff {
		return nil, fmt.Errorf("uverbs: %s: request of %d and responses of %d+%d bytes are not encodable in 64-bit words",
			exCommandNames[command], reqSize, coreOut, driverOut)
	}
	msg := make([]byte, 0, binary.Size(cmdHdr{})+binary.Size(exCmdHdr{})+reqSize)
	msg, err := binary.Append(msg, binary.NativeEndian, cmdHdr{Command: cmdFlagExtended | command,
		InWords: uint16(reqSize / 8), OutWords: uint16(coreOut / 8)})
	if err != nil {
		return nil, err
	}
	if msg, err = binary.Append(msg, binary.NativeEndian, exCmdHdr{Response: response, ProviderOutWords: uint16(driverOut / 8)}); err != nil {
		return nil, err
	}
	return binary.Append(msg, binary.NativeEndian, req)
}
