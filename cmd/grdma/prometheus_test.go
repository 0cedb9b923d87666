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

// TestTextfileDirRefused: check --textfile and stat export --textfile
// refuse, before any work, a directory another account may write in
// without the sticky bit (exit 1, naming the mode and the fix) and a
// directory that does not exist; a sticky one is used.
func TestTextfileDirRefused(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{
		{0o777, "is writable by group and others (mode 0777) without the sticky bit: another account could replace the files written there; make it writable by its owner only (chmod go-w DIR) or set the sticky bit (chmod +t DIR)\n"},
		{0o775, "is writable by its group (mode 0775) without the sticky bit"},
		{0, "open DIR: no such file or directory\n"},
		{os.ModeSticky | 0o777, ""},
	} {
		dir := filepath.Join(t.TempDir(), "textfile")
		if c.mode != 0 {
			os.Mkdir(dir, 0o700)
			os.Chmod(dir, c.mode)
		}
		want := strings.ReplaceAll(c.want, "DIR", dir)
		for _, args := range [][]string{
			{"--sysfs-root", sysfsFixture("rxe-6.12"), "check", "ports", "--textfile", filepath.Join(dir, "check.prom")},
			{"--sysfs-root", sysfsFixture("rxe-6.12"), "stat", "export", "--textfile", filepath.Join(dir, "rdma.prom")},
		} {
			out, stderr, code := runGrdma(t, exportKernel(), args...)
			entries, _ := os.ReadDir(dir)
			_, werr := os.Stat(args[len(args)-1])
			switch {
			case want == "" && (code != 0 || werr != nil):
				t.Errorf("%04o: %q: exit %d, stderr %q, wrote %v", c.mode, args, code, stderr, entries)
			case want != "" && (code != exitFailed || out != "" || !strings.Contains(stderr, want) || len(entries) != 0):
				t.Errorf("%04o: %q: exit %d, stdout %q, stderr %q, wrote %v; want exit 1, nothing done, and %q", c.mode, args, code, out, stderr, entries, want)
			}
			if want != "" && !strings.HasPrefix(stderr, "grdma: ") {
				t.Errorf("stderr %q", stderr)
			}
		}
		// A wrong command line is still exit 2, whatever the directory.
		if _, stderr, code := runGrdma(t, exportKernel(), "check", "bogus", "--textfile", filepath.Join(dir, "check.prom")); code != exitUsage {
			t.Errorf("%04o: check bogus: exit %d, stderr %q; want 2", c.mode, code, stderr)
		}
	}
}
