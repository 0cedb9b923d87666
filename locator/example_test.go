package locator_test

import (
	"fmt"
	"log"

	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
)

// Open the uverbs device of rxe0: the node RDMA netlink names (nothing
// read in sysfs), else the one sysfs names. (No output check: it needs an
// RDMA device.)
func ExampleOpen() {
	nl, err := nldev.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nl.Close()
	d, err := nl.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	c, err := locator.Open(fsys, nl, d.Index, d.Name)
	if err != nil {
		log.Fatal(err) // e.g. open /dev/infiniband/uverbs0: permission denied
	}
	defer c.Close()
	fmt.Println(c.Node.Name, c.Node.Driver)
}

// The uverbs node of a device as a captured sysfs names it.
func ExampleFromSysfs() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		log.Fatal(err)
	}
	node, err := locator.FromSysfs(fsys, "rxe1")
	fmt.Printf("%+v %v\n", node, err)
	// Output: {Name:uverbs1 Major:231 Minor:193 Driver:rxe DriverID:0} <nil>
}
