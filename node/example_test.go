package node_test

import (
	"fmt"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/sysfs"
)

// Read reads the devices, ports and GID tables once; the health checks
// and the exporter's metrics derive from that one reading. Netlink
// answers here from recordings of a Debian 6.12 guest with rxe0 and rxe1,
// sysfs from a capture of the same guest (which has no /dev: the uverbs
// devices are not accessible).
func ExampleReader_Read() {
	nl := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/nl").Standard().Conn())
	defer nl.Close()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := node.Reader{Sysfs: fsys, Netlink: nl}.Read()
	for _, d := range s.Devices {
		fmt.Printf("%s driver %s, uverbs %s\n", d.Name, d.Driver, d.Verbs)
	}
	for _, p := range s.Ports {
		fmt.Printf("%s/%d %s, %d GIDs\n", p.Port.Device, p.Port.Port, p.Port.State, len(p.GIDs))
	}
	// Output:
	// rxe0 driver rxe, uverbs /dev/infiniband/uverbs0
	// rxe1 driver rxe, uverbs /dev/infiniband/uverbs1
	// rxe0/1 ACTIVE, 3 GIDs
	// rxe1/1 ACTIVE, 2 GIDs
}
