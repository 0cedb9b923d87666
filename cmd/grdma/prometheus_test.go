//go:build !grdma_noprometheus

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/exporter"
)

// Tests of commands the build without Prometheus hands to grdma-prometheus
// (TestNoPrometheus* test the handing over itself).

func TestCheckQuietAndTextfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "check.prom")
	out, stderr, code := checkOn(t, "-q", "ports", "mtu", "4096", "--textfile", path)
	if code != exitFailed || out != "" || stderr != "" {
		t.Fatalf("-q: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	fams, err := exporter.ReadTextfile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fams["grdma_check_status"]
	if st == nil || len(st.GetMetric()) != 2 || st.GetMetric()[0].GetGauge().GetValue() != 2 {
		t.Fatalf("status gauges: %v", st)
	}
	if fams["grdma_check_last_run_timestamp_seconds"] == nil {
		t.Fatal("no timestamp")
	}
}

// TestNetnsRefusedWhereSysfsIsRead: -n reaches RDMA netlink only; commands
// that also read /sys or /dev (of this process's namespace) refuse it
// rather than mix two namespaces' data, as they used to do silently.
func TestNetnsRefusedWhereSysfsIsRead(t *testing.T) {
	textfile := filepath.Join(t.TempDir(), "rdma.prom")
	for _, args := range []string{"port", "gid", "probe rxe0", "check", "check ports", "stat show --pma", "stat export --textfile " + textfile} {
		cmd := strings.Fields(args)[0]
		if strings.HasPrefix(args, "stat") {
			cmd = strings.Join(strings.Fields(args)[:2], " ")
			if strings.Contains(args, "--pma") {
				cmd += " --pma"
			}
		}
		out, stderr, code := runGrdma(t, statKernel("6.12"), append([]string{"-n", "blue"}, strings.Fields(args)...)...)
		want := "grdma: -n blue reaches RDMA netlink only, and " + cmd + " also reads /sys and /dev, which would be this namespace's: run it inside the namespace (ip netns exec blue grdma " + cmd + ")\n"
		if code != exitUsage || stderr != want || out != "" {
			t.Errorf("grdma -n blue %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", args, code, out, stderr, want)
		}
	}
	if _, err := os.Stat(textfile); err == nil {
		t.Errorf("stat export -n wrote %s", textfile)
	}
	// Netlink-only commands take -n.
	for _, args := range []string{"dev", "link", "stat show"} {
		if _, stderr, code := runGrdma(t, statKernel("6.12"), append([]string{"-n", "blue"}, strings.Fields(args)...)...); code != 0 {
			t.Errorf("grdma -n blue %s: exit %d, %s", args, code, stderr)
		}
	}
}
