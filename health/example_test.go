package health_test

import (
	"fmt"

	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/sysfs"
)

// The devices and ports checks of a node read once (node.Reader). Netlink
// answers here from recordings of a Debian 6.12 guest with rxe0 and rxe1,
// sysfs from a capture of the same guest (which has no /dev: the uverbs
// devices are not accessible, so the devices check fails).
func Example() {
	nl := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/nl").Standard().Conn())
	defer nl.Close()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := node.Reader{Sysfs: fsys, Netlink: nl}.Read()
	results := append(health.CheckPorts(s, health.Expect{}), health.CheckDevices(s, health.Expect{})...)
	for _, r := range results {
		fmt.Println(r.Status, r.Name, r.Subject)
	}
	fmt.Println("ok:", health.NewSummary(results).OK)
	// Output:
	// PASS ports rxe0/1
	// PASS ports rxe1/1
	// FAIL devices rxe0
	// FAIL devices rxe1
	// ok: false
}
