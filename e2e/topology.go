package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Topology is a PCIe layout for a guest: QEMU's q35 machine with root
// ports, switches and endpoints, for the PCI topology fixtures
// (pci/testdata) and the topology scenarios (e2e/guest TestTopo*). e1000e
// and virtio-net endpoints are the NICs an rxe device goes on (the image
// has both drivers); virtio-vga and VGA are display functions (class
// 0x0300) that stand in for GPUs (`grdma topo gpu BDF`).
type Topology struct {
	// QEMUArgs go to BootOptions.QEMUArgs, KernelArgs to
	// BootOptions.KernelArgs.
	QEMUArgs   []string
	KernelArgs string
	// Doc says what the layout holds, bus by bus.
	Doc string
}

// numa2 gives the guest two CPUs and two NUMA nodes of 512 MiB (the
// default 1024 split).
var numa2 = []string{"-smp", "2",
	"-object", "memory-backend-ram,id=m0,size=512M", "-object", "memory-backend-ram,id=m1,size=512M",
	"-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1"}

func devices(specs ...string) []string {
	var args []string
	for _, s := range specs {
		args = append(args, "-device", s)
	}
	return args
}

// switchTree is the layout of the "switch" topology; "switch-iommu" adds
// an IOMMU to it.
var switchTree = slices.Concat([]string{"-machine", "q35"}, numa2, devices(
	"pcie-root-port,id=rp1,bus=pcie.0,chassis=1,addr=2.0",
	"x3130-upstream,id=up1,bus=rp1",
	"xio3130-downstream,id=dn1,bus=up1,chassis=2,slot=0",
	"xio3130-downstream,id=dn2,bus=up1,chassis=3,slot=0",
	"xio3130-downstream,id=dn3,bus=up1,chassis=4,slot=0",
	"xio3130-downstream,id=dn4,bus=up1,chassis=5,slot=0",
	"e1000e,id=nic3,bus=dn1,mac=52:54:00:00:03:00", // id: QEMU's pcie_aer_inject_error names it
	"e1000e,bus=dn2,mac=52:54:00:00:04:00",
	"virtio-vga,bus=dn3",
	"x3130-upstream,id=up2,bus=dn4",
	"xio3130-downstream,id=dn5,bus=up2,chassis=6,slot=0",
	"virtio-net-pci,bus=dn5,ats=on,mac=52:54:00:00:08:00",
	"pcie-root-port,id=rp2,bus=pcie.0,chassis=7,addr=3.0,x-speed=2_5,x-width=1",
	"e1000e,bus=rp2,mac=52:54:00:00:09:00",
	"pcie-root-port,id=rp3,bus=pcie.0,chassis=8,addr=4.0",
	"VGA,bus=rp3",
	"pxb-pcie,id=pxb1,bus_nr=0x40,bus=pcie.0",
	"pcie-root-port,id=rp4,bus=pxb1,chassis=9,slot=0",
	"e1000e,bus=rp4,mac=52:54:00:00:41:00",
	"pxb-pcie,id=pxb2,bus_nr=0x80,numa_node=1,bus=pcie.0",
	"pcie-root-port,id=rp5,bus=pxb2,chassis=10,slot=0",
	"e1000e,bus=rp5,mac=52:54:00:00:81:00",
))

const switchDoc = `host bridge pci0000:00 (no NUMA node):
  root port 00:02.0 - switch 01:00.0 - 02:00.0 NIC e1000e 03:00.0
                                     - 02:01.0 NIC e1000e 04:00.0
                                     - 02:02.0 display virtio-vga 05:00.0 (GPU stand-in)
                                     - 02:03.0 switch 06:00.0 - 07:00.0 NIC virtio-net 08:00.0 (ATS)
  root port 00:03.0 (link capability 2.5 GT/s x1) - NIC e1000e 09:00.0
  root port 00:04.0 - display VGA 0a:00.0 (conventional PCI: no link files)
host bridge pci0000:40 (pxb-pcie, no NUMA node): root port 40:00.0 - NIC e1000e 41:00.0
host bridge pci0000:80 (pxb-pcie, NUMA node 1): root port 80:00.0 - NIC e1000e 81:00.0
two CPUs, two NUMA nodes`

// Topologies are the named layouts (guestrun -topology NAME).
var Topologies = map[string]Topology{
	"switch": {QEMUArgs: switchTree, Doc: switchDoc},
	"switch-iommu": {
		QEMUArgs:   slices.Concat(switchTree, devices("intel-iommu,intremap=off")),
		KernelArgs: "intel_iommu=on",
		Doc:        "the switch layout with QEMU's Intel IOMMU on (intel_iommu=on): the kernel turns ACS on in the root ports (QEMU 7.2's switch downstream ports have no ACS) and every group translates DMA",
	},
	"gpu-only": {
		QEMUArgs: slices.Concat([]string{"-machine", "q35"}, devices("virtio-vga,bus=pcie.0,addr=6.0")),
		Doc:      "a display function (virtio-vga, GPU stand-in) on the root bus at 00:06.0 and no NIC: the shape of a GPU-only cloud VM",
	},
	"nic-only": {
		QEMUArgs: slices.Concat([]string{"-machine", "q35"}, devices(
			"pcie-root-port,id=rp1,bus=pcie.0,chassis=1,addr=2.0",
			"e1000e,bus=rp1,mac=52:54:00:00:01:00")),
		Doc: "one NIC (e1000e 01:00.0) on root port 00:02.0 and no display function",
	},
}

// TopologyScenarios is the -test.run pattern of the scenarios in e2e/guest
// that need the "switch" layout (TestTopo*); the single guest skips them.
const TopologyScenarios = "^TestTopo"

// TopologyScenarioLayout is the layout TestTopology boots for them.
const TopologyScenarioLayout = "switch"

// TopologyNamed returns the layout called name, or an error listing the
// names.
func TopologyNamed(name string) (Topology, error) {
	t, ok := Topologies[name]
	if !ok {
		names := make([]string, 0, len(Topologies))
		for n := range Topologies {
			names = append(names, n)
		}
		sort.Strings(names)
		return Topology{}, fmt.Errorf("unknown topology %q (have %s)", name, strings.Join(names, ", "))
	}
	return t, nil
}
