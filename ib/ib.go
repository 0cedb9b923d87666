// Package ib holds the enums of the InfiniBand architecture that the kernel
// reports through every interface grdma reads — RDMA netlink, sysfs and the
// uverbs ABI: the node type and the logical and physical port states, with the
// names iproute2's rdma prints. It imports nothing, so nldev, sysfs and uverbs
// share one definition without depending on each other.
package ib

// NodeType is the RDMA node type (enum rdma_node_type).
type NodeType uint8

// Node types as the kernel reports them.
const (
	NodeCA          NodeType = 1
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

var nodeTypeNames = [...]string{"unknown", "ca", "switch", "router", "rnic", "usnic", "usnic_udp", "unspecified"}

// String returns the name rdma prints ("ca", "rnic", ...; "unknown" otherwise).
func (t NodeType) String() string {
	if int(t) < len(nodeTypeNames) {
		return nodeTypeNames[t]
	}
	return "unknown"
}

// PortState is the logical port state (enum ib_port_state).
type PortState uint8

// Logical port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String returns the name rdma prints ("ACTIVE", ...; "UNKNOWN" otherwise).
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "UNKNOWN"
}

// PhysState is the physical port state (enum ib_port_phys_state).
type PhysState uint8

// Physical port states.
const (
	PhysSleep    PhysState = 1
	PhysPolling  PhysState = 2
	PhysDisabled PhysState = 3
	// PhysTraining is PortConfigurationTraining; rdma prints it "ARMED".
	PhysTraining    PhysState = 4
	PhysLinkUp      PhysState = 5
	PhysLinkErrRec  PhysState = 6
	PhysPHYTest     PhysState = 7
	PhysOPAOffline  PhysState = 9
	PhysOPAPortTest PhysState = 11
)

var physStateNames = [...]string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE", "UNKNOWN", "OPA_TEST"}

// String returns the name rdma prints ("LINK_UP", ...; "UNKNOWN" otherwise).
func (s PhysState) String() string {
	if int(s) < len(physStateNames) {
		return physStateNames[s]
	}
	return "UNKNOWN"
}
