package health_test

import (
	"errors"
	"fmt"

	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/ports"
)

// The devices and ports checks of a node are functions of its snapshot:
// node.Reader reads one (grdma check and the exporter do), or a program
// fills one in its own way, as here: two ports, one of them down, and a
// uverbs device the caller may not open.
func Example() {
	s := &node.Snapshot{
		Devices: []node.Device{
			{Name: "mlx5_0", Verbs: "/dev/infiniband/uverbs0"},
			{Name: "mlx5_1", Verbs: "/dev/infiniband/uverbs1", VerbsErr: errors.New("permission denied")},
		},
		Ports: []node.Port{
			{Port: ports.Port{Device: "mlx5_0", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp, RateDeciGbps: 4000, ActiveMTU: ib.MTU4096}},
			{Port: ports.Port{Device: "mlx5_1", Port: 1, State: ib.PortDown, PhysState: ib.PhysDisabled}},
		},
	}
	exp := health.Expect{MinRateGbps: 400, ActiveMTU: 4096}
	results := append(health.CheckDevices(s, exp), health.CheckPorts(s, exp)...)
	for _, r := range results {
		fmt.Println(r.Status, r.Name, r.Subject, r.Message)
	}
	fmt.Println("ok:", health.NewSummary(results).OK)
	// Output:
	// PASS devices mlx5_0 /dev/infiniband/uverbs0 present and accessible
	// FAIL devices mlx5_1 /dev/infiniband/uverbs1 not accessible: permission denied
	// PASS ports mlx5_0/1 ACTIVE LINK_UP, 400 Gb/s, MTU 4096
	// FAIL ports mlx5_1/1 state DOWN, expected ACTIVE; physical state DISABLED, expected LINK_UP; rate 0 Gb/s, expected at least 400; active MTU 0, expected 4096
	// ok: false
}
