package sysfs_test

import (
	"errors"
	"fmt"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
)

// NewFS reads a machine's sysfs from a root: "/" on a live machine, the
// host's /sys mounted elsewhere in a container (as /host/sys: root /host),
// or a captured tree, as here: the Soft-RoCE devices rxe0 and rxe1 of the
// e2e guest (Debian 6.12).
func ExampleNewFS() {
	fsys, err := sysfs.NewFS("testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	devs, err := fsys.Devices()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range devs {
		fmt.Printf("%s node_type %s driver %s parent %s node_guid %016x\n", d.Name, d.NodeType, d.Driver, d.Netdev, d.NodeGUID)
		ports, err := fsys.Ports(d.Name)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, p := range ports {
			fmt.Printf("  port %d %s %s %s rate %s\n", p.Port, p.State, p.PhysState, p.LinkLayer, p.Rate)
		}
	}
	// Output:
	// rxe0 node_type ca driver rxe parent veth0 node_guid 4c9ce2fffed0bcea
	//   port 1 ACTIVE LINK_UP Ethernet rate 10 Gb/sec (1X FDR10)
	// rxe1 node_type ca driver rxe parent veth1 node_guid 9cdb96fffea69cd5
	//   port 1 ACTIVE LINK_UP Ethernet rate 10 Gb/sec (1X FDR10)
}

// VerbsDeviceFor finds the uverbs character device of an RDMA device,
// /dev/infiniband/uverbsN, which verbs programs open.
func ExampleFS_VerbsDeviceFor() {
	fsys, _ := sysfs.NewFS("testdata/rxe-6.12")
	v, err := fsys.VerbsDeviceFor("rxe1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("/dev/infiniband/%s (%d:%d) ABI %d\n", v.Name, v.Major, v.Minor, v.ABIVersion)
	// Output: /dev/infiniband/uverbs1 (231:193) ABI 2
}

// ListPorts resolves DEV[/PORT] ("" and 0 for all) to the ports to read;
// a device or port that does not exist is an *ib.NotFoundError.
func ExampleFS_ListPorts() {
	fsys, _ := sysfs.NewFS("testdata/rxe-6.12")
	refs, err := fsys.ListPorts("", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range refs {
		fmt.Printf("%s/%d\n", r.Device, r.Port)
	}
	for _, dev := range []string{"rxe0", "mlx5_0"} {
		_, err = fsys.ListPorts(dev, 2)
		var nf *ib.NotFoundError
		fmt.Println(errors.As(err, &nf), err)
	}
	// Output:
	// rxe0/1
	// rxe1/1
	// true RDMA device rxe0 has no port 2
	// true RDMA device mlx5_0 not found
}
