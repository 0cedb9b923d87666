package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var timeZero time.Time

// TestExportParsesWithPrometheus writes the textfile from the recorded
// kernel and reads it back with Prometheus' own parser.
func TestExportParsesWithPrometheus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rdma.prom")
	_, stderr, code := runGrdma(t, statKernel("6.12"), "stat", "export", "--textfile", path, "--sysfs-root", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(f)
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
	k.On(nlfixtureGetDump(), "missing.bin")
	_, _, code := runGrdma(t, k, "stat", "export", "--textfile", path)
	b, _ := os.ReadFile(path)
	if code != exitFailed || string(b) != "old\n" {
		t.Fatalf("exit %d, file %q", code, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("leftovers: %v", entries)
	}
}
