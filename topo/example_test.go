package topo_test

import (
	"fmt"

	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/topo"
)

// Read relates the GPUs and RDMA devices of a node: here a QEMU guest's
// PCIe layout (../pci/testdata/README.md) whose virtio-vga display stands
// in for a GPU, with rxe devices on its six NICs.
func ExampleRead() {
	fsys, err := sysfs.NewFS("../pci/testdata/switch-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	gpu, _ := pci.ParseAddress("0000:05:00.0")
	t, err := topo.Read(fsys, topo.Options{GPUs: []pci.Address{gpu}, NodeGDR: new(true)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ni, n := range t.NICs {
		fmt.Println(n.Device, n.Function.Address, t.Matrix[0][1+ni])
	}
	c := t.Choices[0]
	fmt.Println(c.GPU, "NIC NCCL would use:", c.NIC, c.Path, "GDR:", *c.GDR.Used, "virtual:", t.Virtual.Likely)
	// Output:
	// rxe0 0000:03:00.0 PIX
	// rxe1 0000:04:00.0 PIX
	// rxe2 0000:09:00.0 PHB
	// rxe3 0000:81:00.0 SYS
	// rxe4 0000:41:00.0 NODE
	// rxe5 0000:08:00.0 PXB
	// GPU0 NIC NCCL would use: NIC0 PIX GDR: true virtual: true
}
