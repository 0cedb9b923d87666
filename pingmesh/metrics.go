package pingmesh

import (
	"github.com/grdma/grdma/exporter"
	"github.com/prometheus/client_golang/prometheus"
)

// The metric families of the collector. Families of one target carry
// its address (target) and its file_sd labels, each prefixed target_
// (target_rack, target_tor, ...): the scraping Prometheus adds the
// probing node's own labels (instance, and rack or tor if its scrape
// configuration has them), which must not clash with the target's.
var (
	famRTT = exporter.NewHistogramFamily("grdma_pingmesh_rtt_seconds",
		"Network round trip of the UD probes to a target, the responder's delay taken out. Per target (target, target_*) up to --pingmesh.max-target-series targets; beyond, per value of the aggregation label (target_<label>) with target empty.",
		"target")
	famDelay = exporter.NewHistogramFamily("grdma_pingmesh_responder_delay_seconds",
		"Time the target's responder took from receiving a probe to sending its answer; labelled as grdma_pingmesh_rtt_seconds.",
		"target")
	famSent = exporter.NewFamily("grdma_pingmesh_sent_total", prometheus.CounterValue,
		"Probes sent to a target, by payload size in bytes; labels target and target_* for every target.",
		"target", "size")
	famLost = exporter.NewFamily("grdma_pingmesh_lost_total", prometheus.CounterValue,
		"Probes sent to a target that got no answer within --pingmesh.timeout, by payload size.",
		"target", "size")
	famLastSuccess = exporter.NewFamily("grdma_pingmesh_last_success_timestamp_seconds", prometheus.GaugeValue,
		"When a probe to the target was last answered (0: never).",
		"target")
	famConsecutive = exporter.NewFamily("grdma_pingmesh_consecutive_lost", prometheus.GaugeValue,
		"Probes to the target lost in a row since its last answer (all sizes).",
		"target")
	famResponderUp = exporter.NewFamily("grdma_pingmesh_responder_up", prometheus.GaugeValue,
		"1 while the target's responder answers on its control port (the prober holds its UD address), 0 after that failed (no responder, refused, name not resolved); absent before the first probe.",
		"target")
	famErrors = exporter.NewFamily("grdma_pingmesh_errors_total", prometheus.CounterValue,
		"Probes that could not be sent, by kind (resolve, no_responder, refused: the target's control channel, asked for its UD address; local: this side), labelled as grdma_pingmesh_rtt_seconds.",
		"target", "kind")
	famTargets = exporter.NewFamily("grdma_pingmesh_targets", prometheus.GaugeValue,
		"Targets probed (from the last good reading of the targets file).")
	famInterval = exporter.NewFamily("grdma_pingmesh_probe_interval_seconds", prometheus.GaugeValue,
		"Time between two probes to one target: 1/--pingmesh.rate, longer when --pingmesh.max-rate over the targets holds them back.")
	famEchoLost = exporter.NewFamily("grdma_pingmesh_echo_lost_total", prometheus.CounterValue,
		"Lost probes whose echo was lost on the way back (the responder's report of it came): part of grdma_pingmesh_lost_total.",
		"target")
	famProber = exporter.NewFamily("grdma_pingmesh_prober_events_total", prometheus.CounterValue,
		"What the UD prober counted, by event: sent, throttled (probes held back by --pingmesh.max-rate or a full send queue, each counted once), results_dropped (not read in time), malformed, foreign and duplicate datagrams, resolves, resolve_errors, send_errors, restarts (its queue pair made again: sends completing in error, or none completing within the probe timeout).",
		"event")
	famDropped = exporter.NewFamily("grdma_pingmesh_results_ignored_total", prometheus.CounterValue,
		"Results of targets no longer in the targets file (probes out when it changed).")
	famFileErrors = exporter.NewFamily("grdma_pingmesh_targets_file_errors_total", prometheus.CounterValue,
		"Readings of the targets file that failed (missing, unreadable, malformed); the targets of the last good reading stay in use.")
	famFileOK = exporter.NewFamily("grdma_pingmesh_targets_file_last_reload_successful", prometheus.GaugeValue,
		"1 when the last reading of the targets file succeeded.")
	famFileLoaded = exporter.NewFamily("grdma_pingmesh_targets_file_loaded_timestamp_seconds", prometheus.GaugeValue,
		"When the targets in use were read from the file.")
	famTimestamps = exporter.NewFamily("grdma_pingmesh_timestamps_info", prometheus.GaugeValue,
		"Always 1: where the times of the last answer came from (source: hardware, the device's completion timestamps; software, the host's clock).",
		"source")
)

// Families lists the collector's metric families, for the README's
// pingmesh metrics table.
var Families = []*exporter.Family{
	famRTT, famDelay, famSent, famLost, famEchoLost, famLastSuccess, famConsecutive, famResponderUp, famErrors,
	famTargets, famInterval, famProber, famDropped, famFileErrors, famFileOK, famFileLoaded, famTimestamps,
}

// DefaultBuckets are the bounds of the RTT and delay histograms: powers
// of two from 1 µs to about 1 s, wide enough for hardware (µs) and rxe in
// a guest (ms), fine enough for a p99 within a factor of two.
var DefaultBuckets = func() []float64 {
	b := make([]float64, 21)
	for i := range b {
		b[i] = float64(uint64(1)<<i) * 1e-6
	}
	return b
}()

// histogram is a histogram kept by the collector itself: its series are
// made at collection (per target, or summed per group).
type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

func newHistogram(n int) *histogram { return &histogram{counts: make([]uint64, n)} }

func (h *histogram) observe(bounds []float64, v float64) {
	for i, b := range bounds {
		if v <= b {
			h.counts[i]++
			break
		}
	}
	h.sum += v
	h.count++
}

func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.sum += o.sum
	h.count += o.count
}

func (h *histogram) metric(desc *prometheus.Desc, bounds []float64, labels []string) prometheus.Metric {
	cum := make(map[float64]uint64, len(bounds))
	var n uint64
	for i, b := range bounds {
		n += h.counts[i]
		cum[b] = n
	}
	return prometheus.MustNewConstHistogram(desc, h.count, h.sum, cum, labels...)
}
