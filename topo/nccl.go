package topo

import (
	"math"
	"slices"
	"strconv"

	"github.com/grdma/grdma/pci"
)

// place is where NCCL puts a device in its topology graph
// (src/graph/xml.cc ncclTopoGetXmlFromSys): the chain of PCI switch
// nodes above it and the CPU node it ends at.
type place struct {
	// switches are the switches' upstream ports, nearest first: every
	// second function above the device. Root ports and downstream ports
	// never become nodes.
	switches []pci.Address
	// cpu is NCCL's CPU node: the numa_node of the topmost node, as text
	// ("-1" when unknown: NCCL keys CPUs by that string).
	cpu string
	// hostBridge is the host bridge directory ("pci0000:00"), which NCCL
	// ignores and nvidia-smi uses to tell NODE from PHB.
	hostBridge string
	// links are the NCCL bandwidths (GB/s) of the device's link up and of
	// each switch's link up, in the order of switches.
	links []float64
}

// placeOf computes f's place.
func placeOf(f *pci.Function, funcs map[pci.Address]*pci.Function) place {
	p := place{hostBridge: f.HostBridge}
	up := f.Upstream
	top := f
	p.links = append(p.links, ncclLinkBW(f, parentOf(up, 0, funcs)))
	for k := 1; k < len(up); k += 2 {
		p.switches = append(p.switches, up[k])
		sw := funcs[up[k]]
		if sw == nil {
			sw = &pci.Function{Address: up[k], NUMANode: -1}
		}
		top = sw
		p.links = append(p.links, ncclLinkBW(sw, parentOf(up, k+1, funcs)))
	}
	p.cpu = strconv.Itoa(top.NUMANode)
	return p
}

func parentOf(up []pci.Address, i int, funcs map[pci.Address]*pci.Function) *pci.Function {
	if i < len(up) {
		return funcs[up[i]]
	}
	return nil
}

// ncclLinkBW is the bandwidth NCCL gives the link from f to the port above
// it, in GB/s: width × per-lane rate / 80 with the lower of the two ends'
// *maximum* speeds and widths (a downtrained link is invisible to NCCL),
// an unknown speed counting as Gen3 and an unknown width as 16 lanes
// (topo.cc kvDictPciGen, xml.cc ncclTopoGetXmlFromSys).
func ncclLinkBW(f, port *pci.Function) float64 {
	var speed pci.Speed
	width := 0
	for _, g := range []*pci.Function{f, port} {
		if g == nil || g.Link == nil {
			continue
		}
		if s := g.Link.MaxSpeed; s > 0 && (speed == 0 || s < speed) {
			speed = s
		}
		if w := g.Link.MaxWidth; w > 0 && (width == 0 || w < width) {
			width = w
		}
	}
	perLane := map[pci.Speed]float64{pci.Gen1: 15, pci.Gen2: 30, pci.Gen3: 60, pci.Gen4: 120, pci.Gen5: 240, pci.Gen6: 480}[speed]
	if perLane == 0 {
		perLane = 60
	}
	if width == 0 {
		width = 16
	}
	return float64(width) * perLane / 80
}

// classify returns the path type between two placed devices, the way
// NCCL's paths.cc types it, with nvidia-smi's NODE for PHB paths between
// two host bridges.
func classify(a, b place) PathType {
	for i, s := range a.switches {
		if j := slices.Index(b.switches, s); j >= 0 {
			if i == 0 && j == 0 {
				return PathPIX
			}
			return PathPXB
		}
	}
	switch {
	case a.cpu != b.cpu:
		return PathSYS
	case a.hostBridge != b.hostBridge:
		return PathNODE
	}
	return PathPHB
}

// pathBW is the bandwidth NCCL gives the path between two placed devices:
// the narrowest link on the way up from each to their common switch, or
// to the CPU (the link between two CPUs is not modelled).
func pathBW(a, b place) float64 {
	upTo := func(p place, common int) float64 {
		bw := math.Inf(1)
		n := len(p.links)
		if common >= 0 {
			n = common + 1 // links up to, not above, the common switch
		}
		for _, l := range p.links[:min(n, len(p.links))] {
			bw = min(bw, l)
		}
		return bw
	}
	for i, s := range a.switches {
		if j := slices.Index(b.switches, s); j >= 0 {
			return min(upTo(a, i), upTo(b, j))
		}
	}
	return min(upTo(a, -1), upTo(b, -1))
}

// mirrorBits reverses the low bits of val within pow2 (a power of two), as
// NCCL spreads GPUs over NICs (paths.cc mirrorBits).
func mirrorBits(val, pow2 int) int {
	mirror := 0
	for b, mb := 1, pow2>>1; b < pow2; b, mb = b<<1, mb>>1 {
		if val&b != 0 {
			mirror |= mb
		}
	}
	return mirror
}

func isPow2(v int) bool { return v > 0 && v&(v-1) == 0 }
