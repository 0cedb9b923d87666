// Package pci reads PCI functions from sysfs, from any root: what a
// function is (class, vendor and device IDs, driver), where it sits (its
// NUMA node, its IOMMU group, the chain of bridges from it to its host
// bridge, the real path under /sys/devices/pci...), how its link trained
// (current and maximum speed and width) and, where the reader may read
// config space (root), its PCI Express capability (port type, Relaxed
// Ordering, Max Payload and Max Read Request sizes), ACS and ATS. It also
// maps RDMA devices and netdevs to the PCI function they use, in one
// place: a hardware RDMA device through its device link, a software one
// (rxe, siw: /sys/devices/virtual/infiniband/rxeN) through the netdev it
// runs on.
//
// Everything is read through an fs.ReadLinkFS rooted where "sys/" is (a
// sysfs.FS, or fstest.MapFS in tests), resolving the kernel's symbolic
// links itself, so a captured tree reads like the live one. What cannot be
// read is unknown — a zero value or a nil pointer — never an error: only
// a function or device that does not exist is (fs.ErrNotExist).
//
// Formats follow drivers/pci/pci-sysfs.c and include/uapi/linux/pci_regs.h:
// link speeds as "16.0 GT/s PCIe" (kernels up to 5.6: "16 GT/s"),
// "Unknown" for a link that is down or a capability of zero; config space
// is 64 bytes for readers without CAP_SYS_ADMIN (the header only: no
// capabilities), 256 without extended config space, else 4096.
package pci
