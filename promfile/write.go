package promfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFile replaces path with data so that node_exporter never reads a
// half-written file: a temporary file beside it is written, synced, given
// the mode and owner of the file it replaces (0644 and the caller for a
// new one), renamed over it, and the directory synced so that the rename
// survives a crash. An owner only root may set is kept when running as
// root and otherwise left to the caller.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = writeSynced(f, path, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeSynced writes data to f with the mode and owner of the file at path.
func writeSynced(f *os.File, path string, data []byte) error {
	mode := fs.FileMode(0o644)
	old, err := os.Stat(path)
	switch {
	case err == nil:
		mode = old.Mode().Perm()
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
				return err
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
