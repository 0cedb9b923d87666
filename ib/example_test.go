package ib_test

import (
	"fmt"

	"github.com/grdma/grdma/ib"
)

// The names are those iproute2's rdma prints; a value the kernel may add
// later prints as UNKNOWN rather than a number.
func Example() {
	fmt.Println(ib.PortActive, ib.PhysLinkUp, ib.PhysTraining, ib.NodeRNIC)
	fmt.Println(ib.PortState(9), ib.PhysState(8), ib.NodeType(0))
	// Output:
	// ACTIVE LINK_UP ARMED rnic
	// UNKNOWN UNKNOWN unknown
}
