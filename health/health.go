// Package health turns what grdma reads about a node into PASS/WARN/FAIL
// results for scripted health checks (`grdma check`): RDMA devices and
// their uverbs character devices, ports against expectations (state, rate,
// MTU, GID type, netdev MTU), and GPUDirect RDMA readiness. The checks are
// pure functions of their inputs, so a Kubernetes device plugin or an
// exporter can gather the inputs its own way and reuse the verdicts;
// ReadNode gathers those of the devices and ports checks, reading each
// port once (`grdma check` and package exporter both use it).
package health

import (
	"fmt"
	"strings"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
)

// Status is the outcome of one check.
type Status string

// Outcomes. WARN does not fail a node; FAIL does.
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Signal is one fact a result rests on.
type Signal struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Result is the outcome of one check of one subject.
type Result struct {
	Name    string   `json:"name"`    // "devices", "ports", "gdr", "probe"
	Status  Status   `json:"status"`  // PASS, WARN or FAIL
	Subject string   `json:"subject"` // "rxe0", "rxe0/1", "node"
	Message string   `json:"message"`
	Signals []Signal `json:"signals"`
	// PeerMem and DMABuf are the GPUDirect verdicts (gdr only).
	PeerMem *gpudirect.Verdict `json:"peer_mem,omitempty"`
	DMABuf  *gpudirect.Verdict `json:"dmabuf,omitempty"`
}

// Report is every result and whether the node passed: no FAIL.
type Report struct {
	OK     bool     `json:"ok"`
	Checks []Result `json:"checks"`
}

// Summarize builds the report of a set of results.
func Summarize(results []Result) Report {
	r := Report{OK: true, Checks: results}
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
}

// PortInput is one port with its populated GID entries.
type PortInput struct {
	Port ports.Port
	GIDs []gid.Entry
	// GIDErr is why the GID table could not be read: an expected GID type
	// then fails as unverifiable, not as missing.
	GIDErr error
}

// CheckPorts checks every port: the logical state (ACTIVE unless
// expected otherwise), the physical state LINK_UP, and the expectations.
// No ports at all is a failure.
func CheckPorts(in []PortInput, exp Expect) []Result {
	if len(in) == 0 {
		return []Result{{Name: "ports", Status: Fail, Subject: "node", Message: "no RDMA ports", Signals: []Signal{}}}
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
		r.Signals = []Signal{
			{"state", p.State.String()},
			{"physical_state", p.PhysState.String()},
			{"rate_gbps", fmt.Sprint(p.RateGbps())},
			{"active_mtu", fmt.Sprint(p.ActiveMTU.Bytes())},
			{"mtu_source", string(p.MTUSource)},
		}
		if p.Netdev != "" {
			r.Signals = append(r.Signals, Signal{"netdev", p.Netdev}, Signal{"netdev_mtu", fmt.Sprint(p.NetdevMTU)})
		}
		if chosen != nil {
			r.Signals = append(r.Signals, Signal{"gid_index", fmt.Sprint(chosen.Index)})
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

// DeviceInput is one RDMA device and its uverbs character device.
type DeviceInput struct {
	Name string
	// Index, Info and Driver describe the device (ReadNode fills them in
	// from netlink and sysfs; the checks need only Name and Verbs).
	Index  uint32
	Info   nldev.Device
	Driver string
	// Verbs is the path of the uverbs character device, "" when the
	// device has none (ib_uverbs not loaded).
	Verbs string
	// VerbsErr is why Verbs cannot be opened for reading and writing
	// (permission, missing node), nil when it can.
	VerbsErr error
}

// CheckDevices checks that the expected devices exist and that each has
// an accessible uverbs character device (verbs applications need one).
func CheckDevices(in []DeviceInput, exp Expect) []Result {
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
		r := Result{Name: "devices", Status: Pass, Subject: d.Name, Signals: []Signal{{"uverbs", d.Verbs}}}
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
		if out[i].Signals == nil {
			out[i].Signals = []Signal{}
		}
	}
	return out
}

// CheckGDR turns the GPUDirect report into one result. A node without an
// NVIDIA driver only warns (GPUDirect does not apply); on a GPU node one
// working mechanism passes and none fails; undecided verdicts and memory
// findings warn.
func CheckGDR(rep gpudirect.Report) Result {
	r := Result{Name: "gdr", Subject: "node", PeerMem: &rep.PeerMem, DMABuf: &rep.DMABuf, Signals: []Signal{}}
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
	r.Signals = append(r.Signals,
		Signal{"peer_mem", verdictWord(rep.PeerMem)}, Signal{"dmabuf", verdictWord(rep.DMABuf)},
		Signal{"kernel_peer_mem", kernel(rep.PeerMem.KernelSupport)}, Signal{"kernel_dmabuf", kernel(rep.DMABuf.KernelSupport)})
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
func checkGIDIndex(pi PortInput, want int, c gid.Criteria) (chosen *gid.Entry, problem string) {
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
