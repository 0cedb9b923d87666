// Package health turns what grdma reads about a node into PASS/WARN/FAIL
// results for scripted health checks (`grdma check`): RDMA devices and
// their uverbs character devices, ports against expectations (state, rate,
// MTU, GID type, netdev MTU), verbs probes and GPUDirect RDMA readiness.
// It holds verdicts only: the checks are functions of what package node
// read (a node.Snapshot, which a Kubernetes device plugin can also fill in
// its own way), of verbsprobe results and of a gpudirect.Report.
//
// Every check gives Results of one shape: a status, a subject, a message,
// the Facts it rests on and, where a check has more to say, a Detail of
// its own (CheckGDR: a GDRDetail) whose JSON keys join the result's.
package health

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/pci"
)

// Status is the outcome of one check.
type Status string

// Outcomes. WARN does not fail a node; FAIL does.
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Fact is one name and value a result rests on ("state" "ACTIVE").
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Result is the outcome of one check of one subject.
type Result struct {
	Name    string `json:"name"`    // "devices", "ports", "gdr", "probe"
	Status  Status `json:"status"`  // PASS, WARN or FAIL
	Subject string `json:"subject"` // "rxe0", "rxe0/1", "node", "GPU0 mlx5_0"
	Message string `json:"message"`
	Facts   []Fact `json:"signals"`
	// Detail is what the check has to say beyond Facts, in its own shape
	// (CheckGDR: *GDRDetail); nil for none. It must encode as a JSON
	// object, whose keys follow the result's own (MarshalJSON).
	Detail any `json:"-"`
}

// MarshalJSON encodes the result's fields, then those of its Detail.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	b, err := json.Marshal(plain(r))
	if err != nil || r.Detail == nil {
		return b, err
	}
	d, err := json.Marshal(r.Detail)
	if err != nil {
		return nil, err
	}
	if len(d) < 2 || d[0] != '{' {
		return nil, fmt.Errorf("health: the detail of %s %s is not a JSON object", r.Name, r.Subject)
	}
	if string(d) == "{}" {
		return b, nil
	}
	return append(append(b[:len(b)-1], ','), d[1:]...), nil
}

// GDRDetail is the Detail of CheckGDR: both GPUDirect verdicts.
type GDRDetail struct {
	PeerMem *gpudirect.Verdict `json:"peer_mem"`
	DMABuf  *gpudirect.Verdict `json:"dmabuf"`
}

// Summary is every result and whether the node passed: no FAIL.
type Summary struct {
	OK     bool     `json:"ok"`
	Checks []Result `json:"checks"`
}

// NewSummary sums up a set of results.
func NewSummary(results []Result) Summary {
	r := Summary{OK: true, Checks: results}
	if r.Checks == nil {
		r.Checks = []Result{}
	}
	for _, res := range results {
		if res.Status == Fail {
			r.OK = false
		}
	}
	return r
}

// Expect is what a port must look like beyond being up. Zero values
// expect nothing.
type Expect struct {
	State       ib.PortState // default ACTIVE
	MinRateGbps float64
	ActiveMTU   int // bytes
	GIDType     gid.Type
	// GIDIndex, when set, is the index gid.Select must choose among the
	// GIDs matching GIDSelect on every port: the GID index a job is
	// configured with (NCCL_IB_GID_INDEX), checked on every node so that
	// drift is caught before a job hangs.
	GIDIndex  *int
	GIDSelect gid.Criteria
	NetdevMTU int
	// DeviceCount is the number of RDMA devices expected; -1 or 0 with
	// DeviceNames empty means any number but at least one.
	DeviceCount int
	DeviceNames []string
	// GPUs are PCI functions the gdr check treats as GPUs besides those
	// found by ID (topo.Options.GPUs).
	GPUs []pci.Address
}

// CheckPorts is the "ports" check of a node: every port of s against
// exp (PortResults); a node whose ports could not be listed fails as a
// whole, and a device whose ports could not be read fails by name.
func CheckPorts(s *node.Snapshot, exp Expect) []Result {
	if s.PortsErr != nil {
		return []Result{failure("ports", s.PortsErr)}
	}
	res := PortResults(s.Ports, exp)
	if len(s.Ports) == 0 && len(s.Errors) > 0 {
		res = nil // the errors below say why there are none
	}
	for _, e := range s.Errors {
		if e.What == "ports" {
			res = append(res, Result{Name: "ports", Status: Fail, Subject: e.Device, Message: e.Error(), Facts: []Fact{}})
		}
	}
	return res
}

// failure is the result of a check that could not read its inputs.
func failure(check string, err error) Result {
	return Result{Name: check, Status: Fail, Subject: "node", Message: err.Error(), Facts: []Fact{}}
}

