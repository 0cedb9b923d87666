package gpudirect

import "strings"

// finding is one prerequisite that failed or could not be checked.
type finding struct{ reason, action string }

// verdictBuilder collects failed and undecidable prerequisites: any failed
// one makes the verdict false and all of them are named; otherwise any
// undecidable one makes it unknown; otherwise it is true.
type verdictBuilder struct {
	blockers, unknowns []finding
}

func (b *verdictBuilder) block(reason, action string) {
	b.blockers = append(b.blockers, finding{reason, action})
}

func (b *verdictBuilder) undecided(reason, action string) {
	b.unknowns = append(b.unknowns, finding{reason, action})
}

// fill sets Supported, Reason and Action; successReason is used when
// nothing failed or stayed undecided.
func (b *verdictBuilder) fill(v *Verdict, successReason string) {
	switch {
	case len(b.blockers) > 0:
		v.Supported = new(false)
		v.Reason, v.Action = joinFindings(b.blockers)
	case len(b.unknowns) > 0:
		v.Supported = nil
		v.Reason, v.Action = joinFindings(b.unknowns)
	default:
		v.Supported = new(true)
		v.Reason, v.Action = successReason, ""
	}
}

func joinFindings(findings []finding) (reason, action string) {
	var reasons, actions []string
	for _, f := range findings {
		reasons = append(reasons, f.reason)
		if f.action != "" {
			actions = append(actions, f.action)
		}
	}
	return strings.Join(reasons, "; "), strings.Join(actions, "; ")
}

// kernelSide is the answer for the RDMA kernel half of a mechanism.
type kernelSide struct {
	supported      *bool
	reason, action string
}

// noNVIDIADriver is the verdict of both mechanisms on a node without an
// NVIDIA driver: a clear no, however ready the RDMA side is.
func noNVIDIADriver(v *Verdict) {
	v.Supported = new(false)
	v.Reason = "no NVIDIA driver loaded"
	v.Action = "load the NVIDIA driver, if this node has NVIDIA GPUs"
}

// rdmaStackAbsent is true when kallsyms was read and has no ib_core: no
// RDMA device can exist, and missing capability symbols prove nothing.
func (n *node) rdmaStackAbsent() bool {
	return n.kallsyms.has(symRegisterDevice) == StateNo
}

const (
	noRDMAStackReason = "no RDMA stack loaded (" + symRegisterDevice + " is not in /proc/kallsyms)"
	noRDMAStackAction = "load the RDMA NIC driver (e.g. mlx5_ib), which brings in ib_core and ib_uverbs"
)

func (n *node) rdmaCoreSignal() Signal {
	return n.kallsyms.signal("ib_core", symRegisterDevice,
		"marks ib_core as loaded: without it there is no RDMA device and missing symbols prove nothing")
}
