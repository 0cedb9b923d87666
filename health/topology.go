package health

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/topo"
)

// CheckGDRTopology is the gdr check with the PCIe topology: CheckGDR's
// node result, which is not PASS on a node with no RDMA device on PCI
// (nothing to do GPUDirect RDMA with: WARN, with the GPU and kernel
// readiness still in the message; a node result that warns or fails for
// another reason says so too), then one result per GPU for the NIC
// NCCL would use with it (topo.Choice), then one per other NIC whose PCIe
// link is degraded. A GPU's result, subject "GPU<n> <device>" and detail
// *GDRPairDetail, is the worst of:
//
//   - FAIL: a link on the way from the NIC to its root port, or a bridge
//     link above the GPU, or the GPU's own link width, below what both
//     ends can do (a GPU's speed below it is only mentioned: idle GPUs
//     drop to Gen1);
//   - WARN: the path is beyond NCCL_NET_GDR_LEVEL (PHB, NODE or SYS by
//     default: NCCL stages through host memory); on bare metal, a bridge
//     between the two redirects peer-to-peer traffic to the root complex
//     (ACS Request or Completion Redirect) or the GPU's or NIC's IOMMU
//     group translates DMA; the GPU shares its NIC with other GPUs while a
//     closer NIC idles; the GPU's and NIC's Max Payload Sizes differ; an
//     AER counter on the way is above zero (counted since boot: the
//     exporter's grdma_pcie_aer_errors_total shows when they rise);
//   - PASS otherwise.
//
// In a virtual machine (t.Virtual.Likely) ACS and the IOMMU are the
// host's concern and only mentioned, and a path beyond the GDR level
// names the remedies of a virtual topology. ACS that could not be read
// (config space needs root) is mentioned, not judged.
func CheckGDRTopology(rep gpudirect.Report, t *topo.Topology) []Result {
	nodeRes := CheckGDR(rep)
	for _, g := range t.GPUs {
		nodeRes.Facts = append(nodeRes.Facts, Fact{"gpu", g.Name + " " + g.Function.Address.String() + " " + g.Model()})
	}
	onPCI := 0
	for _, n := range t.NICs {
		if n.Function != nil {
			onPCI++
		}
	}
	nodeRes.Facts = append(nodeRes.Facts, Fact{"rdma_devices_on_pci", fmt.Sprint(onPCI)})
	if onPCI == 0 {
		what := "no RDMA device"
		if len(t.NICs) > 0 {
			what = "no RDMA device on PCI"
		}
		what += ": nothing to do GPUDirect RDMA with"
		if nodeRes.Status == Pass {
			nodeRes.Status = Warn
			nodeRes.Message = what + " (GPU and kernel ready: " + nodeRes.Message + ")"
		} else {
			nodeRes.Message += "; " + what // whatever else is wrong, say this too
		}
	}
	results := []Result{nodeRes}
	chosen := map[string]bool{}
	for _, c := range t.Choices {
		if c.NIC == "" {
			continue
		}
		chosen[c.NIC] = true
		results = append(results, checkPair(t, c))
	}
	for _, n := range t.NICs {
		if chosen[n.Name] || n.Function == nil {
			continue
		}
		if bad := degraded(n.Hops); len(bad) > 0 {
			results = append(results, Result{Name: "gdr", Status: Fail, Subject: n.Device,
				Message: "PCIe link degraded: " + strings.Join(bad, "; "), Facts: []Fact{}})
		}
	}
	return results
}

// GDRPairDetail is the detail of a GPU's gdr result (Result.Detail): the
// pair, NCCL's choice and the links of both devices, as grdma topo reads
// them.
type GDRPairDetail struct {
	Pair    topo.Pair   `json:"pair"`
	Choice  topo.Choice `json:"choice"`
	GPUHops []topo.Hop  `json:"gpu_hops"`
	NICHops []topo.Hop  `json:"nic_hops"`
}

