package devinfo

import (
	"fmt"

	"github.com/grdma/grdma/ib"
)

// The names below are those `ibv_devinfo -v` prints
// (rdma-core libibverbs/examples/devinfo.c).

// TransportName returns a node type's transport as ibv_devinfo names it,
// with libibverbs' enum ibv_transport_type value.
func TransportName(t ib.NodeType) (string, uint64) {
	switch t {
	case ib.NodeRNIC:
		return "iWARP", 1
	case ib.NodeUSNIC:
		return "usNIC", 2
	case ib.NodeUSNICUDP:
		return "usNIC UDP", 3
	case ib.NodeCA, ib.NodeSwitch, ib.NodeRouter:
		return "InfiniBand", 0
	}
	return "invalid transport", uint64(t)
}

// PortStateName names enum ibv_port_state: "PORT_ACTIVE".
func PortStateName(s ib.PortState) string {
	switch s {
	case 1:
		return "PORT_DOWN"
	case 2:
		return "PORT_INIT"
	case 3:
		return "PORT_ARMED"
	case 4:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

// PhysStateName names a physical port state: "LINK_UP".
func PhysStateName(s ib.PhysState) string {
	names := [...]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
		5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return "invalid physical state"
}

// AtomicCapName names enum ibv_atomic_cap: "ATOMIC_HCA".
func AtomicCapName(c uint32) string {
	switch c {
	case 0:
		return "ATOMIC_NONE"
	case 1:
		return "ATOMIC_HCA"
	case 2:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

// SpeedName names an active speed code as ibv_devinfo does: the per-lane
// rate, "25.0 Gbps" (EDR); "invalid speed" beyond HDR, as it prints NDR.
func SpeedName(s uint8) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	}
	return "invalid speed"
}

// VLs returns the number of data VLs of a max_vl_num code, 0 for an
// invalid one.
func VLs(code uint8) uint64 {
	switch code {
	case 1, 2:
		return uint64(code)
	case 3:
		return 4
	case 4:
		return 8
	case 5:
		return 15
	}
	return 0
}

// flagName is one bit of a flag word and its name.
type flagName struct {
	bit  uint64
	name string
}

// names lists the names of the bits set in v, in table order, and for
// bits the table lacks "Unknown flags: 0x..." as ibv_devinfo prints them.
func names(v uint64, table []flagName) []string {
	var out []string
	known := uint64(0)
	for _, f := range table {
		known |= f.bit
		if v&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	if rest := v &^ known; rest != 0 {
		out = append(out, fmt.Sprintf("Unknown flags: 0x%X", rest))
	}
	return out
}

var deviceCapFlags = []flagName{
	{1, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"}, {1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"}, {1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"}, {1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"}, {1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

// DeviceCapFlagNames names the bits of device_cap_flags.
func DeviceCapFlagNames(v uint32) []string { return names(uint64(v), deviceCapFlags) }

// DeviceCapFlagsExNames names the upper 32 bits of device_cap_flags_ex,
// the only ones ibv_devinfo lists there.
func DeviceCapFlagsExNames(v uint64) []string {
	return names(v&0xffffffff00000000, []flagName{{1 << 34, "RAW_SCATTER_FCS"}, {1 << 36, "PCI_WRITE_END_PADDING"}})
}

// ODPGeneralNames names odp_caps.general_caps.
func ODPGeneralNames(v uint64) []string {
	return names(v, []flagName{{1, "ODP_SUPPORT"}, {2, "ODP_SUPPORT_IMPLICIT"}})
}

// ODPTransportNames names a transport's ODP caps; "NO SUPPORT" for none.
func ODPTransportNames(v uint32) []string {
	if v == 0 {
		return []string{"NO SUPPORT"}
	}
	return names(uint64(v), []flagName{{1, "SUPPORT_SEND"}, {2, "SUPPORT_RECV"}, {4, "SUPPORT_WRITE"},
		{8, "SUPPORT_READ"}, {16, "SUPPORT_ATOMIC"}, {32, "SUPPORT_SRQ"}})
}

// QPTypeNames names a supported_qpts word (1 << enum ibv_qp_type) as the
// TSO, RSS and packet pacing capabilities list it.
func QPTypeNames(v uint32) []string {
	return names(uint64(v), []flagName{{1 << 8, "SUPPORT_RAW_PACKET"}, {1 << 4, "SUPPORT_UD"}})
}

// RawPacketCapNames names raw_packet_caps.
func RawPacketCapNames(v uint32) []string {
	var out []string
	for _, f := range []flagName{{1, "C-VLAN stripping offload"}, {2, "Scatter FCS offload"}, {4, "IP csum offload"}, {8, "Delay drop"}} {
		if uint64(v)&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// TMFlagNames names the tag matching flags.
func TMFlagNames(v uint32) []string {
	var out []string
	if v&1 != 0 {
		out = append(out, "IBV_TM_CAP_RC")
	}
	return out
}
