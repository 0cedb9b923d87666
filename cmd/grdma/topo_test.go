package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func pciFixture(name string) string { return filepath.Join("..", "..", "pci", "testdata", name) }

// topoOn runs grdma on a captured PCI tree.
func topoOn(t *testing.T, tree string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("NCCL_NET_GDR_LEVEL", "")
	return runGrdma(t, standardKernel("6.12"), append([]string{"--sysfs-root", pciFixture(tree)}, args...)...)
}

// TestTopoGolden: grdma topo's text on the captured switch layout, the
// two display functions named as GPUs (testdata/golden/topo-switch.txt;
// -update rewrites it).
func TestTopoGolden(t *testing.T) {
	out, stderr, code := topoOn(t, "switch-6.12", "topo", "gpu", "0000:05:00.0", "0000:0a:00.0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden := filepath.Join("testdata", "golden", "topo-switch.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestTopoJSON: -j is the topology's own encoding, with class names.
func TestTopoJSON(t *testing.T) {
	out, _, code := topoOn(t, "switch-6.12", "-j", "topo", "gpu", "0000:05:00.0", "gdr-level", "SYS", "platform", "bare-metal")
	var top struct {
		GPUs     []struct{ Name string }
		NICs     []struct{ Device string }
		Matrix   [][]string
		GDRLevel string `json:"gdr_level"`
		Virtual  struct{ Likely bool }
		Choices  []struct {
			NIC string
			GDR struct {
				PathAllows bool `json:"path_allows"`
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &top) != nil {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if len(top.GPUs) != 1 || len(top.NICs) != 6 || len(top.Matrix) != 7 || top.Matrix[0][0] != "X" || top.GDRLevel != "SYS" ||
		top.Virtual.Likely || len(top.Choices) != 1 || !top.Choices[0].GDR.PathAllows {
		t.Errorf("%s", out)
	}
}

// TestTopoUsage: wrong words exit 2, a GPU that is not there 1 (2 for
// check, whose checks could not run).
func TestTopoUsage(t *testing.T) {
	for _, tt := range []struct {
		args string
		code int
		msg  string
	}{
		{"topo gpu", exitUsage, "missing PCI address after gpu"},
		{"topo gpu 3b", exitUsage, "gpu wants PCI addresses"},
		{"topo gdr-level NODE", exitUsage, `NCCL_NET_GDR_LEVEL "NODE"`},
		{"topo platform cloud", exitUsage, `unknown platform "cloud"`},
		{"topo frob", exitUsage, `unknown parameter "frob"`},
		{"topo gpu 0000:3b:00.0", exitFailed, "gpu 0000:3b:00.0: no such PCI function"},
		// check: the checks cannot run as asked
		{"check gdr gpu 0000:3b:00.0", exitUsage, "gdr: gpu 0000:3b:00.0: no such PCI function"},
	} {
		_, stderr, code := topoOn(t, "switch-6.12", strings.Fields(tt.args)...)
		if code != tt.code || !strings.Contains(stderr, tt.msg) {
			t.Errorf("%s: exit %d %q, want %d %q", tt.args, code, stderr, tt.code, tt.msg)
		}
	}
	t.Setenv("NCCL_NET_GDR_LEVEL", "BAD")
	_, stderr, code := runGrdma(t, standardKernel("6.12"), "--sysfs-root", pciFixture("switch-6.12"), "topo")
	if code != exitUsage || !strings.Contains(stderr, "from the environment") {
		t.Errorf("bad NCCL_NET_GDR_LEVEL: exit %d %q", code, stderr)
	}
}

// TestCheckGDRGPUOnly: on the GPU-only layout (no RDMA device), check gdr
// never passes: the node's result says there is nothing to pair with,
// whatever else it says.
func TestCheckGDRGPUOnly(t *testing.T) {
	out, _, code := topoOn(t, "gpu-only-6.12", "-j", "check", "gdr", "gpu", "0000:00:06.0")
	var rep struct {
		Checks []struct{ Status, Subject, Message string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Checks) != 1 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if c := rep.Checks[0]; c.Status == "PASS" || c.Subject != "node" || !strings.Contains(c.Message, "no RDMA device: nothing to do GPUDirect RDMA with") {
		t.Errorf("%+v", c)
	}
}

// TestTopoProcRoot: --proc-root and $GRDMA_PROC_ROOT move /proc away from
// below --sysfs-root (a container's /host/proc): with the captured tree's
// proc the guest's hypervisor CPU flag is a sign of a VM; with an empty
// directory it is not, the signs from sysfs stay. A missing directory is
// an error naming it. $GRDMA_SYSFS_ROOT stands for --sysfs-root (both
// variables were ignored before: execute reset the options to those it
// started from after the flags set their defaults).
func TestTopoProcRoot(t *testing.T) {
	const flag = "the CPU has the hypervisor flag"
	empty := t.TempDir()
	for _, tt := range []struct {
		name, env  string
		args       []string
		hypervisor bool
	}{
		{"below sysfs root", "", nil, true},
		{"flag", "", []string{"--proc-root", empty}, false},
		{"environment", empty, nil, false},
		{"flag over environment", empty, []string{"--proc-root", filepath.Join(pciFixture("switch-6.12"), "proc")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GRDMA_PROC_ROOT", tt.env)
			out, stderr, code := topoOn(t, "switch-6.12", append(tt.args, "topo", "gpu", "0000:05:00.0")...)
			if code != 0 || strings.Contains(out, flag) != tt.hypervisor || !strings.Contains(out, "DMI names a hypervisor: QEMU") {
				t.Errorf("exit %d, hypervisor flag said %v, want %v:\n%s%s", code, strings.Contains(out, flag), tt.hypervisor, out, stderr)
			}
		})
	}
	t.Setenv("GRDMA_PROC_ROOT", "")
	t.Setenv("GRDMA_SYSFS_ROOT", pciFixture("switch-6.12"))
	if out, stderr, code := runGrdma(t, standardKernel("6.12"), "topo", "gpu", "0000:05:00.0"); code != 0 || !strings.Contains(out, flag) {
		t.Errorf("$GRDMA_SYSFS_ROOT: exit %d:\n%s%s", code, out, stderr)
	}
	t.Setenv("GRDMA_SYSFS_ROOT", "")
	missing := filepath.Join(empty, "missing")
	if _, stderr, code := topoOn(t, "switch-6.12", "--proc-root", missing, "topo"); code == 0 || !strings.Contains(stderr, missing) {
		t.Errorf("missing proc root: exit %d: %s", code, stderr)
	}
}