// checkPair judges a GPU and the NIC NCCL would give it.
func checkPair(t *topo.Topology, c topo.Choice) Result {
	gi := slices.IndexFunc(t.GPUs, func(g topo.GPU) bool { return g.Name == c.GPU })
	ni := slices.IndexFunc(t.NICs, func(n topo.NIC) bool { return n.Name == c.NIC })
	g, n := t.GPUs[gi], t.NICs[ni]
	pi := slices.IndexFunc(t.Pairs, func(p topo.Pair) bool { return p.GPU == c.GPU && p.NIC == c.NIC })
	p := t.Pairs[pi]
	r := Result{Name: "gdr", Status: Pass, Subject: g.Name + " " + n.Device,
		Detail: &GDRPairDetail{Pair: p, Choice: c, GPUHops: g.Hops, NICHops: n.Hops}}
	r.Facts = []Fact{
		{"gpu", g.Function.Address.String()}, {"nic", n.Device}, {"nic_function", n.Function.Address.String()},
		{"path", p.Path.String()}, {"nccl_path", p.NCCLPath}, {"gdr", c.GDR.Word()},
		{"gdr_level", t.GDRLevel.NCCLName()}, {"virtual", fmt.Sprint(t.Virtual.Likely)},
	}
	var fails, warns, notes []string
	// links: the NIC's, the bridges above the GPU, the GPU's width
	fails = append(fails, degraded(n.Hops)...)
	if len(g.Hops) > 0 {
		own := g.Hops[0]
		switch {
		case own.WidthBelow:
			fails = append(fails, "GPU "+hopText(own))
		case own.SpeedBelow:
			notes = append(notes, "GPU link "+hopText(own)+" (idle GPUs drop to Gen1: check under load)")
		}
		fails = append(fails, degraded(g.Hops[1:])...)
	}
	if !c.GDR.PathAllows {
		w := fmt.Sprintf("%s to %s: GPUDirect RDMA off by default in NCCL (%s beyond NCCL_NET_GDR_LEVEL %s), it stages through host memory",
			p.Path, n.Device, p.NCCLPath, t.GDRLevel.NCCLName())
		if t.Virtual.Likely {
			w += "; the node looks virtual: " + strings.Join(t.Virtual.Remedies, "; ")
		}
		warns = append(warns, w)
	}
	bare := !t.Virtual.Likely
	if len(p.ACSRedirect) > 0 {
		s := "ACS redirects peer-to-peer traffic to the root complex at " + addrList(p.ACSRedirect)
		if bare {
			warns = append(warns, s+" (setpci -s BDF ECAP_ACS+0x6.w=0000 on the switch ports, or pci=disable_acs_redir=)")
		} else {
			notes = append(notes, s+" (in a VM: the host's concern; the NIC wants ATS)")
		}
	}
	if len(p.ACSUnknown) > 0 {
		notes = append(notes, "ACS not read (config space needs root) at "+addrList(p.ACSUnknown))
	}
	for _, f := range []*pci.Function{&g.Function, n.Function} {
		if f.IOMMUType == "DMA" || f.IOMMUType == "DMA-FQ" {
			s := fmt.Sprintf("IOMMU group %s of %s translates DMA (%s)", f.IOMMUGroup, f.Address, f.IOMMUType)
			if bare {
				warns = append(warns, s+": NVIDIA advises iommu=pt for GPUDirect on bare metal")
			} else {
				notes = append(notes, s)
			}
		}
	}
	if len(c.SharedWith) > 0 && len(c.Closer) > 0 {
		warns = append(warns, fmt.Sprintf("shares %s with %s while closer NICs idle: %s", n.Device, strings.Join(c.SharedWith, " "), nicDevices(t, c.Closer)))
	}
	if ge, ne := express(&g.Function), express(n.Function); ge != nil && ne != nil && ge.MaxPayload != ne.MaxPayload {
		warns = append(warns, fmt.Sprintf("Max Payload Size %d on the GPU, %d on the NIC", ge.MaxPayload, ne.MaxPayload))
	}
	for _, a := range slices.Concat([]pci.Address{g.Function.Address, n.Function.Address}, p.Between) {
		if f := t.Functions[a]; f != nil && f.AER != nil && f.AER.Total() > 0 {
			warns = append(warns, fmt.Sprintf("AER errors at %s since boot: %d correctable, %d non-fatal, %d fatal", a, f.AER.Correctable, f.AER.NonFatal, f.AER.Fatal))
		}
	}
	switch {
	case len(fails) > 0:
		r.Status = Fail
		r.Message = "PCIe link degraded: " + strings.Join(fails, "; ")
		if len(warns) > 0 {
			r.Message += "; " + strings.Join(warns, "; ")
		}
	case len(warns) > 0:
		r.Status = Warn
		r.Message = strings.Join(warns, "; ")
	default:
		r.Message = fmt.Sprintf("%s to %s, GPUDirect RDMA by NCCL's default (%s within NCCL_NET_GDR_LEVEL %s)", p.Path, n.Device, p.NCCLPath, t.GDRLevel.NCCLName())
		if c.GDR.Used != nil && !*c.GDR.Used {
			r.Message = fmt.Sprintf("%s to %s: the path allows GPUDirect RDMA, the node does not (see the node result)", p.Path, n.Device)
		}
	}
	if len(notes) > 0 {
		r.Message += " (" + strings.Join(notes, "; ") + ")"
	}
	return r
}

// degraded describes the degraded links among hops.
func degraded(hops []topo.Hop) []string {
	var out []string
	for _, h := range hops {
		if h.State == topo.LinkDegraded {
			out = append(out, hopText(h))
		}
	}
	return out
}

func hopText(h topo.Hop) string {
	port := "the root bus"
	if h.Port != nil {
		port = h.Port.String()
	}
	return fmt.Sprintf("%s-%s at %s x%d, capable of %s x%d", h.Function, port, h.Speed, h.Width, h.CapableSpeed, h.CapableWidth)
}

func express(f *pci.Function) *pci.Express {
	if f == nil || f.Config == nil {
		return nil
	}
	return f.Config.Express
}

func addrList(as []pci.Address) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

func nicDevices(t *topo.Topology, names []string) string {
	var out []string
	for _, n := range t.NICs {
		if slices.Contains(names, n.Name) {
			out = append(out, n.Device)
		}
	}
	return strings.Join(out, " ")
}
