package exporter

import (
	"strconv"

	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/topo"
)

// readPCIe reads the PCIe side of the node into s (Options.PCIe), as part
// of the reading scrapes share: every link on the way from a GPU or RDMA
// device to its root port, the path type of every GPU–NIC pair, the NIC
// NCCL would give each GPU, and the AER counters of the functions
// involved. A topology that cannot be read is a read error of kind "pcie".
func (c *Collector) readPCIe(s *scrape) {
	t, err := topo.Read(c.opts.Sysfs, topo.Options{GPUs: c.opts.PCIeGPUs})
	if err != nil {
		s.errs = append(s.errs, node.ReadError{What: "pcie", Err: err})
		return
	}
	s.topo = t
}

// exportTopology sends the PCIe families of t.
func exportTopology(e *emitter, t *topo.Topology) {
	hopsOf := func(hops []topo.Hop) {
		for _, h := range hops {
			if h.State == topo.LinkUnknown {
				continue
			}
			fn, port := h.Function.String(), ""
			if h.Port != nil {
				port = h.Port.String()
			}
			e.emit(famPCIeDegraded, boolValue(h.State == topo.LinkDegraded || h.State == topo.LinkDown), fn, port)
			e.emit(famPCIeSpeed, float64(h.Speed)*1e8, fn, port)
			e.emit(famPCIeWidth, float64(h.Width), fn, port)
			if h.CapableSpeed > 0 {
				e.emit(famPCIeCapSpeed, float64(h.CapableSpeed)*1e8, fn, port)
			}
			if h.CapableWidth > 0 {
				e.emit(famPCIeCapWidth, float64(h.CapableWidth), fn, port)
			}
		}
	}
	devices := map[pci.Address]bool{}
	for _, g := range t.GPUs {
		hopsOf(g.Hops)
		devices[g.Function.Address] = true
	}
	nicDevice := map[string]string{}
	for _, n := range t.NICs {
		nicDevice[n.Name] = n.Device
		if n.Function != nil {
			hopsOf(n.Hops)
			devices[n.Function.Address] = true
		}
	}
	gpuAddr := map[string]string{}
	for _, g := range t.GPUs {
		gpuAddr[g.Name] = g.Function.Address.String()
	}
	for _, p := range t.Pairs {
		e.emit(famGPUNICPath, 1, gpuAddr[p.GPU], nicDevice[p.NIC], p.Path.String(), p.NCCLPath, strconv.FormatBool(p.GDR.PathAllows))
		for _, a := range p.Between {
			devices[a] = true
		}
	}
	for _, c := range t.Choices {
		if c.NIC != "" {
			e.emit(famGPUNCCLNIC, 1, gpuAddr[c.GPU], nicDevice[c.NIC], c.Path.String())
		}
	}
	for a := range devices {
		f := t.Functions[a]
		if f == nil || f.AER == nil {
			continue
		}
		fn := a.String()
		e.emit(famPCIeAER, float64(f.AER.Correctable), fn, "correctable")
		e.emit(famPCIeAER, float64(f.AER.NonFatal), fn, "nonfatal")
		e.emit(famPCIeAER, float64(f.AER.Fatal), fn, "fatal")
	}
}
