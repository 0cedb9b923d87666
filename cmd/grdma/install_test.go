//go:build !grdma_noprometheus

package main

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMakeInstall runs make install into a temporary DESTDIR and checks
// what lands where, that the binary is static and runs, and that make
// uninstall takes it all away again. It builds grdma, so -short skips it.
func TestMakeInstall(t *testing.T) {
	goPath := needGo(t)
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "root")
	makeArgs := []string{"-C", filepath.Join("..", ".."), "GO=" + goPath, "DESTDIR=" + dest, "PREFIX=/usr",
		"BIN=" + filepath.Join(tmp, "grdma"), "BINPROM=" + filepath.Join(tmp, "grdma-prometheus")} // leave the checkout's bin/ alone
	mk := func(target string) {
		t.Helper()
		out, err := exec.Command(makePath, append(makeArgs, target)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	mk("install")

	for _, name := range []string{"grdma", "grdma-prometheus"} {
		bin := filepath.Join(dest, "usr", "bin", name)
		if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("installed %s is not static (%v)", name, p.Type)
			}
		}
		f.Close()
		out, err := exec.Command(bin, "-V").Output()
		if err != nil || !strings.HasPrefix(string(out), "grdma ") || strings.Contains(string(out), "grdma dev (commit unknown)") {
			t.Errorf("%s -V: %q %v (want the version and commit make set)", name, out, err)
		}
	}
	// The installed grdma hands exporter to the grdma-prometheus next to
	// it, which rejects the address (exit 2) after grdma could not have.
	cmd := exec.Command(filepath.Join(dest, "usr", "bin", "grdma"), "exporter", "--web.listen-address=bogus")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `--web.listen-address "bogus" must be host:port`) {
		t.Errorf("installed grdma exporter: %v\n%s", err, out)
	}

	want, _ := filepath.Glob(filepath.Join(manDir, "*.8"))
	got, _ := filepath.Glob(filepath.Join(dest, "usr", "share", "man", "man8", "*.8"))
	base := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if len(want) == 0 || !slices.Equal(base(want), base(got)) {
		t.Errorf("man pages: installed %q, want %q", base(got), base(want))
	}
	for path, head := range map[string]string{
		"usr/share/bash-completion/completions/grdma":    "# bash completion V2 for grdma",
		"usr/share/zsh/site-functions/_grdma":            "#compdef grdma",
		"usr/share/fish/vendor_completions.d/grdma.fish": "# fish completion for grdma",
	} {
		b, err := os.ReadFile(filepath.Join(dest, path))
		if err != nil || !strings.HasPrefix(string(b), head) {
			t.Errorf("%s: %v, starts %q", path, err, b[:min(len(b), 40)])
		}
	}

	mk("uninstall")
	filepath.WalkDir(dest, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left after uninstall: %s", path)
		}
		return nil
	})
}

// TestGoInstall: go install ./cmd/grdma works too, and the binary takes
// its version from the build information (no -ldflags).
func TestGoInstall(t *testing.T) {
	goPath := needGo(t)
	gobin := t.TempDir()
	cmd := exec.Command(goPath, "install", ".")
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "grdma"), "-V").Output()
	if err != nil || !strings.HasPrefix(string(out), "grdma ") {
		t.Fatalf("grdma -V: %q %v", out, err)
	}
}

// needGo skips a test that builds grdma under -short or without go, and
// returns the go command.
func needGo(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds grdma")
	}
	goPath, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go")
	}
	return goPath
}
