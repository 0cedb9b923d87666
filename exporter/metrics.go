package exporter

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Family describes one metric family the collectors export; Families
// lists them all, and the README's metrics table is checked against it.
type Family struct {
	Name   string
	Type   prometheus.ValueType
	Labels []string
	Help   string

	kind string // "histogram", "summary"; "" derives it from Type
	desc *prometheus.Desc
}

func family(name string, typ prometheus.ValueType, help string, labels ...string) *Family {
	return &Family{Name: name, Type: typ, Labels: labels, Help: help,
		desc: prometheus.NewDesc(name, help, labels, nil)}
}

// NewFamily defines a gauge or counter family of another collector
// (pingmesh, the /probe modules), for its own metrics table (Table).
func NewFamily(name string, typ prometheus.ValueType, help string, labels ...string) *Family {
	return family(name, typ, help, labels...)
}

// NewHistogramFamily defines a histogram family (Kind "histogram").
func NewHistogramFamily(name, help string, labels ...string) *Family {
	f := family(name, prometheus.UntypedValue, help, labels...)
	f.kind = "histogram"
	return f
}

// NewSummaryFamily defines a summary family (Kind "summary").
func NewSummaryFamily(name, help string, labels ...string) *Family {
	f := family(name, prometheus.UntypedValue, help, labels...)
	f.kind = "summary"
	return f
}

// Kind is the family's type as the metrics tables name it: gauge,
// counter, histogram or summary.
func (f *Family) Kind() string {
	switch {
	case f.kind != "":
		return f.kind
	case f.Type == prometheus.CounterValue:
		return "counter"
	}
	return "gauge"
}

// Desc is the family's descriptor with more label names after its own
// (labels that only a configuration names, such as a targets file's).
func (f *Family) Desc(more ...string) *prometheus.Desc {
	if len(more) == 0 {
		return f.desc
	}
	return prometheus.NewDesc(f.Name, f.Help, append(slices.Clone(f.Labels), more...), nil)
}

// The metric families. The names of those `grdma stat export` and `grdma
// check --textfile` wrote before the exporter existed are unchanged.
var (
	famPortState = family("grdma_port_state", prometheus.GaugeValue,
		"Logical port state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER).", "device", "port")
	famPortActive = family("grdma_port_active", prometheus.GaugeValue,
		"1 when the port is ACTIVE.", "device", "port")
	famPortPhys = family("grdma_port_physical_state", prometheus.GaugeValue,
		"Physical port state (2 POLLING, 3 DISABLED, 5 LINK_UP, ...).", "device", "port")
	famPortRate = family("grdma_port_rate_bytes_per_second", prometheus.GaugeValue,
		"Signalling rate of the port (sysfs ports/P/rate).", "device", "port")
	famPortMTU = family("grdma_port_active_mtu_bytes", prometheus.GaugeValue,
		"Active MTU of the port in bytes (QUERY_PORT, or derived from the netdev MTU on RoCE when the uverbs device cannot be used).", "device", "port")
	famPortWidth = family("grdma_port_width_lanes", prometheus.GaugeValue,
		"Active link width of the port in lanes (1X=1, 4X=4, ...).", "device", "port")
	famPortInfo = family("grdma_port_info", prometheus.GaugeValue,
		"Always 1: the link layer and netdev of a port.", "device", "port", "link_layer", "netdev")
	famGIDInfo = family("grdma_port_roce_v2_ipv4_gid_info", prometheus.GaugeValue,
		"Always 1: the RoCE v2 IPv4 GID a job would choose on the port (gid.Select; what NCCL_IB_GID_INDEX should be).", "device", "port", "gid_index", "gid", "netdev")
	famGIDIndex = family("grdma_port_roce_v2_ipv4_gid_index", prometheus.GaugeValue,
		"Index of the RoCE v2 IPv4 GID a job would choose on the port; alert on changes().", "device", "port")
	famHWCounter = family("grdma_port_hw_counter_total", prometheus.CounterValue,
		"Hardware counter of an RDMA port, named as its driver names it (rdma statistic show).", "device", "port", "counter")
	famRcvBytes = family("grdma_port_data_received_bytes_total", prometheus.CounterValue,
		"Data received on the port in bytes (PMA port_rcv_data_64 or port_rcv_data, converted from 4-byte words); ports without PMA counters (RoCE on rxe, many drivers) have none.", "device", "port")
	famXmitBytes = family("grdma_port_data_transmitted_bytes_total", prometheus.CounterValue,
		"Data transmitted on the port in bytes (PMA port_xmit_data_64 or port_xmit_data, converted from 4-byte words).", "device", "port")
	famDeviceInfo = family("grdma_device_info", prometheus.GaugeValue,
		"Always 1: an RDMA device with its driver, node GUID, firmware, node type and the netdevs of its ports.", "device", "driver", "node_guid", "fw_version", "node_type", "netdev")
	famResources = family("grdma_device_resources", prometheus.GaugeValue,
		"Objects of a type (qp, cq, mr, pd, ctx, cm_id, srq) that exist on the device now (rdma res show).", "device", "type")
	famCheckStatus = family("grdma_check_status", prometheus.GaugeValue,
		"Outcome of a grdma health check: 0 PASS, 1 WARN, 2 FAIL.", "check", "subject")
	famCheckRun = family("grdma_check_last_run_timestamp_seconds", prometheus.GaugeValue,
		"When the checks ran.")
	famPCIeDegraded = family("grdma_pcie_link_degraded", prometheus.GaugeValue,
		"1 when a PCIe link on the way from a GPU or RDMA device up to its root port runs below the speed or width both ends can do (or is down), else 0; function is the lower end (the device or a switch upstream port), port the upper.", "function", "port")
	famPCIeSpeed = family("grdma_pcie_link_transfers_per_second", prometheus.GaugeValue,
		"Current speed of a PCIe link per lane (2.5e9 for 2.5 GT/s), as the lower end's current_link_speed.", "function", "port")
	famPCIeCapSpeed = family("grdma_pcie_link_capable_transfers_per_second", prometheus.GaugeValue,
		"Highest speed per lane both ends of a PCIe link can do (the lower of their max_link_speed).", "function", "port")
	famPCIeWidth = family("grdma_pcie_link_width_lanes", prometheus.GaugeValue,
		"Current width of a PCIe link in lanes (current_link_width).", "function", "port")
	famPCIeCapWidth = family("grdma_pcie_link_capable_width_lanes", prometheus.GaugeValue,
		"Widest both ends of a PCIe link can do (the lower of their max_link_width).", "function", "port")
	famPCIeAER = family("grdma_pcie_aer_errors_total", prometheus.CounterValue,
		"PCIe AER errors of a GPU, an RDMA device's function or a bridge between them since boot (aer_dev_*, TOTAL_ERR_*), by severity (correctable, nonfatal, fatal).", "function", "severity")
	famGPUNICPath = family("grdma_gpu_nic_path_info", prometheus.GaugeValue,
		"Always 1: the PCIe path type between a GPU (its PCI function) and an RDMA device as nvidia-smi topo -m names it (PIX, PXB, PHB, NODE, SYS), NCCL's name for it, and whether NCCL's default NCCL_NET_GDR_LEVEL (PXB) lets NCCL use GPUDirect RDMA on it.", "gpu", "device", "path", "nccl_path", "gdr_path_allows")
	famGPUNCCLNIC = family("grdma_gpu_nccl_device_info", prometheus.GaugeValue,
		"Always 1: the RDMA device NCCL would use for a GPU's first channel (NCCL 2.27-2.30's choice: the fastest, then closest), with the path type.", "gpu", "device", "path")
	famReadErrors = family("grdma_export_read_errors", prometheus.GaugeValue,
		"Parts of devices and ports this export could not read (what: devices, device, ports, counters, pma, gids, resources, pcie).")
	famReadError = family("grdma_export_read_error", prometheus.GaugeValue,
		"1 for each part of a device or port this export could not read.", "device", "port", "what")
	famScrapeErrors = family("grdma_exporter_read_errors_total", prometheus.CounterValue,
		"Parts of devices and ports that could not be read, summed over every reading since the collector was made (scrapes less than a second apart share one).", "what")
	famDuration = family("grdma_exporter_collect_duration_seconds", prometheus.GaugeValue,
		"How long the last collection took.")
)

