package pci_test

import (
	"fmt"

	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
)

// ReadFunction reads one function with the bridges above it, from a tree
// captured in a QEMU guest (the switch layout of testdata/README.md): an
// e1000e NIC under a switch's downstream port.
func ExampleReadFunction() {
	fsys, err := sysfs.NewFS("testdata/switch-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	addr, _ := pci.ParseAddress("0000:03:00.0")
	f, err := pci.ReadFunction(fsys, addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Address, f.Class, f.Vendor, f.Device, f.Driver, f.Netdevs)
	fmt.Println("under", f.Upstream, "of", f.HostBridge, "NUMA node", f.NUMANode)
	fmt.Printf("link %s x%d, max %s x%d\n", f.Link.Speed, f.Link.Width, f.Link.MaxSpeed, f.Link.MaxWidth)
	if f.Config != nil { // read as root
		fmt.Println(f.Config.Express.PortType, "MPS", f.Config.Express.MaxPayload, "MRRS", f.Config.Express.MaxReadRequest)
	}
	// Output:
	// 0000:03:00.0 0x020000 0x8086 0x10d3 e1000e [eth0]
	// under [0000:02:00.0 0000:01:00.0 0000:00:02.0] of pci0000:00 NUMA node -1
	// link 2.5 GT/s x1, max 2.5 GT/s x1
	// endpoint MPS 128 MRRS 128
}

// RDMADevice places an RDMA device at its PCI function; a software device
// (rxe) at the function of the netdev it runs on.
func ExampleRDMADevice() {
	fsys, _ := sysfs.NewFS("testdata/switch-6.12")
	a, err := pci.RDMADevice(fsys, "rxe0")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.Netdev, a.Bus, a.Function, a.Driver)
	// Output: eth0 pci 0000:03:00.0 e1000e
}
