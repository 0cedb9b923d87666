package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/topo"
)

// pathLegend is nvidia-smi topo -m's legend, for the classes grdma draws.
var pathLegend = []string{
	"  X    = Self",
	"  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
	"  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
	"  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
	"  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
	"  PIX  = Connection traversing at most a single PCIe bridge",
	"  N/A  = Not on PCI",
}

// Topology writes t as grdma topo does: the matrix with nvidia-smi's
// legend, a NIC legend, each device's links, NCCL's choice per GPU and,
// when the node looks virtual, what that means. JSON (o.JSON) is t's own
// encoding.
func Topology(w io.Writer, t *topo.Topology, o output.Options) error {
	if o.JSON {
		return writeJSON(w, t, o.Pretty)
	}
	names := t.Devices()
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw, "CPU Affinity\tNUMA Affinity")
	fns := deviceFunctions(t)
	for i, row := range t.Matrix {
		fmt.Fprintf(tw, "%s\t", names[i])
		for _, p := range row {
			fmt.Fprintf(tw, "%s\t", p)
		}
		cpus, numa := "N/A", "N/A"
		if f := fns[i]; f != nil {
			if f.LocalCPUs != "" {
				cpus = f.LocalCPUs
			}
			if f.NUMANode >= 0 {
				numa = fmt.Sprint(f.NUMANode)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", cpus, numa)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(names) == 0 {
		fmt.Fprintln(w, "no GPU and no RDMA device")
	}
	fmt.Fprint(w, "\nLegend:\n\n")
	fmt.Fprintln(w, strings.Join(pathLegend, "\n"))
	if len(t.GPUs) > 0 {
		fmt.Fprint(w, "\nGPU Legend:\n\n")
		for _, g := range t.GPUs {
			fmt.Fprintf(w, "  %s: %s %s\n", g.Name, g.Function.Address, gpuDescription(g))
		}
	}
	if len(t.NICs) > 0 {
		fmt.Fprint(w, "\nNIC Legend:\n\n")
		for _, n := range t.NICs {
			fmt.Fprintf(w, "  %s: %s\n", n.Name, nicDescription(n))
		}
	}
	fmt.Fprint(w, "\nLinks (from each device up to its root port: current, and what both ends can do):\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range t.GPUs {
		writeHops(tw, g.Name, g.Hops)
	}
	for _, n := range t.NICs {
		if n.Function == nil {
			fmt.Fprintf(tw, "  %s\tnot on PCI\t\t\t\n", n.Name)
			continue
		}
		writeHops(tw, n.Name, n.Hops)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nNCCL (%s) NIC and GPUDirect RDMA per GPU, NCCL_NET_GDR_LEVEL=%s:\n\n", t.NCCLVersions, t.GDRLevel.NCCLName())
	if len(t.GPUs) == 0 {
		fmt.Fprintln(w, "  no GPU")
	}
	for _, c := range t.Choices {
		if c.NIC == "" {
			fmt.Fprintf(w, "  %s: no NIC (%s)\n", c.GPU, c.GDR.Reason)
			continue
		}
		path := c.Path.String()
		if c.Path.NCCLName() != path {
			path += " (" + c.Path.NCCLName() + " to NCCL)"
		}
		fmt.Fprintf(w, "  %s: %s %s, GDR %s: %s\n", c.GPU, c.NIC, path, c.GDR.Word(), c.GDR.Reason)
		if len(c.Local) > 1 {
			fmt.Fprintf(w, "        equally close: %s\n", strings.Join(c.Local, " "))
		}
		if len(c.SharedWith) > 0 {
			fmt.Fprintf(w, "        shared with %s", strings.Join(c.SharedWith, " "))
			if len(c.Closer) > 0 {
				fmt.Fprintf(w, " while closer NICs idle: %s", strings.Join(c.Closer, " "))
			}
			fmt.Fprintln(w)
		}
	}
	if t.Virtual.Likely {
		fmt.Fprintln(w, "\nThis node looks virtual: the classes describe the hypervisor's PCI topology, not the host's.")
		for _, s := range t.Virtual.Signals {
			fmt.Fprintf(w, "  - %s\n", s)
		}
		fmt.Fprintln(w, "NCCL sees the same topology; where GPUs and NICs share switches on the host:")
		for _, r := range t.Virtual.Remedies {
			fmt.Fprintf(w, "  - %s\n", r)
		}
	}
	return nil
}

// deviceFunctions lists the PCI functions of the matrix's devices.
func deviceFunctions(t *topo.Topology) []*pci.Function {
	var out []*pci.Function
	for i := range t.GPUs {
		out = append(out, &t.GPUs[i].Function)
	}
	for _, n := range t.NICs {
		out = append(out, n.Function)
	}
	return out
}

func gpuDescription(g topo.GPU) string {
	parts := []string{g.Model()}
	if g.Named {
		parts = append(parts, "(named)")
	}
	if g.DMABuf != nil && !*g.DMABuf {
		parts = append(parts, "(older than Turing: no dma-buf)")
	}
	if g.Function.Driver != "" {
		parts = append(parts, "driver "+g.Function.Driver)
	}
	return strings.Join(parts, " ")
}

func nicDescription(n topo.NIC) string {
	s := n.Device
	var where []string
	where = append(where, n.Netdevs...)
	if n.Attachment.Function != nil {
		where = append(where, n.Attachment.Function.String())
	}
	if len(where) > 0 {
		s += " (" + strings.Join(where, ", ") + ")"
	}
	if n.Soft {
		s += ", software device placed at its netdev's function"
	}
	return s
}

func writeHops(tw io.Writer, name string, hops []topo.Hop) {
	for i, h := range hops {
		label := ""
		if i == 0 {
			label = name
		}
		port := "root bus"
		if h.Port != nil {
			port = h.Port.String()
		}
		state := string(h.State)
		switch {
		case h.SpeedBelow && h.WidthBelow:
			state += " (speed and width)"
		case h.SpeedBelow:
			state += " (speed)"
		case h.WidthBelow:
			state += " (width)"
		}
		fmt.Fprintf(tw, "  %s\t%s - %s\t%s\tcapable %s\t%s\n", label, h.Function, port,
			linkText(h.Speed, h.Width), linkText(h.CapableSpeed, h.CapableWidth), state)
	}
}

func linkText(s pci.Speed, width int) string {
	w := "x?"
	if width > 0 {
		w = fmt.Sprintf("x%d", width)
	}
	return s.String() + " " + w
}
