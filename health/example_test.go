package health_test

import (
	"fmt"

	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
)

// ReadNode reads the devices, ports and GID tables once; the checks (and
// the exporter's metrics) derive from that one reading. Netlink answers
// here from recordings of a Debian 6.12 guest with rxe0 and rxe1, sysfs
// from a capture of the same guest (which has no /dev: the uverbs devices
// are not accessible, so the devices check fails).
func ExampleReadNode() {
	nl := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/nl").Standard().Conn())
	defer nl.Close()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	node := health.ReadNode(health.Source{Sysfs: fsys, Netlink: nl})
	for _, p := range node.Ports {
		fmt.Printf("%s/%d %s, %d GIDs\n", p.Port.Device, p.Port.Port, p.Port.State, len(p.GIDs))
	}
	for _, r := range node.Check([]string{"ports", "devices"}, health.Expect{}) {
		fmt.Println(r.Status, r.Name, r.Subject)
	}
	// Output:
	// rxe0/1 ACTIVE, 3 GIDs
	// rxe1/1 ACTIVE, 2 GIDs
	// PASS ports rxe0/1
	// PASS ports rxe1/1
	// FAIL devices rxe0
	// FAIL devices rxe1
}
