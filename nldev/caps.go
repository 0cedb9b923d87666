package nldev

// Capability bit names exactly as iproute2 rdma prints them, typos included
// (LINK_SPPED_WIDTH, MULT_PKER_TRAP, SWITCH_POR_STATE_TABLE,
// UD_AV_PORT_ENFORCE_PORT_ENFORCE): scripts match on these strings.
// Bits rdma does not name print as UNKNOWN.

var deviceCapNames = [...]string{
	0: "RESIZE_MAX_WR", 1: "BAD_PKEY_CNTR", 2: "BAD_QKEY_CNTR", 3: "RAW_MULTI",
	4: "AUTO_PATH_MIG", 5: "CHANGE_PHY_PORT", 6: "UD_AV_PORT_ENFORCE_PORT_ENFORCE",
	7: "CURR_QP_STATE_MOD", 8: "SHUTDOWN_PORT", 9: "INIT_TYPE", 10: "PORT_ACTIVE_EVENT",
	11: "SYS_IMAGE_GUID", 12: "RC_RNR_NAK_GEN", 13: "SRQ_RESIZE", 14: "N_NOTIFY_CQ",
	15: "LOCAL_DMA_LKEY", 17: "MEM_WINDOW", 18: "UD_IP_CSUM", 19: "UD_TSO", 20: "XRC",
	21: "MEM_MGT_EXTENSIONS", 22: "BLOCK_MULTICAST_LOOPBACK", 23: "MEM_WINDOW_TYPE_2A",
	24: "MEM_WINDOW_TYPE_2B", 25: "RC_IP_CSUM", 26: "RAW_IP_CSUM", 27: "CROSS_CHANNEL",
	29: "MANAGED_FLOW_STEERING", 30: "SIGNATURE_HANDOVER", 31: "ON_DEMAND_PAGING",
	32: "SG_GAPS_REG", 33: "VIRTUAL_FUNCTION", 34: "RAW_SCATTER_FCS",
	35: "RDMA_NETDEV_OPA_VNIC", 36: "PCI_WRITE_END_PADDING",
}

var portCapNames = [...]string{
	0: "RESERVED", 1: "SM", 2: "NOTICE", 3: "TRAP", 4: "OPT_IPD", 5: "AUTO_MIGR",
	6: "SL_MAP", 7: "MKEY_NVRAM", 8: "PKEY_NVRAM", 9: "LED_INFO", 10: "SM_DISABLED",
	11: "SYS_IMAGE_GUID", 12: "PKEY_SW_EXT_PORT_TRAP", 13: "CABLE_INFO",
	14: "EXTENDED_SPEEDS", 15: "CAP_MASK2", 16: "CM", 17: "SNMP_TUNNEL", 18: "REINIT",
	19: "DEVICE_MGMT", 20: "VENDOR_CLASS", 21: "DR_NOTICE", 22: "CAP_MASK_NOTICE",
	23: "BOOT_MGMT", 24: "LINK_LATENCY", 25: "CLIENT_REG", 26: "OTHER_LOCAL_CHANGES",
	27: "LINK_SPPED_WIDTH", 28: "VENDOR_SPECIFIC_MADS", 29: "MULT_PKER_TRAP",
	30: "MULT_FDB", 31: "HIERARCHY_INFO",
	32: "SET_NODE_DESC", 33: "EXT_INFO", 34: "VIRT", 35: "SWITCH_POR_STATE_TABLE",
	36: "LINK_WIDTH_2X", 37: "LINK_SPEED_HDR",
}

// DeviceCapNames names the set bits of a device's CapFlags, lowest first.
func DeviceCapNames(flags uint64) []string { return capNames(flags, deviceCapNames[:]) }

// PortCapNames names the set bits of a port's CapFlags, lowest first.
func PortCapNames(flags uint64) []string { return capNames(flags, portCapNames[:]) }

func capNames(flags uint64, names []string) []string {
	var out []string
	for bit := 0; flags != 0; bit++ {
		if flags&1 != 0 {
			name := "UNKNOWN"
			if bit < len(names) && names[bit] != "" {
				name = names[bit]
			}
			out = append(out, name)
		}
		flags >>= 1
	}
	return out
}

// FormatGUID prints a host-order GUID or subnet prefix as rdma and sysfs
// do: four 16-bit groups, most significant first.
func FormatGUID(v uint64) string {
	const hex = "0123456789abcdef"
	var b [19]byte
	for i, pos := 0, 0; i < 16; i++ {
		if i > 0 && i%4 == 0 {
			b[pos] = ':'
			pos++
		}
		b[pos] = hex[(v>>(60-4*i))&0xf]
		pos++
	}
	return string(b[:])
}
