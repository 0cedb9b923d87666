//go:build !grdma_noprometheus

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exportKernel is the recorded kernel after RC traffic over rxe0, with the
// resource counts of a recording of the same two-device guest.
func exportKernel() *nlfixture.Kernel {
	return statKernel("6.12").On(nlfixture.ResSummaryDump.Req, filepath.Join("..", "..", "..", "res", "6.12", "nl", nlfixture.ResSummaryDump.Name+".bin"))
}

// TestExportParsesWithPrometheus writes the textfile from the recorded
// kernel and sysfs and reads it back with Prometheus' own parser.
func TestExportParsesWithPrometheus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rdma.prom")
	_, stderr, code := runGrdma(t, exportKernel(), "stat", "export", "--textfile", path, "--sysfs-root", sysfsFixture("rxe-6.12"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fams, err := exporter.ReadTextfile(path)
	if err != nil {
		t.Fatalf("Prometheus cannot parse the export: %v", err)
	}
	ctr := fams["grdma_port_hw_counter_total"]
	if ctr == nil || ctr.GetType().String() != "COUNTER" {
		t.Fatalf("no counter family: %v", fams)
	}
	// Every rxe counter of both ports is named.
	names := map[string]float64{}
	for _, m := range ctr.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		names[labels["device"]+"/"+labels["port"]+"/"+labels["counter"]] = m.GetCounter().GetValue()
	}
	if len(names) != 30 || names["rxe0/1/rdma_sends"] != 100 || names["rxe0/1/sent_pkts"] < 500 || names["rxe1/1/rdma_recvs"] != 0 {
		t.Fatalf("%d counters: %v", len(names), names)
	}
	if act := fams["grdma_port_active"]; act == nil || len(act.GetMetric()) != 2 || act.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("port_active: %v", act)
	}
	// What the exporter adds, from the same collectors.
	for name, n := range map[string]int{"grdma_device_info": 2, "grdma_port_roce_v2_ipv4_gid_index": 2, "grdma_port_active_mtu_bytes": 2, "grdma_export_read_errors": 1} {
		if f := fams[name]; f == nil || len(f.GetMetric()) != n {
			t.Errorf("%s: %v, want %d series", name, f, n)
		}
	}
	if f := fams["grdma_export_read_errors"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("read errors: %v", f)
	}
	if f := fams["grdma_device_resources"]; f == nil || len(f.GetMetric()) == 0 {
		t.Errorf("no resource counts: %v", f)
	}
	// No temporary file is left beside the target.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("files beside the export: %v", entries)
	}
}

func TestExportFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdma.prom")
	os.WriteFile(path, []byte("old\n"), 0o644)
	// A kernel that answers nothing: collection fails before writing.
	k := statKernel("6.12")
	k.On(nlfixture.Request{Cmd: nldev.CmdGet, Dump: true, Dev: -1, Port: -1}, "missing.bin")
	_, _, code := runGrdma(t, k, "stat", "export", "--textfile", path)
	b, _ := os.ReadFile(path)
	if code != exitFailed || string(b) != "old\n" {
		t.Fatalf("exit %d, file %q", code, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("leftovers: %v", entries)
	}
}

// TestExportSkipsVanishedDevice: a device that vanishes after the device
// dump is left out of the export, as the other listings leave it out; the
// export used to fail whole, leaving the old file.
func TestExportSkipsVanishedDevice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rdma.prom")
	os.WriteFile(path, []byte("old\n"), 0o644)
	k := statKernel("6.12")
	for _, r := range []nlfixture.Request{
		{Cmd: nldev.CmdGet, Dev: 1, Port: -1},
		{Cmd: nldev.CmdPortGet, Dump: true, Dev: 1, Port: -1},
		{Cmd: nldev.CmdPortGet, Dev: 1, Port: 1},
		{Cmd: nldev.CmdStatGet, Dev: 1, Port: 1},
	} {
		k.On(r, "get_doit_bad_index.bin")
	}
	k.On(nlfixture.ResSummaryDump.Req, filepath.Join("..", "..", "..", "res", "6.12", "nl", nlfixture.ResSummaryDump.Name+".bin"))
	_, stderr, code := runGrdma(t, k, "stat", "export", "--textfile", path, "--sysfs-root", sysfsFixture("rxe-6.12"))
	b, _ := os.ReadFile(path)
	text := string(b)
	if code != 0 || stderr != "" || !strings.Contains(text, `device="rxe0"`) || strings.Contains(text, `device="rxe1"`) ||
		!strings.Contains(text, "\ngrdma_export_read_errors 0\n") {
		t.Fatalf("exit %d, stderr %q, file:\n%s", code, stderr, text)
	}
}

// TestExportReportsReadErrors: a rate that cannot be read (here: a
// directory where the file should be) is exported as a read error of that
// device's ports and reported, with the rest of the metrics; it used to be
// dropped silently.
func TestExportReportsReadErrors(t *testing.T) {
	root := copyTree(t, sysfsFixture("rxe-6.12"))
	rate := filepath.Join(root, "sys/devices/virtual/infiniband/rxe1/ports/1/rate")
	os.Remove(rate)
	os.Mkdir(rate, 0o755)
	path := filepath.Join(t.TempDir(), "rdma.prom")
	_, stderr, code := runGrdma(t, exportKernel(), "stat", "export", "--textfile", path, "--sysfs-root", root)
	b, _ := os.ReadFile(path)
	text := string(b)
	if code != exitFailed || !strings.Contains(stderr, "rxe1: ports: read sys/class/infiniband/rxe1/ports/1/rate: ") ||
		!strings.Contains(text, "\ngrdma_export_read_errors 1\n") || !strings.Contains(text, `grdma_export_read_error{device="rxe1",port="0",what="ports"} 1`) ||
		!strings.Contains(text, `grdma_port_rate_bytes_per_second{device="rxe0",port="1"}`) || !strings.Contains(text, `counter="rdma_sends"`) {
		t.Fatalf("exit %d, stderr %q, file:\n%s", code, stderr, text)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Fatalf("Prometheus cannot parse the export: %v", err)
	}
}
