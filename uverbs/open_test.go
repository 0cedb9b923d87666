package uverbs

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rxe0Node is the uverbs node of the captured rxe trees.
var rxe0Node = Node{Name: "uverbs0", Major: 231, Minor: 192, Driver: "rxe"}

// fixtureRoot is a root with a dev/infiniband directory.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(root+"/dev/infiniband", 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func mknodChar(t *testing.T, path string, major, minor uint32) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))); err != nil {
		t.Skipf("mknod (needs root): %v", err)
	}
}

// TestOpenRefusesSymlink: a symbolic link in place of the uverbs device is
// refused before anything is opened, even when it points at a character
// device of the right number (it used to be followed and opened).
func TestOpenRefusesSymlink(t *testing.T) {
	root := fixtureRoot(t)
	mknodChar(t, root+"/elsewhere", 231, 192)
	if err := os.Symlink(root+"/elsewhere", root+"/dev/infiniband/uverbs0"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(root, "rxe0", rxe0Node)
	if err == nil || !strings.Contains(err.Error(), "/dev/infiniband/uverbs0 is not character device 231:192") {
		t.Fatalf("Open through a symlink = %v, want it refused", err)
	}
}

// TestOpenRefusesForeignMajor: a node naming a device number outside
// ib_uverbs, here /dev/null's 1:3 (a --sysfs-root could say so), is
// refused: the commands would be written to whatever that device is.
func TestOpenRefusesForeignMajor(t *testing.T) {
	root := fixtureRoot(t)
	mknodChar(t, root+"/dev/infiniband/uverbs0", 1, 3)
	os.MkdirAll(root+"/proc", 0o755)
	os.WriteFile(root+"/proc/devices", []byte("Character devices:\n  1 mem\n231 infiniband_verbs\n\nBlock devices:\n  8 sd\n"), 0o644)
	_, err := Open(root, "rxe0", Node{Name: "uverbs0", Major: 1, Minor: 3, Driver: "rxe"})
	if err == nil || !strings.Contains(err.Error(), "major 1 is not ib_uverbs'") {
		t.Fatalf("Open of 1:3 = %v, want the major refused", err)
	}
}
