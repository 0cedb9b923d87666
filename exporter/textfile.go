package exporter

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/grdma/grdma/node"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// WriteTextfile writes what g gathers to path for node_exporter's textfile
// collector, atomically: the metrics are encoded (expfmt, text format)
// into a new file beside path, which is renamed over path, so that the
// collector never reads half a file. grdma writes these files as root in a
// directory node_exporter's account often owns, so every step on the new
// file goes through the one descriptor that created it (O_EXCL,
// O_NOFOLLOW): write, fchown, fchmod, fsync. Nothing is done by name but
// the final rename, which moves a name within the directory: whatever
// another account swaps in while it runs, no file outside the directory
// is opened, chowned or chmodded.
//
// The new file takes the mode and owner of the file it replaces (Lstat:
// not a file a symlink points to) when that file is root's or the
// caller's, and is 0644 and the caller's otherwise: a file another
// account created first does not make root's writes its own. The
// directory is synced after the rename, so that the rename survives a
// crash. A directory that group or others may write without the sticky
// bit is refused (*UnsafeDirError): anyone there could rename or remove
// root's file. On failure path is unchanged and nothing is left beside
// it.
func WriteTextfile(path string, g prometheus.Gatherer) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	d, err := openTextfileDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	mfs, err := g.Gather()
	if err != nil {
		return err
	}
	uid, gid, mode, keep := replaced(d, base)
	f, tmp, err := createBeside(d, dir, base)
	if err != nil {
		return err
	}
	if err := fill(f, mfs, uid, gid, mode, keep); err != nil {
		f.Close()
		unix.Unlinkat(d, tmp, 0)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, tmp), err)
	}
	if err := f.Close(); err != nil {
		unix.Unlinkat(d, tmp, 0)
		return err
	}
	if err := unix.Renameat(d, tmp, d, base); err != nil {
		unix.Unlinkat(d, tmp, 0)
		return &os.PathError{Op: "rename", Path: path, Err: err}
	}
	if err := unix.Fsync(d); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	// Another account that swapped its own file or symlink for the new
	// one had it renamed to path, which it could as well have done
	// itself: nothing outside the directory changed, but path is not what
	// was written. (Another grdma writing path at once leaves a file
	// like this one.)
	if _, _, _, ours := replaced(d, base); !ours {
		return fmt.Errorf("%s was replaced while it was written by another account's file or symlink: make %s writable only by root or the account that runs grdma", path, dir)
	}
	return nil
}

// UnsafeDirError is a textfile directory that group or others may write
// without the sticky bit: anyone there can rename or remove the files
// grdma writes as root.
type UnsafeDirError struct {
	Dir  string
	Mode fs.FileMode
}

func (e *UnsafeDirError) Error() string {
	who := "others"
	switch {
	case e.Mode&0o020 != 0 && e.Mode&0o002 != 0:
		who = "group and others"
	case e.Mode&0o020 != 0:
		who = "its group"
	}
	return fmt.Sprintf("textfile directory %s is writable by %s (mode %04o) without the sticky bit: another account could replace the files written there; "+
		"make it writable by its owner only (chmod go-w %s) or set the sticky bit (chmod +t %s)", e.Dir, who, uint32(e.Mode.Perm()), e.Dir, e.Dir)
}

// CheckTextfileDir checks, before any work is done, that the directory of
// path exists and is one WriteTextfile writes in.
func CheckTextfileDir(path string) error {
	d, err := openTextfileDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	return unix.Close(d)
}

// openTextfileDir opens dir for the *at calls and checks its permissions.
func openTextfileDir(dir string) (int, error) {
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(d, &st); err != nil {
		unix.Close(d)
		return -1, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		unix.Close(d)
		return -1, &UnsafeDirError{Dir: dir, Mode: fs.FileMode(st.Mode & 0o777)}
	}
	return d, nil
}

// replaced returns the owner and mode of the regular file base in d, and
// whether to keep them: only when root or the caller owns it.
func replaced(d int, base string) (uid, gid int, mode uint32, keep bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(d, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, 0, 0o644, false
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return 0, 0, 0o644, false
	}
	return int(st.Uid), int(st.Gid), st.Mode & 0o777, true
}

// createBeside creates a new file in d named after base (".base.tmpN":
// the textfile collector reads only *.prom), never following or reusing
// a name that exists.
func createBeside(d int, dir, base string) (*os.File, string, error) {
	for range 100 {
		name := "." + base + ".tmp" + strconv.FormatUint(rand.Uint64(), 36)
		fd, err := unix.Openat(d, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, "", &os.PathError{Op: "create", Path: filepath.Join(dir, name), Err: err}
		}
		return os.NewFile(uintptr(fd), filepath.Join(dir, name)), name, nil
	}
	return nil, "", fmt.Errorf("cannot create a file beside %s: 100 names taken", filepath.Join(dir, base))
}

// fill encodes mfs into f and gives it its owner and mode, through f.
func fill(f *os.File, mfs []*dto.MetricFamily, uid, gid int, mode uint32, keep bool) error {
	w := bufio.NewWriter(f)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if keep {
		// A group the caller is not in cannot be given without root:
		// the file keeps the caller's.
		if err := f.Chown(uid, gid); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if err := f.Chmod(fs.FileMode(mode)); err != nil {
		return err
	}
	return f.Sync()
}

// WriteTextfile writes one collection of c to path (see the function
// WriteTextfile). When not even the devices could be listed, nothing is
// written and that is the error; when parts of devices or ports could not
// be read, the file is written without them (and with
// grdma_export_read_error for each) and the error is a *PartialError.
func (c *Collector) WriteTextfile(path string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return err
	}
	var partial []node.ReadError
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		if err != nil {
			return nil, err
		}
		partial = c.Errors()
		for _, e := range partial {
			if e.What == "devices" {
				return nil, e.Err
			}
		}
		return mfs, nil
	})
	if err := WriteTextfile(path, g); err != nil {
		return err
	}
	if len(partial) > 0 {
		return &PartialError{Path: path, Errors: partial}
	}
	return nil
}

// PartialError is a textfile written without what could not be read.
type PartialError struct {
	Path   string
	Errors []node.ReadError
}

func (e *PartialError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i := range e.Errors {
		msgs[i] = e.Errors[i].Error()
	}
	return fmt.Sprintf("wrote %s without what could not be read (grdma_export_read_error):\n%s", e.Path, strings.Join(msgs, "\n"))
}

// Unwrap returns the read errors.
func (e *PartialError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i := range e.Errors {
		errs[i] = &e.Errors[i]
	}
	return errs
}

// ReadTextfile parses a file in the text exposition format, as
// node_exporter's textfile collector does, into metric families by name:
// a check that a written file is what Prometheus will read.
func ReadTextfile(path string) (map[string]*dto.MetricFamily, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fams, nil
}
