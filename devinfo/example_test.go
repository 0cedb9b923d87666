package devinfo_test

import (
	"fmt"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
)

// A Reader lists the devices through RDMA netlink and opens each one's
// uverbs device. Here netlink is a recording (rxe0 on veth0, rxe1 on veth2)
// and the root a captured sysfs tree without /dev/infiniband, so the
// uverbs devices cannot be opened: each device is read from sysfs and its
// Note says why. On a live machine the root is "/" and Netlink a
// *nldev.Client from nldev.Dial.
func ExampleReader() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	nl := nldev.NewClient(recordedKernel("testdata/6.12/nl").Conn())
	defer nl.Close()
	r := &devinfo.Reader{Sysfs: fsys, Netlink: nl}
	devs, err := r.Read("")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range devs {
		fmt.Printf("%s driver %s uverbs %s (source %s: %s)\n", d.Name, d.Driver, d.Uverbs, d.Source, d.Note)
		for _, p := range d.Ports {
			fmt.Printf("  port %d %s netdev %s, %d GIDs\n", p.Port, devinfo.PortStateName(p.Attr.State),
				p.Netdev, len(p.GIDs))
		}
	}
	// Output:
	// rxe0 driver rxe uverbs /dev/infiniband/uverbs0 (source sysfs: open /dev/infiniband/uverbs0: no such file or directory)
	//   port 1 PORT_ACTIVE netdev veth0, 3 GIDs
	// rxe1 driver rxe uverbs /dev/infiniband/uverbs1 (source sysfs: open /dev/infiniband/uverbs1: no such file or directory)
	//   port 1 PORT_ACTIVE netdev veth2, 2 GIDs
}
