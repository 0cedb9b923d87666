package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/internal/rdmacompat"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/mdlayher/netlink"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var kernels = []string{"6.1", "6.12"}

func recorded(kernel string) string { return filepath.Join("..", "..", "testdata", "nldev", kernel) }

// runGrdma runs one command line against a kernel that answers from the
// recordings in dir.
func runGrdma(t *testing.T, k *nlfixture.Kernel, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	a.dial = func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil }
	code = a.main(args)
	return out.String(), errOut.String(), code
}

func standardKernel(kv string) *nlfixture.Kernel {
	return nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).Standard()
}

// TestOutputMatchesRdma compares grdma with what iproute2 rdma printed for
// the same recorded kernel state (Debian's rdma 6.1: fields added to rdma
// since are removed from grdma's output first, see rdmacompat).
func TestOutputMatchesRdma(t *testing.T) {
	cases := []struct {
		args []string
		file string
	}{
		{[]string{"dev"}, "dev.txt"},
		{[]string{"-d", "dev"}, "dev-d.txt"},
		{[]string{"-j", "dev"}, "dev.json"},
		{[]string{"dev", "-j", "-d"}, "dev-d.json"},
		{[]string{"-j", "-p", "dev"}, "dev-p.json"},
		{[]string{"-jpd", "dev"}, "dev-pd.json"},
		{[]string{"-j", "dev", "show", "rxe1"}, "dev-rxe1.json"},
		{[]string{"link"}, "link.txt"},
		{[]string{"-d", "link"}, "link-d.txt"},
		{[]string{"link", "-j"}, "link.json"},
		{[]string{"-j", "-d", "link"}, "link-d.json"},
		{[]string{"-j", "-p", "link"}, "link-p.json"},
		{[]string{"l", "sh", "rxe0/1"}, "link-rxe0-1.txt"},
		{[]string{"sys"}, "sys.txt"},
	}
	for _, kv := range kernels {
		info, err := os.ReadFile(filepath.Join(recorded(kv), "info.txt"))
		if err != nil {
			t.Fatal(err)
		}
		ver, err := rdmacompat.ParseVersion(string(info))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			t.Run(kv+"/"+strings.Join(c.args, "_"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(recorded(kv), "rdma", c.file))
				if err != nil {
					t.Fatal(err)
				}
				got, stderr, code := runGrdma(t, standardKernel(kv), c.args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				diff, err := rdmacompat.DiffOutput(want, []byte(got), strings.HasSuffix(c.file, ".json"), ver)
				if err != nil {
					t.Fatal(err)
				}
				if diff != "" {
					t.Errorf("grdma %s differs from rdma:\n%s", strings.Join(c.args, " "), diff)
				}
			})
		}
	}
}

// TestGolden pins grdma's own output byte for byte, including what rdma
// 6.1 lacks (protocol, monitor) and JSON for sys.
func TestGolden(t *testing.T) {
	cases := [][]string{
		{"dev"}, {"-d", "dev"}, {"-j", "dev"}, {"-j", "-p", "-d", "dev"}, {"-o", "-d", "dev"},
		{"link"}, {"-d", "link"}, {"-j", "link"}, {"link", "show", "rxe1"},
		{"sys"}, {"-j", "sys"}, {"-j", "-p", "sys"},
	}
	for _, kv := range kernels {
		for _, args := range cases {
			name := kv + "_" + strings.ReplaceAll(strings.Join(args, "_"), "-", "")
			t.Run(name, func(t *testing.T) {
				got, stderr, code := runGrdma(t, standardKernel(kv), args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				checkGolden(t, name, got)
			})
		}
	}
}

func TestEmptyMachine(t *testing.T) {
	k := nlfixture.NewKernel(filepath.Join(recorded("6.12"), "nl-empty")).Standard()
	for args, want := range map[string]string{"-j dev": "[]\n", "dev": "", "-j link": "[]\n", "link": ""} {
		got, stderr, code := runGrdma(t, k, strings.Fields(args)...)
		if code != 0 || got != want {
			t.Errorf("grdma %s: exit %d, output %q (stderr %q); want %q", args, code, got, stderr, want)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []errorCase{
		{"frobnicate", exitUsage, `unknown object "frobnicate"`},
		{"dev frob", exitUsage, `unknown command "frob": expected add, delete, show, list, set, info, help`},
		{"link add rxe0 type rxe", exitUsage, "link add needs type TYPE and netdev NETDEV"},
		{"link add rxe0 type rxe netdev", exitUsage, "missing netdev value"},
		{"link add rx/e0 type rxe netdev veth0", exitUsage, "contains '/'"},
		{"link delete", exitUsage, "missing device name"},
		{"link delete nosuch", exitFailed, "RDMA device nosuch not found (devices: rxe0, rxe1)"},
		{"dev show nosuch", exitFailed, "RDMA device nosuch not found (devices: rxe0, rxe1)"},
		{"link show rxe0/0", exitUsage, "ports are numbered from 1"},
		{"link show rxe0/2", exitFailed, "RDMA device rxe0 has no port 2 (it has 1)"},
		{"link show rxe0/x", exitUsage, `invalid port "x"`},
		{"dev set rxe0 adaptive-moderation maybe", exitUsage, "must be on or off"},
		{"dev set rxe0 netns /nonexistent/ns", exitFailed, "network namespace /nonexistent/ns not found"},
		{"sys set netns both", exitUsage, `unknown netns mode "both"`},
		{"--bogus dev", exitUsage, "unknown flag: --bogus"},
	}
	checkErrorCases(t, func() *nlfixture.Kernel { return standardKernel("6.12") }, cases)
}

// errorCase is a command line that must fail with an exit status and a
// message.
type errorCase struct {
	args   string
	code   int
	stderr string
}

// checkErrorCases runs each case against a fresh kernel from newKernel.
func checkErrorCases(t *testing.T, newKernel func() *nlfixture.Kernel, cases []errorCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			out, stderr, code := runGrdma(t, newKernel(), strings.Fields(c.args)...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, stderr, out, c.code, c.stderr)
			}
		})
	}
}