// Families lists every metric family the collectors of this package can
// export, in the order of the README's metrics table.
var Families = []*Family{
	famPortState, famPortActive, famPortPhys, famPortRate, famPortMTU, famPortWidth, famPortInfo,
	famGIDInfo, famGIDIndex, famHWCounter, famRcvBytes, famXmitBytes,
	famDeviceInfo, famResources,
	famCheckStatus, famCheckRun,
	famPCIeDegraded, famPCIeSpeed, famPCIeCapSpeed, famPCIeWidth, famPCIeCapWidth, famPCIeAER, famGPUNICPath, famGPUNCCLNIC,
	famReadErrors, famReadError, famScrapeErrors, famDuration,
}

// pcieFamilies are exported with Options.PCIe only.
var pcieFamilies = []*Family{famPCIeDegraded, famPCIeSpeed, famPCIeCapSpeed, famPCIeWidth, famPCIeCapWidth, famPCIeAER, famGPUNICPath, famGPUNCCLNIC}

// MarkdownTable returns the metrics table of the README: one row per
// family with its type, labels and help.
func MarkdownTable() string { return Table(Families) }

// Table returns a metrics table of the README for fams.
func Table(fams []*Family) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, f := range fams {
		typ := f.Kind()
		labels := make([]string, len(f.Labels))
		for i, l := range f.Labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, typ, strings.Join(labels, " "), strings.ReplaceAll(f.Help, "|", "\\|"))
	}
	return b.String()
}

// ReplaceTable returns readme with its table name (between the lines
// "<!-- NAME: generated by ... -->" and "<!-- end of NAME -->") made
// Table(fams), and whether that changed it: the README's metrics tables
// are checked (and regenerated) by tests with it.
func ReplaceTable(readme, name string, fams []*Family) (string, bool, error) {
	begin, end := "<!-- "+name+": generated by ", "<!-- end of "+name+" -->"
	i := strings.Index(readme, begin)
	if i < 0 {
		return readme, false, fmt.Errorf("no line starting %q", begin)
	}
	i += strings.Index(readme[i:], "\n") + 1
	j := strings.Index(readme, end)
	if j < i {
		return readme, false, fmt.Errorf("no line %q after %q", end, begin)
	}
	want := Table(fams)
	return readme[:i] + want + readme[j:], readme[i:j] != want, nil
}

// emitter sends metrics once per label set: two readings of one scrape
// that disagree (a device renamed between them) must not make the same
// series twice, which would fail the whole scrape.
type emitter struct {
	ch   chan<- prometheus.Metric
	seen map[string]bool
}

func (e *emitter) emit(f *Family, v float64, labels ...string) {
	key := f.Name + "\xff" + strings.Join(labels, "\xff")
	if e.seen[key] {
		return
	}
	e.seen[key] = true
	for i, l := range labels {
		// Label values must be UTF-8; a netdev name need not be.
		if !utf8.ValidString(l) {
			labels[i] = strings.ToValidUTF8(l, "\uFFFD")
		}
	}
	e.ch <- prometheus.MustNewConstMetric(f.desc, f.Type, v, labels...)
}