// PortResults checks each port: the logical state (ACTIVE unless expected
// otherwise), the physical state LINK_UP, and the expectations. No ports
// at all is a failure.
func PortResults(in []node.Port, exp Expect) []Result {
	if len(in) == 0 {
		return []Result{{Name: "ports", Status: Fail, Subject: "node", Message: "no RDMA ports", Facts: []Fact{}}}
	}
	want := exp.State
	if want == 0 {
		want = ib.PortActive
	}
	out := make([]Result, 0, len(in))
	for _, pi := range in {
		p := pi.Port
		r := Result{Name: "ports", Status: Pass, Subject: fmt.Sprintf("%s/%d", p.Device, p.Port)}
		var problems []string
		if p.State != want {
			problems = append(problems, fmt.Sprintf("state %s, expected %s", p.State, want))
		}
		if want == ib.PortActive && p.PhysState != ib.PhysLinkUp {
			problems = append(problems, fmt.Sprintf("physical state %s, expected LINK_UP", p.PhysState))
		}
		if exp.MinRateGbps > 0 && p.RateGbps() < exp.MinRateGbps {
			problems = append(problems, fmt.Sprintf("rate %g Gb/s, expected at least %g", p.RateGbps(), exp.MinRateGbps))
		}
		if exp.ActiveMTU > 0 && p.ActiveMTU.Bytes() != exp.ActiveMTU {
			problems = append(problems, fmt.Sprintf("active MTU %d, expected %d", p.ActiveMTU.Bytes(), exp.ActiveMTU))
		}
		if exp.NetdevMTU > 0 && p.NetdevMTU != exp.NetdevMTU {
			problems = append(problems, fmt.Sprintf("netdev %s MTU %d, expected %d", p.Netdev, p.NetdevMTU, exp.NetdevMTU))
		}
		if exp.GIDType != 0 && pi.GIDErr != nil {
			problems = append(problems, fmt.Sprintf("cannot read the GID table to find a %s GID: %v", exp.GIDType, pi.GIDErr))
		} else if exp.GIDType != 0 && len(gid.Filter(pi.GIDs, gid.Criteria{Type: exp.GIDType})) == 0 {
			problems = append(problems, fmt.Sprintf("no %s GID", exp.GIDType))
		}
		var chosen *gid.Entry
		if exp.GIDIndex != nil {
			var problem string
			chosen, problem = checkGIDIndex(pi, *exp.GIDIndex, exp.GIDSelect)
			if problem != "" {
				problems = append(problems, problem)
			}
		}
		r.Facts = []Fact{
			{"state", p.State.String()},
			{"physical_state", p.PhysState.String()},
			{"rate_gbps", fmt.Sprint(p.RateGbps())},
			{"active_mtu", fmt.Sprint(p.ActiveMTU.Bytes())},
			{"mtu_source", string(p.MTUSource)},
		}
		if p.Netdev != "" {
			r.Facts = append(r.Facts, Fact{"netdev", p.Netdev}, Fact{"netdev_mtu", fmt.Sprint(p.NetdevMTU)})
		}
		if chosen != nil {
			r.Facts = append(r.Facts, Fact{"gid_index", fmt.Sprint(chosen.Index)})
		}
		if len(problems) > 0 {
			r.Status = Fail
			r.Message = strings.Join(problems, "; ")
		} else {
			r.Message = fmt.Sprintf("%s %s, %g Gb/s, MTU %d", p.State, p.PhysState, p.RateGbps(), p.ActiveMTU.Bytes())
			if p.Netdev != "" {
				r.Message += " on " + p.Netdev
			}
		}
		out = append(out, r)
	}
	return out
}

// CheckDevices is the "devices" check of a node (DeviceResults); a node
// whose devices could not be listed fails as a whole.
func CheckDevices(s *node.Snapshot, exp Expect) []Result {
	if s.DevicesErr != nil {
		return []Result{failure("devices", s.DevicesErr)}
	}
	return DeviceResults(s.Devices, exp)
}

