// RDMA_NLDEV ABI numbers from include/uapi/rdma/rdma_netlink.h; every value is
// checked against the installed header by TestConstantsMatchHeader.

package nldev

// Command is an RDMA_NLDEV command (enum rdma_nldev_command).
type Command uint16

// RDMA_NLDEV commands. The netlink message type is MessageType(cmd).
const (
	CmdGet           Command = 1  // RDMA_NLDEV_CMD_GET
	CmdSet           Command = 2  // RDMA_NLDEV_CMD_SET
	CmdNewLink       Command = 3  // RDMA_NLDEV_CMD_NEWLINK
	CmdDelLink       Command = 4  // RDMA_NLDEV_CMD_DELLINK
	CmdPortGet       Command = 5  // RDMA_NLDEV_CMD_PORT_GET
	CmdSysGet        Command = 6  // RDMA_NLDEV_CMD_SYS_GET
	CmdSysSet        Command = 7  // RDMA_NLDEV_CMD_SYS_SET
	CmdResGet        Command = 9  // RDMA_NLDEV_CMD_RES_GET
	CmdResQPGet      Command = 10 // RDMA_NLDEV_CMD_RES_QP_GET
	CmdResCMIDGet    Command = 11 // RDMA_NLDEV_CMD_RES_CM_ID_GET
	CmdResCQGet      Command = 12 // RDMA_NLDEV_CMD_RES_CQ_GET
	CmdResMRGet      Command = 13 // RDMA_NLDEV_CMD_RES_MR_GET
	CmdResPDGet      Command = 14 // RDMA_NLDEV_CMD_RES_PD_GET
	CmdGetChardev    Command = 15 // RDMA_NLDEV_CMD_GET_CHARDEV
	CmdStatSet       Command = 16 // RDMA_NLDEV_CMD_STAT_SET
	CmdStatGet       Command = 17 // RDMA_NLDEV_CMD_STAT_GET
	CmdStatDel       Command = 18 // RDMA_NLDEV_CMD_STAT_DEL
	CmdResQPGetRaw   Command = 19 // RDMA_NLDEV_CMD_RES_QP_GET_RAW
	CmdResCQGetRaw   Command = 20 // RDMA_NLDEV_CMD_RES_CQ_GET_RAW
	CmdResMRGetRaw   Command = 21 // RDMA_NLDEV_CMD_RES_MR_GET_RAW
	CmdResCtxGet     Command = 22 // RDMA_NLDEV_CMD_RES_CTX_GET
	CmdResSRQGet     Command = 23 // RDMA_NLDEV_CMD_RES_SRQ_GET
	CmdStatGetStatus Command = 24 // RDMA_NLDEV_CMD_STAT_GET_STATUS
	CmdResSRQGetRaw  Command = 25 // RDMA_NLDEV_CMD_RES_SRQ_GET_RAW
	CmdNewDev        Command = 26 // RDMA_NLDEV_CMD_NEWDEV
	CmdDelDev        Command = 27 // RDMA_NLDEV_CMD_DELDEV
	CmdMonitor       Command = 28 // RDMA_NLDEV_CMD_MONITOR
	CmdFRMRPoolsGet  Command = 29 // RDMA_NLDEV_CMD_FRMR_POOLS_GET
	CmdFRMRPoolsSet  Command = 30 // RDMA_NLDEV_CMD_FRMR_POOLS_SET

	numCommands = 31 // RDMA_NLDEV_NUM_OPS
)

var commandNames = [numCommands]string{
	1:  "GET",
	2:  "SET",
	3:  "NEWLINK",
	4:  "DELLINK",
	5:  "PORT_GET",
	6:  "SYS_GET",
	7:  "SYS_SET",
	9:  "RES_GET",
	10: "RES_QP_GET",
	11: "RES_CM_ID_GET",
	12: "RES_CQ_GET",
	13: "RES_MR_GET",
	14: "RES_PD_GET",
	15: "GET_CHARDEV",
	16: "STAT_SET",
	17: "STAT_GET",
	18: "STAT_DEL",
	19: "RES_QP_GET_RAW",
	20: "RES_CQ_GET_RAW",
	21: "RES_MR_GET_RAW",
	22: "RES_CTX_GET",
	23: "RES_SRQ_GET",
	24: "STAT_GET_STATUS",
	25: "RES_SRQ_GET_RAW",
	26: "NEWDEV",
	27: "DELDEV",
	28: "MONITOR",
	29: "FRMR_POOLS_GET",
	30: "FRMR_POOLS_SET",
}

