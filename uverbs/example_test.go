package uverbs_test

import (
	"fmt"
	"log"

	"github.com/grdma/grdma/uverbs"
)

// The active and max MTU of rxe0's port 1, as `ibv_devinfo -d rxe0` shows
// them, from its uverbs node (package locator finds the node through RDMA
// netlink or sysfs). (No output check: it needs an RDMA device.)
func ExampleOpen() {
	node := uverbs.Node{Name: "uverbs0", Major: 231, Minor: 192, Driver: "rxe"}
	c, err := uverbs.Open("/", "rxe0", node)
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
