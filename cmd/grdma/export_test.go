package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"

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
		{Cmd: nldev.CmdStatGet, Dev: 1, Port: 1},
	} {
		k.On(r, "get_doit_bad_index.bin")
	}
	_, stderr, code := runGrdma(t, k, "stat", "export", "--textfile", path, "--sysfs-root", t.TempDir())
	b, _ := os.ReadFile(path)
	text := string(b)
	if code != 0 || stderr != "" || !strings.Contains(text, `device="rxe0"`) || strings.Contains(text, `device="rxe1"`) ||
		!strings.Contains(text, "\ngrdma_export_read_errors 0\n") {
		t.Fatalf("exit %d, stderr %q, file:\n%s", code, stderr, text)
	}
}

// TestExportReportsReadErrors: a rate that cannot be read (here: a
// directory where the file should be) is exported as a read error and
// reported, with the rest of the metrics; it used to be dropped silently.
func TestExportReportsReadErrors(t *testing.T) {
	root := copyTree(t, sysfsFixture("rxe-6.12"))
	rate := filepath.Join(root, "sys/devices/virtual/infiniband/rxe1/ports/1/rate")
	os.Remove(rate)
	os.Mkdir(rate, 0o755)
	path := filepath.Join(t.TempDir(), "rdma.prom")
	_, stderr, code := runGrdma(t, statKernel("6.12"), "stat", "export", "--textfile", path, "--sysfs-root", root)
	b, _ := os.ReadFile(path)
	text := string(b)
	if code != exitFailed || !strings.Contains(stderr, "rxe1/1: rate: ") ||
		!strings.Contains(text, "\ngrdma_export_read_errors 1\n") || !strings.Contains(text, `grdma_export_read_error{device="rxe1",port="1",what="rate"} 1`) ||
		!strings.Contains(text, `grdma_port_rate_bytes_per_second{device="rxe0",port="1"}`) || !strings.Contains(text, `counter="rdma_sends"`) {
		t.Fatalf("exit %d, stderr %q, file:\n%s", code, stderr, text)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Fatalf("Prometheus cannot parse the export: %v", err)
	}
}
