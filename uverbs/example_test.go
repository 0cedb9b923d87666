package uverbs_test

import (
	"fmt"
	"log"

	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// The active and max MTU of rxe0's port 1, as `ibv_devinfo -d rxe0` shows
// them. (No output check: it needs an RDMA device.)
func ExampleOpen() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	c, err := uverbs.Open(fsys, "rxe0")
	if err != nil {
		log.Fatal(err) // e.g. open /dev/infiniband/uverbs0: permission denied
	}
	defer c.Close()
	attr, err := c.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("active_mtu", attr.ActiveMTU, "max_mtu", attr.MaxMTU, attr.LinkLayer)
}
