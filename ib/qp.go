package ib

// QPType is a queue pair type (enum ib_qp_type).
type QPType uint8

// Queue pair types.
const (
	QPTypeSMI          QPType = 0
	QPTypeGSI          QPType = 1
	QPTypeRC           QPType = 2 // reliable connected
	QPTypeUC           QPType = 3 // unreliable connected
	QPTypeUD           QPType = 4 // unreliable datagram
	QPTypeRawIPv6      QPType = 5
	QPTypeRawEthertype QPType = 6
	QPTypeRawPacket    QPType = 8
	QPTypeXRCIni       QPType = 9
	QPTypeXRCTgt       QPType = 10
	// QPTypeDriver is a driver's own type (IB_QPT_DRIVER); RDMA netlink
	// names the driver's subtype beside it.
	QPTypeDriver QPType = 0xff
)

// QPTypeNames are the names rdma prints for types 0 to 10, in value order
// (7 is unused: "UNKNOWN"); QPTypeDriver is "DRIVER".
var QPTypeNames = []string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN",
	"RAW_PACKET", "XRC_INI", "XRC_TGT"}

// String returns the name rdma prints ("RC", "UD", ...; "UNKNOWN").
func (t QPType) String() string {
	if t == QPTypeDriver {
		return "DRIVER"
	}
	return enumName(QPTypeNames, int(t))
}

// QPState is a queue pair state (enum ib_qp_state).
type QPState uint8

// Queue pair states, in the order a connection goes through them.
const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR // ready to receive
	QPStateRTS // ready to send
	QPStateSQD
	QPStateSQE
	QPStateErr
)

// QPStateNames are the names of queue pair states in value order.
var QPStateNames = []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the name rdma and ibv_devinfo print ("RTS", ...;
// "UNKNOWN").
func (s QPState) String() string { return enumName(QPStateNames, int(s)) }

func enumName(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return "UNKNOWN"
}
