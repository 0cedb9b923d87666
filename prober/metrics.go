package prober

import (
	"fmt"

	"github.com/grdma/grdma/exporter"
	"github.com/prometheus/client_golang/prometheus"
)

// Failure is why a probe failed: a reason from a fixed set (the reason
// label of probe_failure_info, so that alerts and dashboards can match
// it), the step it failed at, if any, and the error, which goes to the
// log and the debug output, not into a label (its text varies from
// probe to probe).
type Failure struct {
	Reason string
	Step   string
	Err    error
}

func (f *Failure) Error() string {
	if f.Step != "" {
		return fmt.Sprintf("%s at %s: %v", f.Reason, f.Step, f.Err)
	}
	return fmt.Sprintf("%s: %v", f.Reason, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

func fail(reason, step string, err error) *Failure {
	return &Failure{Reason: reason, Step: step, Err: err}
}

// Reasons a probe fails.
const (
	ReasonUnknownModule = "unknown_module"    // no such module
	ReasonBadParameter  = "bad_parameter"     // a request's parameter or timeout header
	ReasonBadTarget     = "bad_target"        // not host or host:port
	ReasonResolve       = "resolve"           // the target's name does not resolve
	ReasonNoDevice      = "no_device"         // no local RDMA port reaches the target
	ReasonProbeBusy     = "probe_busy"        // this exporter's probe slots stayed taken
	ReasonNoResponder   = "no_responder"      // nothing answers on the target's port
	ReasonBusy          = "responder_busy"    // the responder stayed at capacity
	ReasonRefused       = "responder_refused" // the responder refused: limits, allow-list, shared secret
	ReasonTimeout       = "timeout"           // the probe's time ran out
	ReasonLost          = "lost"              // UD pings sent, none answered
	ReasonUnsupported   = "unsupported"       // the local driver's data path is unknown to grdma
	ReasonFailed        = "failed"            // a step failed, here or at the responder (step label)
)

// Reasons lists every reason, for documentation and tests.
var Reasons = []string{ReasonUnknownModule, ReasonBadParameter, ReasonBadTarget, ReasonResolve, ReasonNoDevice,
	ReasonProbeBusy, ReasonNoResponder, ReasonBusy, ReasonRefused, ReasonTimeout, ReasonLost, ReasonUnsupported, ReasonFailed}

// The metric families of a probe (blackbox_exporter's names for what
// every probe has, probe_rdma_* for the modules' results) and of the
// handler on /metrics.
var (
	famSuccess = exporter.NewFamily("probe_success", prometheus.GaugeValue,
		"1 when the probe succeeded, 0 when it failed (probe_failure_info says why).")
	famDuration = exporter.NewFamily("probe_duration_seconds", prometheus.GaugeValue,
		"How long the probe took, waiting for a slot included.")
	famFailure = exporter.NewFamily("probe_failure_info", prometheus.GaugeValue,
		"1 when the probe failed: reason (unknown_module, bad_parameter, bad_target, resolve, no_device, probe_busy, no_responder, responder_busy, responder_refused, timeout, lost, unsupported, failed) and the step it failed at, if any; the message is in the log and in debug=true.",
		"reason", "step")
	famInfo = exporter.NewFamily("probe_rdma_info", prometheus.GaugeValue,
		"Always 1: the local port and GID the probe left from, the responder's GID, the test run.",
		"device", "port", "gid", "remote_gid", "test")
	famStep = exporter.NewFamily("probe_rdma_step_duration_seconds", prometheus.GaugeValue,
		"Time of each step of the probe (open, create_qp, connect, modify_qp_rtr, lat_write, ...), as grdma probe reports them.",
		"step")
	famPathMTU = exporter.NewFamily("probe_rdma_path_mtu_bytes", prometheus.GaugeValue,
		"The path MTU both queue pairs used.")
	famLatency = exporter.NewSummaryFamily("probe_rdma_latency_seconds",
		"Latency of a lat test: quantiles 0 (min), 0.5, 0.99 and 1 (max), _count exchanges, _sum; one way (half a round trip) for write and send, as perftest reports, a whole RDMA READ for read.")
	famBandwidth = exporter.NewFamily("probe_rdma_bandwidth_bytes_per_second", prometheus.GaugeValue,
		"Payload bandwidth of a bw test (this side's measurement).")
	famBytes = exporter.NewFamily("probe_rdma_transferred_bytes", prometheus.GaugeValue,
		"Payload bytes a bw or lat test moved.")
	famMessages = exporter.NewFamily("probe_rdma_messages", prometheus.GaugeValue,
		"Messages (bw) or exchanges (lat) completed.")
	famTestTime = exporter.NewFamily("probe_rdma_test_duration_seconds", prometheus.GaugeValue,
		"Time of the measured part of a bw or lat test.")
	famUDSent = exporter.NewFamily("probe_ud_ping_sent", prometheus.GaugeValue,
		"UD pings sent by a ud_ping probe.")
	famUDLost = exporter.NewFamily("probe_ud_ping_lost", prometheus.GaugeValue,
		"UD pings of a ud_ping probe that got no answer.")
	famUDRTT = exporter.NewSummaryFamily("probe_ud_ping_rtt_seconds",
		"Network round trip of the answered UD pings, the responder's delay taken out: quantiles 0, 0.5, 0.99 and 1, _count, _sum.")
	famUDDelay = exporter.NewSummaryFamily("probe_ud_ping_responder_delay_seconds",
		"The responder's delay of the answered UD pings: quantiles 0, 0.5, 0.99 and 1, _count, _sum.")

	famModuleUnknown = exporter.NewFamily("grdma_probe_module_unknown_total", prometheus.CounterValue,
		"Probes asked for a module that is not configured (blackbox_exporter's blackbox_module_unknown_total).")
	famProbes = exporter.NewFamily("grdma_probes_total", prometheus.CounterValue,
		"Probes run through /probe, by module and result (success, failure).", "module", "result")
	famRunning = exporter.NewFamily("grdma_probes_running", prometheus.GaugeValue,
		"Probes running now.")
)

// Families lists the families of a probe's answer and of the handler,
// for the README's /probe metrics table.
var Families = []*exporter.Family{
	famSuccess, famDuration, famFailure, famInfo, famStep, famPathMTU, famLatency, famBandwidth, famBytes,
	famMessages, famTestTime, famUDSent, famUDLost, famUDRTT, famUDDelay, famModuleUnknown, famProbes, famRunning,
}