// String returns the UAPI name without the RDMA_NLDEV_CMD_ prefix.
func (c Command) String() string {
	if int(c) < len(commandNames) && commandNames[c] != "" {
		return commandNames[c]
	}
	return "CMD_" + itoa(uint64(c))
}

// Attr is an RDMA_NLDEV attribute type (enum rdma_nldev_attr).
type Attr uint16

// RDMA_NLDEV attributes. Names drop the RDMA_NLDEV_ATTR_ (or RDMA_NLDEV_)
// prefix; SYS_ATTR_* become AttrSys*.
const (
	AttrPad                        Attr = 0   // RDMA_NLDEV_ATTR_PAD: 64-bit alignment padding, skipped
	AttrDevIndex                   Attr = 1   // u32
	AttrDevName                    Attr = 2   // string
	AttrPortIndex                  Attr = 3   // u32; in a device reply, the number of ports
	AttrCapFlags                   Attr = 4   // u64
	AttrFWVersion                  Attr = 5   // string
	AttrNodeGUID                   Attr = 6   // u64 (host order)
	AttrSysImageGUID               Attr = 7   // u64
	AttrSubnetPrefix               Attr = 8   // u64
	AttrLID                        Attr = 9   // u32
	AttrSMLID                      Attr = 10  // u32
	AttrLMC                        Attr = 11  // u8
	AttrPortState                  Attr = 12  // u8
	AttrPortPhysState              Attr = 13  // u8
	AttrDevNodeType                Attr = 14  // u8
	AttrResSummary                 Attr = 15  // nested table
	AttrResSummaryEntry            Attr = 16  // nested table
	AttrResSummaryEntryName        Attr = 17  // string
	AttrResSummaryEntryCurr        Attr = 18  // u64
	AttrResQP                      Attr = 19  // nested table
	AttrResQPEntry                 Attr = 20  // nested table
	AttrResLQPN                    Attr = 21  // u32
	AttrResRQPN                    Attr = 22  // u32
	AttrResRQPSN                   Attr = 23  // u32
	AttrResSQPSN                   Attr = 24  // u32
	AttrResPathMigState            Attr = 25  // u8
	AttrResType                    Attr = 26  // u8
	AttrResState                   Attr = 27  // u8
	AttrResPID                     Attr = 28  // u32
	AttrResKernName                Attr = 29  // string
	AttrResCMID                    Attr = 30  // nested table
	AttrResCMIDEntry               Attr = 31  // nested table
	AttrResPS                      Attr = 32  // u32
	AttrResSrcAddr                 Attr = 33  // __kernel_sockaddr_storage
	AttrResDstAddr                 Attr = 34  // __kernel_sockaddr_storage
	AttrResCQ                      Attr = 35  // nested table
	AttrResCQEntry                 Attr = 36  // nested table
	AttrResCQE                     Attr = 37  // u32
	AttrResUseCnt                  Attr = 38  // u64
	AttrResPollCtx                 Attr = 39  // u8
	AttrResMR                      Attr = 40  // nested table
	AttrResMREntry                 Attr = 41  // nested table
	AttrResRKey                    Attr = 42  // u32
	AttrResLKey                    Attr = 43  // u32
	AttrResIOVA                    Attr = 44  // u64
	AttrResMRLen                   Attr = 45  // u64
	AttrResPD                      Attr = 46  // nested table
	AttrResPDEntry                 Attr = 47  // nested table
	AttrResLocalDMALKey            Attr = 48  // u32
	AttrResUnsafeGlobalRKey        Attr = 49  // u32
	AttrNetdevIndex                Attr = 50  // u32
	AttrNetdevName                 Attr = 51  // string
	AttrDriver                     Attr = 52  // nested table
	AttrDriverEntry                Attr = 53  // nested table (unused by kernel: tuples are flat in DRIVER)
	AttrDriverString               Attr = 54  // string
	AttrDriverPrintType            Attr = 55  // u8 (0 UNSPEC, 1 HEX)
	AttrDriverS32                  Attr = 56  // s32
	AttrDriverU32                  Attr = 57  // u32
	AttrDriverS64                  Attr = 58  // s64
	AttrDriverU64                  Attr = 59  // u64
	AttrResPDN                     Attr = 60  // u32
	AttrResCQN                     Attr = 61  // u32
	AttrResMRN                     Attr = 62  // u32
	AttrResCMIDN                   Attr = 63  // u32
	AttrResCtxN                    Attr = 64  // u32
	AttrLinkType                   Attr = 65  // string
	AttrSysNetnsMode               Attr = 66  // u8
	AttrDevProtocol                Attr = 67  // string
	AttrNetNSFD                    Attr = 68  // u32
	AttrChardevType                Attr = 69  // string
	AttrChardevName                Attr = 70  // string
	AttrChardevABI                 Attr = 71  // u64
	AttrChardev                    Attr = 72  // u64 (huge_encode_dev dev_t)
	AttrUverbsDriverID             Attr = 73  // u64 per comment
	AttrStatMode                   Attr = 74  // u32
	AttrStatRes                    Attr = 75  // u32 (value = an attr id: 19 RES_QP, 40 RES_MR)
	AttrStatAutoModeMask           Attr = 76  // u32
	AttrStatCounter                Attr = 77  // nested table
	AttrStatCounterEntry           Attr = 78  // nested table
	AttrStatCounterID              Attr = 79  // u32
	AttrStatHWCounters             Attr = 80  // nested table
	AttrStatHWCounterEntry         Attr = 81  // nested table
	AttrStatHWCounterEntryName     Attr = 82  // string
	AttrStatHWCounterEntryValue    Attr = 83  // u64
	AttrDevDIM                     Attr = 84  // u8
	AttrResRaw                     Attr = 85  // binary
	AttrResCtx                     Attr = 86  // nested table
	AttrResCtxEntry                Attr = 87  // nested table
	AttrResSRQ                     Attr = 88  // nested table
	AttrResSRQEntry                Attr = 89  // nested table
	AttrResSRQN                    Attr = 90  // u32
	AttrMinRange                   Attr = 91  // u32
	AttrMaxRange                   Attr = 92  // u32
	AttrSysCopyOnFork              Attr = 93  // u8
	AttrStatHWCounterIndex         Attr = 94  // u32
	AttrStatHWCounterDynamic       Attr = 95  // u8
	AttrSysPrivilegedQKeyMode      Attr = 96  // u8
	AttrDriverDetails              Attr = 97  // u8
	AttrResSubtype                 Attr = 98  // string
	AttrDevType                    Attr = 99  // u8 (1 = RDMA_DEVICE_TYPE_SMI)
	AttrParentName                 Attr = 100 // string
	AttrNameAssignType             Attr = 101 // u8 (0 UNKNOWN, 1 USER)
	AttrEventType                  Attr = 102 // u8
	AttrSysMonitorMode             Attr = 103 // u8
	AttrStatOpcounterEnabled       Attr = 104 // u8
	AttrFRMRPools                  Attr = 105 // nested table
	AttrFRMRPoolEntry              Attr = 106 // nested table
	AttrFRMRPoolKey                Attr = 107 // nested table
	AttrFRMRPoolKeyATS             Attr = 108 // u8
	AttrFRMRPoolKeyAccessFlags     Attr = 109 // u32
	AttrFRMRPoolKeyVendorKey       Attr = 110 // u64
	AttrFRMRPoolKeyNumDMABlocks    Attr = 111 // u64
	AttrFRMRPoolQueueHandles       Attr = 112 // u32
	AttrFRMRPoolMaxInUse           Attr = 113 // u64
	AttrFRMRPoolInUse              Attr = 114 // u64
	AttrFRMRPoolsAgingPeriod       Attr = 115 // u32
	AttrFRMRPoolPinnedHandles      Attr = 116 // u32
	AttrFRMRPoolKeyKernelVendorKey Attr = 117 // u64

	numAttrs = 118 // RDMA_NLDEV_ATTR_MAX
)

