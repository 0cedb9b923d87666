package locator

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

func mustFS(t *testing.T, root string) sysfs.FS {
	t.Helper()
	f, err := sysfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFromSysfs: the node and driver of captured trees.
func TestFromSysfs(t *testing.T) {
	for _, c := range []struct {
		root, dev string
		want      uverbs.Node
	}{
		{"../sysfs/testdata/rxe-6.12", "rxe0", uverbs.Node{Name: "uverbs0", Major: 231, Minor: 192, Driver: "rxe"}},
		{"../sysfs/testdata/hca", "mlx5_0", uverbs.Node{Name: "uverbs0", Major: 231, Minor: 192, Driver: "mlx5_core"}},
	} {
		got, err := FromSysfs(mustFS(t, c.root), c.dev)
		if err != nil || got != c.want {
			t.Errorf("%s %s: %+v %v, want %+v", c.root, c.dev, got, err, c.want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	hca := mustFS(t, "../sysfs/testdata/hca")
	// mlx5 is supported (Open sends its context request): the modelled
	// tree has no dev/, so opening the char device fails.
	if _, err := OpenSysfs(hca, "mlx5_0"); !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "/dev/infiniband/uverbs0") {
		t.Errorf("OpenSysfs(mlx5_0) without dev/ = %v, want ENOENT naming /dev/infiniband/uverbs0", err)
	}
	if _, err := OpenSysfs(hca, "mlx5_3"); !errors.Is(err, sysfs.ErrNoVerbsDevice) {
		t.Errorf("OpenSysfs(mlx5_3) = %v, want sysfs.ErrNoVerbsDevice", err)
	}
	// The captured rxe tree has no dev/: opening the char device fails.
	if _, err := OpenSysfs(mustFS(t, "../sysfs/testdata/rxe-6.12"), "rxe0"); !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "/dev/infiniband/uverbs0") {
		t.Errorf("OpenSysfs(rxe0) without dev/ = %v, want ENOENT naming /dev/infiniband/uverbs0", err)
	}
	if _, err := OpenSysfs(mustFS(t, t.TempDir()), "rxe0"); !errors.Is(err, sysfs.ErrNoVerbsDevice) {
		t.Errorf("OpenSysfs without ib_uverbs = %v, want sysfs.ErrNoVerbsDevice", err)
	}
}

// chardevs answers GET_CHARDEV, or fails.
type chardevs struct {
	ch  nldev.Chardev
	err error
	n   int
}

func (c *chardevs) Chardev(uint32, string) (nldev.Chardev, error) { c.n++; return c.ch, c.err }

// TestOpenPrefersNetlink: the node netlink names is opened (here a node
// that is not there, uverbs7), sysfs only without an answer.
func TestOpenPrefersNetlink(t *testing.T) {
	fsys := mustFS(t, "../sysfs/testdata/rxe-6.12")
	nl := &chardevs{ch: nldev.Chardev{Name: "uverbs7", Dev: 231<<8 | 199, DriverID: uverbs.DriverIDRXE}}
	if _, err := Open(fsys, nl, 1, "rxe0"); nl.n != 1 || !strings.Contains(err.Error(), "/dev/infiniband/uverbs7") {
		t.Errorf("Open with netlink = %v after %d requests, want uverbs7 opened", err, nl.n)
	}
	nl = &chardevs{err: errors.New("no GET_CHARDEV")}
	if _, err := Open(fsys, nl, 1, "rxe0"); nl.n != 1 || !strings.Contains(err.Error(), "/dev/infiniband/uverbs0") {
		t.Errorf("Open without netlink's answer = %v, want sysfs's uverbs0 opened", err)
	}
	if n := FromNetlink(nldev.Chardev{Name: "uverbs0", Dev: 231<<8 | 192, DriverID: 14}); n != (uverbs.Node{Name: "uverbs0", Major: 231, Minor: 192, DriverID: 14}) {
		t.Errorf("FromNetlink = %+v", n)
	}
}
