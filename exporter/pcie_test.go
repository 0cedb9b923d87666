package exporter

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
)

// pcieCollector collects the captured switch layout (../pci/testdata)
// with its two display functions as GPUs; netlink is absent, which only
// the RDMA families notice.
func pcieCollector(t *testing.T) *Collector {
	t.Helper()
	fsys, err := sysfs.NewFS("../pci/testdata/switch-6.12")
	if err != nil {
		t.Fatal(err)
	}
	var gpus []pci.Address
	for _, s := range []string{"0000:05:00.0", "0000:0a:00.0"} {
		a, _ := pci.ParseAddress(s)
		gpus = append(gpus, a)
	}
	return New(Options{Sysfs: fsys, PCIe: true, PCIeGPUs: gpus,
		Dial: func() (*nldev.Client, error) { return nil, errors.New("no RDMA netlink in this test") }})
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// TestPCIe: the layout's pairs, NCCL's NICs, its links (none degraded)
// and AER counters are exported, and pass client_golang's lint.
func TestPCIe(t *testing.T) {
	col := pcieCollector(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf.GetMetric()
	}
	for _, f := range pcieFamilies {
		if len(byName[f.Name]) == 0 {
			t.Errorf("%s: not collected", f.Name)
		}
	}
	paths := map[string]int{}
	for _, m := range byName["grdma_gpu_nic_path_info"] {
		l := labelsOf(m)
		paths[l["gpu"]+" "+l["path"]]++
		if (l["path"] == "PIX" || l["path"] == "PXB") != (l["gdr_path_allows"] == "true") {
			t.Errorf("path info %v", l)
		}
	}
	want := map[string]int{"0000:05:00.0 PIX": 2, "0000:05:00.0 PXB": 1, "0000:05:00.0 PHB": 1, "0000:05:00.0 NODE": 1, "0000:05:00.0 SYS": 1,
		"0000:0a:00.0 PHB": 4, "0000:0a:00.0 NODE": 1, "0000:0a:00.0 SYS": 1}
	if len(paths) != len(want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
	for k, n := range want {
		if paths[k] != n {
			t.Errorf("%s: %d pairs, want %d", k, paths[k], n)
		}
	}
	choices := byName["grdma_gpu_nccl_device_info"]
	if len(choices) != 2 || labelsOf(choices[0])["path"] != "PIX" || labelsOf(choices[1])["path"] != "PHB" {
		t.Errorf("NCCL's devices: %v", choices)
	}
	for _, m := range byName["grdma_pcie_link_degraded"] {
		if m.GetGauge().GetValue() != 0 {
			t.Errorf("degraded: %v", labelsOf(m))
		}
	}
	// GPU0's two hops, the VGA's (not PCI Express: no link), six NICs'
	// hops, the switch's shared uplink once: 9 distinct links.
	if n := len(byName["grdma_pcie_link_degraded"]); n != 9 {
		t.Errorf("%d links, want 9", n)
	}
	for _, m := range byName["grdma_pcie_link_transfers_per_second"] {
		if m.GetGauge().GetValue() != 2.5e9 {
			t.Errorf("speed %v %v", labelsOf(m), m.GetGauge().GetValue())
		}
	}
	problems, err := testutil.CollectAndLint(col, "grdma_pcie_link_degraded", "grdma_pcie_link_transfers_per_second",
		"grdma_pcie_link_capable_transfers_per_second", "grdma_pcie_link_width_lanes", "grdma_pcie_link_capable_width_lanes",
		"grdma_pcie_aer_errors_total", "grdma_gpu_nic_path_info", "grdma_gpu_nccl_device_info")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	// Off: none of it.
	off := New(Options{Sysfs: col.opts.Sysfs, Dial: col.opts.Dial})
	if n := testutil.CollectAndCount(off, "grdma_gpu_nic_path_info", "grdma_pcie_link_degraded"); n != 0 {
		t.Errorf("%d PCIe series with the collector off", n)
	}
}