var attrNames = [numAttrs]string{
	0:   "PAD",
	1:   "DEV_INDEX",
	2:   "DEV_NAME",
	3:   "PORT_INDEX",
	4:   "CAP_FLAGS",
	5:   "FW_VERSION",
	6:   "NODE_GUID",
	7:   "SYS_IMAGE_GUID",
	8:   "SUBNET_PREFIX",
	9:   "LID",
	10:  "SM_LID",
	11:  "LMC",
	12:  "PORT_STATE",
	13:  "PORT_PHYS_STATE",
	14:  "DEV_NODE_TYPE",
	15:  "RES_SUMMARY",
	16:  "RES_SUMMARY_ENTRY",
	17:  "RES_SUMMARY_ENTRY_NAME",
	18:  "RES_SUMMARY_ENTRY_CURR",
	19:  "RES_QP",
	20:  "RES_QP_ENTRY",
	21:  "RES_LQPN",
	22:  "RES_RQPN",
	23:  "RES_RQ_PSN",
	24:  "RES_SQ_PSN",
	25:  "RES_PATH_MIG_STATE",
	26:  "RES_TYPE",
	27:  "RES_STATE",
	28:  "RES_PID",
	29:  "RES_KERN_NAME",
	30:  "RES_CM_ID",
	31:  "RES_CM_ID_ENTRY",
	32:  "RES_PS",
	33:  "RES_SRC_ADDR",
	34:  "RES_DST_ADDR",
	35:  "RES_CQ",
	36:  "RES_CQ_ENTRY",
	37:  "RES_CQE",
	38:  "RES_USECNT",
	39:  "RES_POLL_CTX",
	40:  "RES_MR",
	41:  "RES_MR_ENTRY",
	42:  "RES_RKEY",
	43:  "RES_LKEY",
	44:  "RES_IOVA",
	45:  "RES_MRLEN",
	46:  "RES_PD",
	47:  "RES_PD_ENTRY",
	48:  "RES_LOCAL_DMA_LKEY",
	49:  "RES_UNSAFE_GLOBAL_RKEY",
	50:  "NDEV_INDEX",
	51:  "NDEV_NAME",
	52:  "DRIVER",
	53:  "DRIVER_ENTRY",
	54:  "DRIVER_STRING",
	55:  "DRIVER_PRINT_TYPE",
	56:  "DRIVER_S32",
	57:  "DRIVER_U32",
	58:  "DRIVER_S64",
	59:  "DRIVER_U64",
	60:  "RES_PDN",
	61:  "RES_CQN",
	62:  "RES_MRN",
	63:  "RES_CM_IDN",
	64:  "RES_CTXN",
	65:  "LINK_TYPE",
	66:  "SYS_ATTR_NETNS_MODE",
	67:  "DEV_PROTOCOL",
	68:  "NET_NS_FD",
	69:  "CHARDEV_TYPE",
	70:  "CHARDEV_NAME",
	71:  "CHARDEV_ABI",
	72:  "CHARDEV",
	73:  "UVERBS_DRIVER_ID",
	74:  "STAT_MODE",
	75:  "STAT_RES",
	76:  "STAT_AUTO_MODE_MASK",
	77:  "STAT_COUNTER",
	78:  "STAT_COUNTER_ENTRY",
	79:  "STAT_COUNTER_ID",
	80:  "STAT_HWCOUNTERS",
	81:  "STAT_HWCOUNTER_ENTRY",
	82:  "STAT_HWCOUNTER_ENTRY_NAME",
	83:  "STAT_HWCOUNTER_ENTRY_VALUE",
	84:  "DEV_DIM",
	85:  "RES_RAW",
	86:  "RES_CTX",
	87:  "RES_CTX_ENTRY",
	88:  "RES_SRQ",
	89:  "RES_SRQ_ENTRY",
	90:  "RES_SRQN",
	91:  "MIN_RANGE",
	92:  "MAX_RANGE",
	93:  "SYS_ATTR_COPY_ON_FORK",
	94:  "STAT_HWCOUNTER_INDEX",
	95:  "STAT_HWCOUNTER_DYNAMIC",
	96:  "SYS_ATTR_PRIVILEGED_QKEY_MODE",
	97:  "DRIVER_DETAILS",
	98:  "RES_SUBTYPE",
	99:  "DEV_TYPE",
	100: "PARENT_NAME",
	101: "NAME_ASSIGN_TYPE",
	102: "EVENT_TYPE",
	103: "SYS_ATTR_MONITOR_MODE",
	104: "STAT_OPCOUNTER_ENABLED",
	105: "FRMR_POOLS",
	106: "FRMR_POOL_ENTRY",
	107: "FRMR_POOL_KEY",
	108: "FRMR_POOL_KEY_ATS",
	109: "FRMR_POOL_KEY_ACCESS_FLAGS",
	110: "FRMR_POOL_KEY_VENDOR_KEY",
	111: "FRMR_POOL_KEY_NUM_DMA_BLOCKS",
	112: "FRMR_POOL_QUEUE_HANDLES",
	113: "FRMR_POOL_MAX_IN_USE",
	114: "FRMR_POOL_IN_USE",
	115: "FRMR_POOLS_AGING_PERIOD",
	116: "FRMR_POOL_PINNED_HANDLES",
	117: "FRMR_POOL_KEY_KERNEL_VENDOR_KEY",
}

// String returns the UAPI name without its RDMA_NLDEV_ATTR_ prefix
// (SYS_ATTR_* and NET_NS_FD keep theirs, as the header spells them).
func (a Attr) String() string {
	if int(a) < len(attrNames) && attrNames[a] != "" {
		return attrNames[a]
	}
	return "ATTR_" + itoa(uint64(a))
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
