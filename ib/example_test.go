package ib_test

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/grdma/grdma/ib"
)

// The names are those iproute2's rdma prints; a value the kernel may add
// later prints as UNKNOWN rather than a number.
func Example() {
	fmt.Println(ib.PortActive, ib.PhysLinkUp, ib.PhysTraining, ib.NodeRNIC)
	fmt.Println(ib.PortState(9), ib.PhysState(8), ib.NodeType(0))
	fmt.Println(ib.QPTypeRC, ib.QPStateRTS, ib.QPType(7), ib.QPTypeDriver)
	// Output:
	// ACTIVE LINK_UP ARMED rnic
	// UNKNOWN UNKNOWN unknown
	// RC RTS UNKNOWN DRIVER
}

// A port's link layer, width, speed and MTU, however they were read:
// QUERY_PORT's codes or sysfs's words.
func ExampleLinkLayer() {
	ll := ib.ParseLinkLayer("Ethernet") // sysfs ports/1/link_layer
	speed, _ := ib.ParseSpeed("EDR")    // from sysfs ports/1/rate "100 Gb/sec (4X EDR)"
	width := ib.WidthFromLanes(4)
	mtu := ib.LargestMTU(1500 - 80) // what rxe makes of a 1500-byte netdev
	fmt.Println(ll, ll.IsEthernet(), width, speed, float64(width.Lanes()*speed.LaneDeciGbps())/10, mtu)
	fmt.Println(ib.LinkLayerUnspecified) // as libibverbs and sysfs name it
	// Output:
	// Ethernet true 4X EDR 100 1024
	// InfiniBand
}

// A device or port that is not there is one error, an fs.ErrNotExist, that
// names what there is when the reader knows.
func ExampleNotFoundError() {
	err := error(&ib.NotFoundError{Device: "rxe9", Existing: []string{"rxe0", "rxe1"}})
	fmt.Println(err, errors.Is(err, fs.ErrNotExist))
	fmt.Println(&ib.NotFoundError{Device: "rxe0", Port: 2, NumPorts: 1})
	fmt.Println(ib.PortRef{Device: "rxe0", Port: 1}, ib.PortRef{Device: "rxe0"})
	// Output:
	// RDMA device rxe9 not found (devices: rxe0, rxe1) true
	// RDMA device rxe0 has no port 2 (it has 1)
	// rxe0/1 rxe0
}
