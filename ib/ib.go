// Package ib is the one home of the InfiniBand architecture's shared
// vocabulary, as the kernel reports it through every interface grdma reads
// — RDMA netlink, sysfs and the uverbs ABI: the node type, the logical and
// physical port states, the link layer, width and speed of a port, the
// path MTU, queue pair types and states, each with the names rdma and
// ibv_devinfo print; a port named by device and number (PortRef, the
// DEV[/PORT] of a command line) and the error of a device or port that is
// not there (NotFoundError). It imports only the standard library, so
// nldev, sysfs and uverbs share one definition without depending on each
// other.
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
