package promfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileKeepsModeAndOwner: replacing an exported file keeps its mode
// and (as root) its owner; the old writer made every file 0644 and the
// caller's. A new file is 0644. Nothing is left beside it.
func TestWriteFileKeepsModeAndOwner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdma.prom")
	if err := WriteFile(path, []byte("a 1\n")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	os.Chmod(path, 0o640)
	root := os.Geteuid() == 0
	if root {
		os.Chown(path, 65534, 65534)
	}
	if err := WriteFile(path, []byte("a 2\n")); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after replacing a 0640 file, want 0640", st.Mode().Perm())
	}
	if sys := st.Sys().(*syscall.Stat_t); root && (sys.Uid != 65534 || sys.Gid != 65534) {
		t.Errorf("owner %d:%d after replacing a 65534:65534 file", sys.Uid, sys.Gid)
	}
	if b, _ := os.ReadFile(path); string(b) != "a 2\n" {
		t.Errorf("content %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftovers: %v", entries)
	}
}
