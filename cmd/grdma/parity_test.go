package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/internal/rdmacompat"
)

// parityRecorded is where the recordings of the rdma 7.1 commands are
// (testdata/nldev/parity/README.md): kernel replies and what Debian's rdma
// did with the same command lines.
func parityRecorded(kv string) string {
	return filepath.Join("..", "..", "testdata", "nldev", "parity", kv)
}

func parityKernel(kv string) *nlfixture.Kernel {
	return nlfixture.NewKernel(filepath.Join(parityRecorded(kv), "nl")).Standard().Res().Parity()
}

func runParity(t *testing.T, kv string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runGrdma(t, parityKernel(kv), append([]string{"--sysfs-root", filepath.Join(parityRecorded(kv), "root")}, args...)...)
}

// parityDeliberate are the recorded command lines where grdma differs from
// Debian's rdma (iproute2 6.1) on purpose, and what grdma does instead.
var parityDeliberate = map[string]struct {
	code   int
	stderr string
}{
	// Commands rdma 6.1 lacks (it says "Unknown ..." and exits 0); grdma
	// has them, as rdma 7.1 does, and reports the kernel's refusal.
	"res show frmr_pools":                       {exitFailed, "not supported by this kernel"},
	"dev add smi0 type smi parent rxe0":         {exitFailed, "dev add smi0: "},
	"dev delete rxe0":                           {exitFailed, "dev delete rxe0: "},
	"stat qp unbind link rxe0/1 cntn 1":         {exitFailed, "no counter 1 on this port"},
	"stat qp unbind link rxe0/1 cntn 1 lqpn 17": {exitFailed, "unbind QP 17 from counter 1"},
}

// TestParityMatchesRdma runs every recorded rdma command line of the
// parity recordings with grdma: abbreviations resolve to what rdma ran
// (same output), help words exit 0 with a help text, and the new commands
// print what rdma printed, or fail as parityDeliberate says.
func TestParityMatchesRdma(t *testing.T) {
	for _, kv := range kernels {
		info, err := os.ReadFile(filepath.Join(parityRecorded(kv), "info.txt"))
		if err != nil {
			t.Fatal(err)
		}
		ver, err := rdmacompat.ParseVersion(string(info))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parityRecorded(kv), "rdma")
		for _, rc := range rdmaCommandsIn(t, dir) {
			line := strings.Join(rc.args, " ")
			t.Run(kv+"/"+rc.file+"_"+strings.ReplaceAll(line, " ", "_"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(dir, rc.file+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				got, stderr, code := runParity(t, kv, rc.args...)
				if d, ok := parityDeliberate[line]; ok {
					if code != d.code || !strings.Contains(stderr, d.stderr) || got != "" {
						t.Fatalf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, stderr, got, d.code, d.stderr)
					}
					return
				}
				if code != rc.code {
					t.Fatalf("exit %d, rdma exited %d (stderr %q)", code, rc.code, stderr)
				}
				if rc.args[len(rc.args)-1] == "help" {
					// Each tool prints its own help text.
					if got == "" {
						t.Errorf("help printed nothing")
					}
					return
				}
				if rc.args[0] == "st" {
					// rdma before 6.7 printed stat show on one line;
					// grdma prints today's continuation lines.
					got = strings.ReplaceAll(got, "\n    ", "")
				}
				diff, err := rdmacompat.DiffOutput(want, []byte(got), isJSONArgs(rc.args), ver)
				if err != nil {
					t.Fatal(err)
				}
				if diff != "" {
					t.Errorf("grdma %s differs from rdma:\n%s", line, diff)
				}
			})
		}
	}
}

// TestSubDevices: the kernel's refusals of dev add and dev delete on rxe,
// explained: 6.1 has no sub-devices at all (NEWDEV is no command there,
// EINVAL), 6.12 has them but rxe cannot make one (EOPNOTSUPP).
func TestSubDevices(t *testing.T) {
	want := map[string][2]string{
		"6.1":  {"this kernel has no sub-devices", "this kernel has no sub-devices"},
		"6.12": {"the driver of rxe0 cannot create sub-devices", "rxe0 is not a sub-device"},
	}
	for _, kv := range kernels {
		_, stderr, code := runParity(t, kv, "dev", "add", "smi0", "type", "SMI", "parent", "rxe0")
		if code != exitFailed || !strings.Contains(stderr, want[kv][0]) {
			t.Errorf("%s dev add: exit %d, %q; want %q", kv, code, stderr, want[kv][0])
		}
		_, stderr, code = runParity(t, kv, "dev", "delete", "rxe0")
		if code != exitFailed || !strings.Contains(stderr, want[kv][1]) {
			t.Errorf("%s dev delete: exit %d, %q; want %q", kv, code, stderr, want[kv][1])
		}
	}
	for args, msg := range map[string]string{
		"dev add smi0 type gsi parent rxe0":   `invalid device type "gsi": the only type is smi`,
		"dev add smi0 type smi":               "missing parameter",
		"dev add smi0 type smi parent":        "missing parent device",
		"dev add smi0 type smi parent nosuch": "RDMA device nosuch not found",
		"dev delete":                          "missing device name",
		"res set frmr_pools dev rxe0 aging 0": "aging period must be a number of seconds from 1",
	} {
		_, stderr, code := runParity(t, "6.12", strings.Fields(args)...)
		if code == 0 || !strings.Contains(stderr, msg) {
			t.Errorf("%s: exit %d, %q; want %q", args, code, stderr, msg)
		}
	}
}

// TestAbbreviationsAsRdma: object, command and keyword words mean the
// first entry of rdma's table they abbreviate, on the recorded kernel.
func TestAbbreviationsAsRdma(t *testing.T) {
	for short, full := range map[string]string{
		"s":                         "system",
		"sy show":                   "sys show",
		"st":                        "stat show",
		"st m":                      "stat mr",
		"st sh m":                   "stat show mr",
		"r":                         "res",
		"res s c":                   "res show cm_id",
		"res s f":                   "res show frmr_pools",
		"d s rxe0":                  "dev show rxe0",
		"l":                         "link",
		"-j res show qp t rc":       "-j res show qp type rc",
		"-j res show qp st rts":     "-j res show qp state rts",
		"-j res show mr l rxe0":     "-j res show mr dev rxe0",
		"-j res show cq d rxe0 u 1": "-j res show cq dev rxe0 users 1",
		"-j st qp mo":               "-j stat qp mode",
	} {
		got, stderr, code := runParity(t, "6.12", strings.Fields(short)...)
		want, wstderr, wcode := runParity(t, "6.12", strings.Fields(full)...)
		if got != want || stderr != wstderr || code != wcode {
			t.Errorf("grdma %s: exit %d, %q, %q; grdma %s: exit %d, %q, %q", short, code, got, stderr, full, wcode, want, wstderr)
		}
	}
}
