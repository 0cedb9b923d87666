// Package topo relates a node's GPUs and RDMA NICs over PCIe the way NCCL
// judges them, from sysfs alone (no CUDA, NVML or cgo): the path type
// between every two devices as `nvidia-smi topo -m` names it — X, PIX (at
// most one bridge: one switch), PXB (several bridges, no host bridge), PHB
// (through a host bridge), NODE (between host bridges of one NUMA node)
// and SYS (across NUMA nodes) — the health of every link from a device up
// to its root port, the NIC NCCL would give each GPU and whether NCCL
// would use GPUDirect RDMA with it.
//
// # NCCL's rules (2.27 to 2.30)
//
// Placement (src/graph/xml.cc): from a device's real sysfs path every
// second function upward is a PCI switch node (a switch's upstream port;
// root and downstream ports never become nodes); the walk ends at a CPU
// node keyed by the numa_node text of the topmost node ("-1" included).
// Classes (paths.cc): devices below one switch node are PIX; with a
// common switch further up, PXB; otherwise PHB on the same CPU node and
// SYS across (NCCL has no NODE: nvidia-smi's NODE, two host bridges of one
// NUMA node, is NCCL's PHB; NCCL's own names are used where NCCL's view
// is meant). Link bandwidth is width × per-lane rate / 80 GB/s from the
// lower of the two ends' maximum speed and width (NCCL does not see a
// link that trained down). A GPU's NIC (ncclTopoGetLocalNet): the NICs of
// the highest path bandwidth, of those the closest, spread over the GPUs
// that share them by the GPU's index (mirrored bits when their number is
// a power of two); the GPU index is taken in PCI order. GPUDirect RDMA
// (ncclTopoCheckGdr): the class at most NCCL_NET_GDR_LEVEL (default PXB)
// and the node able to register GPU memory (Options.NodeGDR). NVLink, C2C
// and PXN paths need NVML and are not modelled; the link between two CPUs
// is left out of path bandwidths.
//
// An RDMA device is placed at its PCI function (pci.RDMADevice), a
// software device (rxe, siw) at its netdev's: how a test puts a NIC into
// an emulated topology. NCCL itself finds no PCI path for a software
// device and attaches it to a CPU; NIC.Soft says which devices are such.
//
// # Links
//
// Each Hop is one physical link: the device or a switch's upstream port
// with the port above it. Its current speed and width are compared with
// the lower of the two ends' capabilities, so a Gen4 NIC in a Gen5 slot is
// fine and a Gen5 x16 link running Gen3 x8 is degraded. Idle GPUs lower
// their speed, not their width (a rule for the caller: package health).
//
// # Virtual machines
//
// A guest's PCI topology is the hypervisor's: GPUs and NICs on a root bus
// without ports, or behind emulated ones, NUMA nodes unknown. Virtual says
// when the node looks like one (the hypervisor CPU flag, a hypervisor's
// DMI vendor, Hyper-V's VMBus; devices on a root bus and missing NUMA
// nodes are reported as signs) and what to do: NCCL classifies what it is
// shown and turns GPUDirect RDMA off for pairs the host has on one switch.
package topo
