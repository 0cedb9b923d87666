package gpudirect

import (
	"errors"
	"strings"
	"syscall"
)

const probeSource = "REG_DMABUF_MR with fd -1"

// dmabufProbeOutcome sorts the probe results by what they mean.
type dmabufProbeOutcome struct {
	ran                    bool
	err                    error
	results                []DMABufProbeResult
	supported, unsupported []string // device names
	unsupportedErrnos      []string // errno names, parallel to unsupported
	inconclusive           []string
}

func runDMABufProbe(probe DMABufProbe) dmabufProbeOutcome {
	if probe == nil {
		return dmabufProbeOutcome{}
	}
	results, err := probe()
	outcome := dmabufProbeOutcome{ran: true, err: err, results: results}
	if err != nil {
		return outcome
	}
	for _, result := range results {
		switch classifyProbeError(result.Err) {
		case StateYes:
			outcome.supported = append(outcome.supported, result.Device)
		case StateNo:
			outcome.unsupported = append(outcome.unsupported, result.Device)
			outcome.unsupportedErrnos = append(outcome.unsupportedErrnos, errnoName(result.Err))
		default:
			outcome.inconclusive = append(outcome.inconclusive, result.Device)
		}
	}
	return outcome
}

// classifyProbeError applies NCCL's reading of the errno: EBADF (or an MR)
// is supported, EOPNOTSUPP and EPROTONOSUPPORT are not, the rest is unknown.
func classifyProbeError(err error) State {
	switch {
	case err == nil, errors.Is(err, syscall.EBADF):
		return StateYes
	case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EPROTONOSUPPORT):
		return StateNo
	}
	return StateUnknown
}

var probeErrnoNames = map[syscall.Errno]string{
	syscall.EBADF:           "EBADF",
	syscall.EOPNOTSUPP:      "EOPNOTSUPP",
	syscall.EPROTONOSUPPORT: "EPROTONOSUPPORT",
}

func errnoName(err error) string {
	if err == nil {
		return "MR registered"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name, ok := probeErrnoNames[errno]; ok {
			return name
		}
	}
	return err.Error()
}

// decided reports whether any device gave a yes or no answer.
func (p dmabufProbeOutcome) decided() bool {
	return len(p.supported) > 0 || len(p.unsupported) > 0
}

// unsupportedSummary reads "rxe0 (EOPNOTSUPP), siw0 (EOPNOTSUPP)".
func (p dmabufProbeOutcome) unsupportedSummary() string {
	parts := make([]string, len(p.unsupported))
	for i, device := range p.unsupported {
		parts[i] = device + " (" + p.unsupportedErrnos[i] + ")"
	}
	return strings.Join(parts, ", ")
}

func (p dmabufProbeOutcome) signals() []Signal {
	switch {
	case !p.ran:
		return []Signal{{Name: "verbs_probe", Source: probeSource, State: StateNotRun, Detail: "no verbs prober given"}}
	case p.err != nil:
		return []Signal{{Name: "verbs_probe", Source: probeSource, State: StateUnknown, Detail: p.err.Error()}}
	case len(p.results) == 0:
		return []Signal{{Name: "verbs_probe", Source: probeSource, State: StateNotRun, Detail: "no uverbs device"}}
	}
	signals := make([]Signal, 0, len(p.results))
	for _, result := range p.results {
		s := Signal{Name: "verbs_probe:" + result.Device, Source: probeSource + " on " + result.Device,
			State: classifyProbeError(result.Err), Value: errnoName(result.Err)}
		switch s.State {
		case StateYes:
			s.Detail = "the kernel and driver accept dma-buf MRs"
		case StateNo:
			s.Detail = "the driver, provider or kernel lacks dma-buf MRs"
		default:
			s.Detail = "this error does not tell"
		}
		signals = append(signals, s)
	}
	return signals
}