// DeviceResults checks that the expected devices exist and that each has
// an accessible uverbs character device (verbs applications need one);
// the checks need only each device's Name, Verbs and VerbsErr.
func DeviceResults(in []node.Device, exp Expect) []Result {
	var out []Result
	names := make([]string, 0, len(in))
	for _, d := range in {
		names = append(names, d.Name)
	}
	switch {
	case exp.DeviceCount > 0 && len(in) != exp.DeviceCount:
		out = append(out, Result{Name: "devices", Status: Fail, Subject: "node",
			Message: fmt.Sprintf("%d RDMA devices (%s), expected %d", len(in), strings.Join(names, ", "), exp.DeviceCount)})
	case len(in) == 0:
		out = append(out, Result{Name: "devices", Status: Fail, Subject: "node", Message: "no RDMA devices"})
	}
	for _, want := range exp.DeviceNames {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			out = append(out, Result{Name: "devices", Status: Fail, Subject: want, Message: "expected RDMA device " + want + " not found"})
		}
	}
	for _, d := range in {
		r := Result{Name: "devices", Status: Pass, Subject: d.Name, Facts: []Fact{{"uverbs", d.Verbs}}}
		switch {
		case d.Verbs == "":
			r.Status, r.Message = Fail, "no uverbs device (load ib_uverbs)"
		case d.VerbsErr != nil:
			r.Status, r.Message = Fail, fmt.Sprintf("%s not accessible: %v", d.Verbs, d.VerbsErr)
		default:
			r.Message = d.Verbs + " present and accessible"
		}
		out = append(out, r)
	}
	for i := range out {
		if out[i].Facts == nil {
			out[i].Facts = []Fact{}
		}
	}
	return out
}

// CheckGDR turns the GPUDirect report into one result. A node without an
// NVIDIA driver only warns (GPUDirect does not apply); on a GPU node one
// working mechanism passes and none fails; undecided verdicts and memory
// findings warn.
func CheckGDR(rep gpudirect.Report) Result {
	r := Result{Name: "gdr", Subject: "node", Detail: &GDRDetail{PeerMem: &rep.PeerMem, DMABuf: &rep.DMABuf}, Facts: []Fact{}}
	yes := func(v gpudirect.Verdict) bool { return v.Supported != nil && *v.Supported }
	no := func(v gpudirect.Verdict) bool { return v.Supported != nil && !*v.Supported }
	noGPU := strings.Contains(rep.PeerMem.Reason, "no NVIDIA driver") && strings.Contains(rep.DMABuf.Reason, "no NVIDIA driver")
	kernel := func(v *bool) string {
		switch {
		case v == nil:
			return "unknown"
		case *v:
			return "yes"
		}
		return "no"
	}
	r.Facts = append(r.Facts,
		Fact{"peer_mem", verdictWord(rep.PeerMem)}, Fact{"dmabuf", verdictWord(rep.DMABuf)},
		Fact{"kernel_peer_mem", kernel(rep.PeerMem.KernelSupport)}, Fact{"kernel_dmabuf", kernel(rep.DMABuf.KernelSupport)})
	switch {
	case noGPU:
		r.Status = Warn
		r.Message = fmt.Sprintf("no NVIDIA driver loaded, GPUDirect RDMA does not apply (kernel: dma-buf import %s, PeerDirect %s)",
			kernel(rep.DMABuf.KernelSupport), kernel(rep.PeerMem.KernelSupport))
	case yes(rep.DMABuf) || yes(rep.PeerMem):
		r.Status = Pass
		var ways []string
		if yes(rep.DMABuf) {
			ways = append(ways, "dma-buf")
		}
		if yes(rep.PeerMem) {
			ways = append(ways, "peer_mem")
		}
		r.Message = "GPUDirect RDMA via " + strings.Join(ways, " and ")
	case no(rep.DMABuf) && no(rep.PeerMem):
		r.Status = Fail
		r.Message = "no GPUDirect RDMA: dma-buf: " + rep.DMABuf.Reason + "; peer_mem: " + rep.PeerMem.Reason
		if act := firstNonEmpty(rep.DMABuf.Action, rep.PeerMem.Action); act != "" {
			r.Message += " (" + act + ")"
		}
	default:
		r.Status = Warn
		r.Message = "GPUDirect RDMA undecided: dma-buf: " + rep.DMABuf.Reason + "; peer_mem: " + rep.PeerMem.Reason
	}
	if len(rep.Memory.Warnings) > 0 {
		if r.Status == Pass {
			r.Status = Warn
		}
		r.Message += "; memory: " + strings.Join(rep.Memory.Warnings, "; ")
	}
	return r
}

func verdictWord(v gpudirect.Verdict) string {
	switch {
	case v.Supported == nil:
		return "unknown"
	case *v.Supported:
		return "yes"
	}
	return "no"
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// checkGIDIndex compares the index gid.Select chooses on a port with the
// expected one; problem is "" when they agree.
func checkGIDIndex(pi node.Port, want int, c gid.Criteria) (chosen *gid.Entry, problem string) {
	if pi.GIDErr != nil {
		return nil, fmt.Sprintf("cannot read the GID table to check GID index %d: %v", want, pi.GIDErr)
	}
	e, err := gid.Select(pi.GIDs, c)
	if err != nil {
		return nil, fmt.Sprintf("GID index %d expected, but %v", want, err)
	}
	if e.Index != want {
		return &e, fmt.Sprintf("GID index %d selected (%s), expected %d", e.Index, e, want)
	}
	return &e, ""
}