// TestUnknownLinkShowsPortsOfDevice: rdma rejects "link show DEV"; grdma
// lists all its ports.
func TestLinkShowDevice(t *testing.T) {
	got, _, code := runGrdma(t, standardKernel("6.12"), "link", "show", "rxe1")
	if code != 0 || got != "link rxe1/1 state ACTIVE physical_state LINK_UP netdev veth1 \n" {
		t.Fatalf("exit %d, output %q", code, got)
	}
}

func TestBatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cmds")
	os.WriteFile(file, []byte("# comment\ndev show rxe0\n\nlink show rxe1/1\n"), 0o644)
	got, stderr, code := runGrdma(t, standardKernel("6.12"), "-b", file)
	if code != 0 || !strings.HasPrefix(got, "0: rxe0: node_type ca protocol roce") || !strings.HasSuffix(got, "link rxe1/1 state ACTIVE physical_state LINK_UP netdev veth1 \n") {
		t.Fatalf("exit %d, output %q, stderr %q", code, got, stderr)
	}

	// A failing line stops the batch unless -f is given; either way exit 1.
	os.WriteFile(file, []byte("dev show nosuch\ndev show rxe1\n"), 0o644)
	got, stderr, code = runGrdma(t, standardKernel("6.12"), "-b", file)
	if code != exitFailed || got != "" || !strings.Contains(stderr, "command failed "+file+":1") {
		t.Fatalf("without -f: exit %d, output %q, stderr %q", code, got, stderr)
	}
	got, _, code = runGrdma(t, standardKernel("6.12"), "-f", "-b", file)
	if code != exitFailed || !strings.HasPrefix(got, "1: rxe1:") {
		t.Fatalf("with -f: exit %d, output %q", code, got)
	}

	// Options of one line do not leak into the next.
	os.WriteFile(file, []byte("-j dev show rxe0\ndev show rxe1\n"), 0o644)
	got, _, _ = runGrdma(t, standardKernel("6.12"), "-b", file)
	if lines := strings.Split(got, "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "[{") || !strings.HasPrefix(lines[len(lines)-2], "1: rxe1:") {
		t.Fatalf("output %q", got)
	}
}

func TestVersion(t *testing.T) {
	got, _, code := runGrdma(t, standardKernel("6.12"), "-V")
	if code != 0 || !strings.HasPrefix(got, "grdma ") {
		t.Fatalf("exit %d output %q", code, got)
	}
}

// TestVanishedDeviceIsSkipped: rxe1 disappears after the device dump (the
// kernel's real EINVAL for an unknown index answers everything about it);
// listings of every device leave it out, as a moment later they would.
func TestVanishedDeviceIsSkipped(t *testing.T) {
	gone := func(k *nlfixture.Kernel) *nlfixture.Kernel {
		for _, r := range []nlfixture.Request{
			{Cmd: nldev.CmdGet, Dev: 1, Port: -1},
			{Cmd: nldev.CmdPortGet, Dump: true, Dev: 1, Port: -1},
			{Cmd: nldev.CmdStatGet, Dev: 1, Port: 1},
		} {
			k.On(r, "get_doit_bad_index.bin")
		}
		return k
	}
	out, stderr, code := runGrdma(t, gone(standardKernel("6.12")), "link")
	if code != 0 || out != "link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0 \n" || stderr != "" {
		t.Fatalf("link: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = runGrdma(t, gone(statKernel("6.12")), "-j", "stat")
	if code != 0 || !strings.HasPrefix(out, `[{"ifname":"rxe0","port":1,`) || strings.Contains(out, "rxe1") || stderr != "" {
		t.Fatalf("stat: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	// Asked for by name, a vanished device is an error.
	if _, _, code := runGrdma(t, gone(standardKernel("6.12")), "link", "show", "rxe1"); code != exitFailed {
		t.Fatalf("link show rxe1: exit %d, want 1", code)
	}
}

// TestOnlyDeviceVanishes: a listing of every port skips a device that
// vanished even when it was the only one (found by the churn test: a
// single port used to count as asked for by name).
func TestOnlyDeviceVanishes(t *testing.T) {
	src := filepath.Join(recorded("6.12"), "stat", "nl")
	dir := t.TempDir()
	msgs, err := nlfixture.Load(filepath.Join(src, "get_dump.bin"))
	if err != nil || len(msgs) < 3 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	var dump []byte
	for _, m := range []netlink.Message{msgs[0], msgs[len(msgs)-1]} { // rxe0, then DONE
		b, _ := m.MarshalBinary()
		dump = append(dump, b...)
	}
	os.WriteFile(filepath.Join(dir, "get_dump.bin"), dump, 0o644)
	bad, _ := os.ReadFile(filepath.Join(src, "get_doit_bad_index.bin"))
	os.WriteFile(filepath.Join(dir, "gone.bin"), bad, 0o644)
	k := nlfixture.NewKernel(dir).Standard().
		On(nlfixture.Request{Cmd: nldev.CmdGet, Dev: 0, Port: -1}, "gone.bin").
		On(nlfixture.Request{Cmd: nldev.CmdStatGet, Dev: 0, Port: 1}, "gone.bin")
	out, stderr, code := runGrdma(t, k, "-j", "stat", "show")
	if code != 0 || out != "[]\n" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestBatchMisuse: -b inside a batch line would recurse (once ~20,000
// levels deep); -b with a command would ignore one of them. Both are usage
// errors naming the problem.
func TestBatchMisuse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cmds")
	os.WriteFile(file, []byte("dev show rxe0\n-b "+file+"\n"), 0o644)
	out, stderr, code := runGrdma(t, standardKernel("6.12"), "-f", "-b", file)
	if code != exitUsage || !strings.Contains(stderr, "a batch line cannot use -b") || !strings.Contains(stderr, file+":2") || strings.Count(out, "rxe0:") != 1 {
		t.Fatalf("-b in a batch line: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, args := range [][]string{{"-b", file, "dev", "show"}, {"dev", "-b", file}, {"-b", file, "frob"}} {
		out, stderr, code := runGrdma(t, standardKernel("6.12"), args...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, "-b "+file+" runs the commands of the file: give no command with it") {
			t.Errorf("grdma %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, stderr)
		}
	}
}

// TestBatchNetnsPerLine: a line's -n applies to that line only. The
// client used to be dialled once, in the namespace of the first line
// that needed it, and reused for every later line.
func TestBatchNetnsPerLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cmds")
	os.WriteFile(file, []byte("dev\n-n blue dev\ndev\n-n blue dev\n"), 0o644)
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	var dialled []string
	a.dial = func() (*nldev.Client, error) {
		dialled = append(dialled, a.opts.netns)
		if a.opts.netns == "blue" { // a namespace that sees no device
			return nldev.NewClient(nlfixture.NewKernel(filepath.Join(recorded("6.12"), "nl-empty")).Standard().Conn()), nil
		}
		return nldev.NewClient(standardKernel("6.12").Conn()), nil
	}
	if code := a.main([]string{"-b", file}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "0: rxe0:"); n != 2 {
		t.Errorf("rxe0 listed %d times, want 2 (lines 1 and 3); output:\n%s", n, out.String())
	}
	if !slices.Equal(dialled, []string{"", "blue", "", "blue"}) {
		t.Errorf("dialled namespaces %q, want one per change of -n", dialled)
	}
	// -n on the command line is every line's default.
	out.Reset()
	dialled = nil
	os.WriteFile(file, []byte("dev\n-n blue dev\n"), 0o644)
	a.opts = globalOptions{}
	if code := a.main([]string{"-n", "blue", "-b", file}); code != 0 || out.String() != "" || !slices.Equal(dialled, []string{"blue"}) {
		t.Errorf("-n blue -b: exit %d, output %q, dialled %q", code, out.String(), dialled)
	}
}

// TestEveryObjectAbbreviates: each object of the command tree is in
// cmdline.Objects, the table abbreviations are resolved with.
func TestEveryObjectAbbreviates(t *testing.T) {
	root := newApp(strings.NewReader(""), io.Discard, io.Discard).newRoot()
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !slices.ContainsFunc(append(c.Aliases, c.Name()), func(n string) bool { return slices.Contains(cmdline.Objects, n) }) {
			t.Errorf("object %q is not in cmdline.Objects: it cannot be abbreviated", c.Name())
		}
	}
}

// TestReportEscapesErrors: an error that quotes a peer's failure message
// reaches stderr with its terminal controls escaped, its own line breaks
// kept.
func TestReportEscapesErrors(t *testing.T) {
	var errOut strings.Builder
	a := newApp(strings.NewReader(""), io.Discard, &errOut)
	err := fmt.Errorf("probe rxe0/1 failed at peer_test: %w\n  likely cause: x", &verbsprobe.RemoteFailure{Step: "verify", Message: "\r\x1b[2KPASS\x1b]52;c;eA==\x07\xc2\x9b"})
	if code := a.report(err); code != exitFailed {
		t.Errorf("exit %d", code)
	}
	want := `grdma: probe rxe0/1 failed at peer_test: the peer failed at verify: \x0d\x1b[2KPASS\x1b]52;c;eA==\x07\xc2\x9b` + "\n  likely cause: x\n"
	if errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}
