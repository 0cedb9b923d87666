//go:build grdma_noprometheus

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Run by make test: go test -tags grdma_noprometheus ./cmd/grdma, with the
// rest of the package (the tests of what this build hands over are tagged
// !grdma_noprometheus).

func TestNoPrometheusLinksNoPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "grdma_noprometheus", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/prometheus/") || pkg == "github.com/grdma/grdma/exporter" {
			t.Errorf("the build without Prometheus links %s", pkg)
		}
	}
}

func TestNoPrometheusFindsTheCompleteBuild(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "grdma")
	next := filepath.Join(dir, prometheusBinary)
	noPath := func(string) (string, error) { return "", exec.ErrNotFound }
	onPath := func(string) (string, error) { return "/opt/bin/" + prometheusBinary, nil }

	if got, err := findPrometheusBinary(self, onPath); err != nil || got != "/opt/bin/"+prometheusBinary {
		t.Errorf("nothing next to grdma: got %q, %v; want PATH's", got, err)
	}
	_, err := findPrometheusBinary(self, noPath)
	if err == nil || !strings.Contains(err.Error(), "not next to "+self+" or in PATH") || !strings.Contains(err.Error(), "make install installs both") {
		t.Errorf("missing: error %v", err)
	}
	os.WriteFile(next, []byte("#!/bin/sh\n"), 0o644) // not executable: not taken
	if got, _ := findPrometheusBinary(self, onPath); got == next {
		t.Errorf("took a file that is not executable")
	}
	os.Chmod(next, 0o755)
	if got, err := findPrometheusBinary(self, onPath); err != nil || got != next {
		t.Errorf("next to grdma: got %q, %v; want %q", got, err, next)
	}
}

// TestNoPrometheusExecs runs this test binary as grdma (helperMain) with a
// grdma-prometheus on PATH that prints what it was given.
func TestNoPrometheusExecs(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"args: $*\"\necho \"guard: $" + execGuard + "\"\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, prometheusBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"exporter", "--web.listen-address=127.0.0.1:0", "--collector.check"},
		{"stat", "export", "--textfile", "/tmp/x.prom"},
		{"-j", "check", "ports", "--textfile", "/tmp/c.prom"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoPrometheusHelperMain$")
		cmd.Env = append(os.Environ(), "PATH="+dir+":/usr/bin:/bin", "GRDMA_TEST_MAIN="+strings.Join(args, "\x1f"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("%q: want the companion's exit 3, got %v: %s", args, err, out)
		}
		want := "args: " + strings.Join(args, " ") + "\nguard: 1\n"
		if string(out) != want {
			t.Errorf("%q: companion printed %q, want %q", args, out, want)
		}
	}
}

func TestNoPrometheusHelperMain(t *testing.T) {
	args := os.Getenv("GRDMA_TEST_MAIN")
	if args == "" {
		t.Skip("run by TestNoPrometheusExecs")
	}
	os.Exit(newApp(os.Stdin, os.Stdout, os.Stderr).main(strings.Split(args, "\x1f")))
}

func TestNoPrometheusRefusals(t *testing.T) {
	k := standardKernel("6.12")
	file := filepath.Join(t.TempDir(), "cmds")
	os.WriteFile(file, []byte("dev show rxe0\nstat export --textfile /tmp/x.prom\n"), 0o644)
	_, stderr, code := runGrdma(t, k, "-b", file)
	if code != exitFailed || !strings.Contains(stderr, "grdma stat export in a batch needs the Prometheus packages") || !strings.Contains(stderr, "run the batch with grdma-prometheus -b") {
		t.Errorf("batch: exit %d, stderr %q", code, stderr)
	}
	t.Setenv(execGuard, "1")
	_, stderr, code = runGrdma(t, k, "exporter")
	if code != exitFailed || !strings.Contains(stderr, "is itself built without the Prometheus packages") {
		t.Errorf("exec loop: exit %d, stderr %q", code, stderr)
	}
}

// TestNoPrometheusCompletesExporterFlags: the exporter's flags are
// completed by grdma-prometheus, which knows them.
func TestNoPrometheusCompletesExporterFlags(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$*\" = '__complete exporter --collector.check --web' ] && [ \"$GRDMA_PROMETHEUS_EXEC\" = 1 ] || exit 1\nprintf -- '--web.listen-address\\tlisten on ADDR\\n:4\\n'\n"
	if err := os.WriteFile(filepath.Join(dir, prometheusBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	out, _, code := runGrdma(t, standardKernel("6.12"), "__complete", "exporter", "--collector.check", "--web")
	if code != 0 || !strings.HasPrefix(out, "--web.listen-address\tlisten on ADDR\n:4\n") {
		t.Errorf("exit %d, completions %q", code, out)
	}
}

// TestNoPrometheusCompletionLoop: a grdma-prometheus that is itself this
// build (it runs with the guard set) completes nothing instead of asking
// the next one, forever.
func TestNoPrometheusCompletionLoop(t *testing.T) {
	t.Setenv(execGuard, "1")
	out, _, code := runGrdma(t, standardKernel("6.12"), "__complete", "exporter", "--web")
	if code != 0 || out != ":4\n" {
		t.Errorf("exit %d, completions %q; want none", code, out)
	}
}
