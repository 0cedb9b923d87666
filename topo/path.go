package topo

import (
	"fmt"
	"strings"
)

// PathType is how two devices are connected over PCIe, in the words of
// `nvidia-smi topo -m`, best first. NCCL has the same classes but for
// NODE, which it counts as PHB (NCCL).
type PathType uint8

// Path types. The zero value is PathUnknown: a device with no PCI function
// (rxe on a veth).
const (
	PathUnknown PathType = iota
	// PathSelf (X): the device itself.
	PathSelf
	// PathPIX: at most one PCIe bridge between them, i.e. under the same
	// PCIe switch (or one on the other's port).
	PathPIX
	// PathPXB: several PCIe bridges (nested switches), no host bridge.
	PathPXB
	// PathPHB: through a PCIe host bridge (the CPU): different root
	// ports of one host bridge.
	PathPHB
	// PathNODE: between host bridges of one NUMA node.
	PathNODE
	// PathSYS: across the interconnect between NUMA nodes (QPI/UPI,
	// Infinity Fabric), or between a known and an unknown NUMA node.
	PathSYS
)

var pathNames = [...]string{"N/A", "X", "PIX", "PXB", "PHB", "NODE", "SYS"}

// String returns nvidia-smi's name ("N/A" for PathUnknown).
func (p PathType) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return fmt.Sprintf("PathType(%d)", uint8(p))
}

// MarshalText writes String: JSON carries the names, never NCCL's
// numbers, which NCCL renumbered in 2.26 and 2.27.
func (p PathType) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// NCCL returns the class NCCL gives the same path: NODE is PHB to NCCL
// (it keys CPUs by NUMA node, not by host bridge); X is NCCL's LOC.
func (p PathType) NCCL() PathType {
	if p == PathNODE {
		return PathPHB
	}
	return p
}

// NCCLName is the name NCCL prints for the class NCCL gives p: LOC for X.
func (p PathType) NCCLName() string {
	switch p.NCCL() {
	case PathSelf:
		return "LOC"
	}
	return p.NCCL().String()
}

// ParseGDRLevel parses NCCL_NET_GDR_LEVEL as NCCL 2.27 to 2.30 do: a path
// name (LOC, PIX, PXB, PHB, SYS; the NVLink and C2C classes NVL, NVB, C2C,
// P2C and PXN are PCIe-only PXB here, the closest class a PCIe pair can
// have that they allow) or a legacy number 0-4 (LOC, PIX, PXB, PHB, SYS).
// LOC means never.
func ParseGDRLevel(s string) (PathType, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "LOC", "0":
		return PathSelf, nil
	case "PIX", "1":
		return PathPIX, nil
	case "NVL", "NVB", "C2C", "PXB", "P2C", "PXN", "2":
		return PathPXB, nil
	case "PHB", "3":
		return PathPHB, nil
	case "SYS", "4":
		return PathSYS, nil
	}
	return PathUnknown, fmt.Errorf("NCCL_NET_GDR_LEVEL %q: want LOC, PIX, PXB, PHB or SYS (or 0-4)", s)
}

// DefaultGDRLevel is NCCL's default NCCL_NET_GDR_LEVEL for PCIe GPUs: PXB
// (NCCL 2.12 through 2.30; P2C, which adds nothing on PCIe, for GPUs on
// a C2C link since 2.27).
const DefaultGDRLevel = PathPXB

// NCCLVersions names the NCCL releases whose path types and GDR rule the
// package follows: the classes PIX, PXB, PHB and SYS (numbered 4, 5, 8
// and 9 there), ncclTopoCheckGdr's "class at most NCCL_NET_GDR_LEVEL",
// and ncclTopoGetLocalNet's choice of a GPU's NIC.
const NCCLVersions = "2.27-2.30"
