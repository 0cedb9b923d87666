package cmconfig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
	"golang.org/x/sys/unix"
)

// The fixtures are what testdata/cmconfig/capture.sh copied from the
// guests' configfs and sysfs: rxe0's port 1 once its directory was made.
var kernels = []string{"6.1", "6.12"}

func fixture(k string) string { return filepath.Join("..", "testdata", "cmconfig", k) }

// copyTree copies a fixture into a temporary root a test may change.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func root(t *testing.T, dir string) sysfs.FS {
	t.Helper()
	fsys, err := sysfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// TestRead: rxe's defaults as the guests' kernels show them.
func TestRead(t *testing.T) {
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			defs, err := Read(root(t, fixture(k)), "rxe0", 0)
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults{Device: "rxe0", Port: 1, RoCEMode: gid.TypeRoCEv2, ToS: 0}
			if len(defs) != 1 || defs[0] != want {
				t.Errorf("%+v, want %+v", defs, want)
			}
			if d, err := Read(root(t, fixture(k)), "rxe0", 1); err != nil || len(d) != 1 {
				t.Errorf("port 1: %+v, %v", d, err)
			}
			_, err = Read(root(t, fixture(k)), "rxe0", 2)
			var nf *ib.NotFoundError
			if !errors.As(err, &nf) || nf.Port != 2 || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("port 2: %v", err)
			}
		})
	}
}

// withConfigfs makes mkdir and rmdir act as configfs does for rxe0: the
// device's directory comes with its ports (from the fixture) and goes
// with them. It counts both.
func withConfigfs(t *testing.T, fixtureDir string) (made, removed *int) {
	t.Helper()
	made, removed = new(int), new(int)
	oldMk, oldRm := mkdir, rmdir
	t.Cleanup(func() { mkdir, rmdir = oldMk, oldRm })
	src := filepath.Join(fixtureDir, Dir, "rxe0")
	mkdir = func(p string) error {
		if filepath.Base(p) != "rxe0" {
			return unix.ENODEV // what configfs answers for a device the CM does not know
		}
		*made++
		tree := copyTree(t, src)
		return os.Rename(tree, p)
	}
	rmdir = func(p string) error { *removed++; return os.RemoveAll(p) }
	return made, removed
}

// TestReadMakesAndRemoves: a device configfs does not show yet is shown
// for the read, and its directory removed again.
func TestReadMakesAndRemoves(t *testing.T) {
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			dir := copyTree(t, fixture(k))
			if err := os.RemoveAll(filepath.Join(dir, Dir, "rxe0")); err != nil {
				t.Fatal(err)
			}
			made, removed := withConfigfs(t, fixture(k))
			defs, err := Read(root(t, dir), "rxe0", 0)
			if err != nil || len(defs) != 1 || defs[0].RoCEMode != gid.TypeRoCEv2 {
				t.Fatalf("%+v, %v", defs, err)
			}
			if *made != 1 || *removed != 1 {
				t.Errorf("made %d, removed %d directories; want 1 each", *made, *removed)
			}
			if _, err := os.Stat(filepath.Join(dir, Dir, "rxe0")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rxe0's directory left behind: %v", err)
			}
			// A device that exists already is not made nor removed.
			withConfigfs(t, fixture(k))
			if _, err := Read(root(t, fixture(k)), "rxe0", 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSet: a setting goes to the port's file as configfs takes it, and
// the port reads back as set.
func TestSet(t *testing.T) {
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			dir := copyTree(t, fixture(k))
			tos := uint8(0x68)
			d, err := Set(root(t, dir), "rxe0", 1, Setting{RoCEMode: gid.TypeRoCEv2, ToS: &tos})
			if err != nil {
				t.Fatal(err)
			}
			if d != (Defaults{Device: "rxe0", Port: 1, RoCEMode: gid.TypeRoCEv2, ToS: 0x68}) {
				t.Errorf("after set: %+v", d)
			}
			port := filepath.Join(dir, Dir, "rxe0", "ports", "1")
			for file, want := range map[string]string{"default_roce_tos": "104\n", "default_roce_mode": "RoCE v2\n"} {
				if b, _ := os.ReadFile(filepath.Join(port, file)); string(b) != want {
					t.Errorf("%s = %q, want %q", file, b, want)
				}
			}
			if _, err := Set(root(t, dir), "rxe0", 3, Setting{ToS: &tos}); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("port 3: %v", err)
			}
		})
	}
}

// TestErrors: no rdma_cm in configfs, a device configfs does not know,
// a bad name.
func TestErrors(t *testing.T) {
	_, err := Read(root(t, t.TempDir()), "rxe0", 0)
	if !errors.Is(err, ErrNoConfigfs) || !strings.Contains(err.Error(), "load rdma_cm (modprobe rdma_ucm)") {
		t.Errorf("no configfs: %v", err)
	}
	dir := copyTree(t, fixture("6.12"))
	withConfigfs(t, fixture("6.12"))
	if _, err := Read(root(t, dir), "mlx5_9", 0); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "mlx5_9") {
		t.Errorf("unknown device: %v", err)
	}
	for _, name := range []string{"", "..", "a/b"} {
		if _, err := Read(root(t, dir), name, 0); err == nil {
			t.Errorf("device %q read", name)
		}
	}
	if _, err := Shown(root(t, t.TempDir()), "rxe0", 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Shown without configfs: %v", err)
	}
	if d, err := Shown(root(t, fixture("6.12")), "rxe0", 1); err != nil || d.RoCEMode != gid.TypeRoCEv2 {
		t.Errorf("Shown: %+v, %v", d, err)
	}
}
