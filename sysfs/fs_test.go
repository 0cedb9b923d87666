package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestFSConformance: FS passes testing/fstest's checks of fs.FS,
// ReadFileFS, ReadDirFS and ReadLinkFS (Go 1.25+) on a captured tree,
// whose class links are the kernel's relative symlinks.
func TestFSConformance(t *testing.T) {
	fsys, err := NewFS("testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "sys/class/infiniband/rxe0", "sys/class/net/veth0"); err != nil {
		t.Fatal(err)
	}
	target, err := fsys.ReadLink("sys/class/infiniband/rxe0")
	if err != nil || target != "../../devices/virtual/infiniband/rxe0" {
		t.Errorf("ReadLink = %q, %v", target, err)
	}
	info, err := fsys.Lstat("sys/class/infiniband/rxe0")
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat: %v, %v", info, err)
	}
	if _, err := fsys.ReadLink("sys/class/infiniband/rxe0/node_type"); err == nil {
		t.Error("ReadLink of a regular file succeeded")
	}
	var pe *fs.PathError
	if _, err := fsys.Lstat("../etc"); !errors.As(err, &pe) || !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Lstat of a name outside the root: %v", err)
	}
	if _, err := fsys.ReadLink("sys/class/infiniband/mlx5_9"); !errors.Is(err, fs.ErrNotExist) || err.Error() != "readlink sys/class/infiniband/mlx5_9: no such file or directory" {
		t.Errorf("missing link: %v (want the root-relative name)", err)
	}
}

// TestWithProc: proc/ names read from the directory WithProc gives (a
// container's /host/proc), everything else from the root.
func TestWithProc(t *testing.T) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys", "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys", "kernel", "osrelease"), []byte("6.12.0-test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := NewFS("testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := root.WithProc(proc)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fsys.ReadFile("proc/sys/kernel/osrelease"); err != nil || string(b) != "6.12.0-test\n" {
		t.Errorf("proc/sys/kernel/osrelease: %q, %v", b, err)
	}
	if entries, err := fsys.ReadDir("proc"); err != nil || len(entries) != 1 {
		t.Errorf("ReadDir(proc): %v, %v", entries, err)
	}
	if _, err := fsys.Device("rxe0"); err != nil {
		t.Errorf("sys below the root: %v", err)
	}
	if fsys.Path("processes") != filepath.Join(root.Root(), "processes") {
		t.Errorf("a name that only starts with proc: %s", fsys.Path("processes"))
	}
	if _, err := root.WithProc(filepath.Join(proc, "missing")); err == nil {
		t.Error("a missing proc root was accepted")
	}
	back, _ := fsys.WithProc("")
	if back.Path("proc/cpuinfo") != filepath.Join(root.Root(), "proc", "cpuinfo") {
		t.Errorf("WithProc(\"\"): %s", back.Path("proc/cpuinfo"))
	}
}
