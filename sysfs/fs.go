// Package sysfs reads the RDMA parts of Linux sysfs — /sys/class/infiniband,
// /sys/class/infiniband_verbs and /sys/class/net — from a configurable root,
// the way libibverbs honours SYSFS_PATH and prometheus/procfs takes a mount
// point.
//
// It tolerates what real kernels do: unused GID entries read as the zero
// GID, gid_attrs/types/N and ndevs/N fail with EINVAL for unused entries
// (and ndevs for every InfiniBand GID), and a device can vanish between
// being listed and being read. Readers that list devices skip a device that
// vanished (ENOENT or ENODEV) instead of returning part of it.
//
// Attribute files are read with one read(2) of a page-sized buffer, as the
// kernel produces them (a sysfs show() fills at most one page).
package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultRoot is the root of a live system.
const DefaultRoot = "/"

// maxAttrSize bounds one attribute read: sysfs show() writes at most a page.
const maxAttrSize = 4096

// FS is a file system rooted at a directory that holds sys/ (and, for other
// readers, proc/ and dev/). It implements io/fs.FS, fs.ReadFileFS,
// fs.ReadDirFS and fs.ReadLinkFS with names relative to that root, such as
// "sys/class/infiniband/rxe0/ports/1/rate" or "proc/kallsyms". WithProc
// puts proc/ somewhere else (a container's /host/proc).
type FS struct {
	root string
	// proc, when set, is the directory that proc/ names (WithProc).
	proc string

	// readHook, when set (by tests), runs before every attribute read and
	// can fail it, simulating kernel errors such as a device going away.
	readHook func(name string) error
}

var (
	_ fs.FS         = FS{}
	_ fs.ReadFileFS = FS{}
	_ fs.ReadDirFS  = FS{}
	_ fs.ReadLinkFS = FS{}
)

// NewFS returns an FS rooted at root ("" means DefaultRoot). The root must be
// a directory; what lies below it is read lazily.
func NewFS(root string) (FS, error) {
	if root == "" {
		root = DefaultRoot
	}
	info, err := os.Stat(root)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs root: %w", err)
	}
	if !info.IsDir() {
		return FS{}, fmt.Errorf("sysfs root %s: not a directory", root)
	}
	return FS{root: filepath.Clean(root)}, nil
}

// WithProc returns a copy of f whose proc/ is the directory dir, a procfs
// mount such as a container's /host/proc (node_exporter's --path.procfs);
// "" keeps proc/ below the root. The directory must exist.
func (f FS) WithProc(dir string) (FS, error) {
	if dir == "" {
		f.proc = ""
		return f, nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return FS{}, fmt.Errorf("proc root: %w", err)
	}
	if !info.IsDir() {
		return FS{}, fmt.Errorf("proc root %s: not a directory", dir)
	}
	f.proc = filepath.Clean(dir)
	return f, nil
}

// Root returns the directory the FS is rooted at.
func (f FS) Root() string { return f.root }

// Path returns the host path of name, a slash-separated name relative to the
// root (e.g. "dev/infiniband/uverbs0"); names below proc/ are below the
// proc directory when WithProc set one.
func (f FS) Path(name string) string {
	if f.proc != "" {
		if name == "proc" {
			return f.proc
		}
		if rest, ok := strings.CutPrefix(name, "proc/"); ok {
			return filepath.Join(f.proc, filepath.FromSlash(rest))
		}
	}
	return filepath.Join(f.root, filepath.FromSlash(name))
}

// Open implements fs.FS.
func (f FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := os.Open(f.Path(name))
	if err != nil {
		return nil, relativeError(err, name)
	}
	return file, nil
}

// ReadFile implements fs.ReadFileFS. It reads until EOF without trusting the
// size from stat, which is 0 or 4096 for every procfs and sysfs file;
// proc/kallsyms, for one, is megabytes long.
func (f FS) ReadFile(name string) ([]byte, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: underlying(err)}
	}
	return data, nil
}

// ReadDir implements fs.ReadDirFS.
func (f FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries, err := os.ReadDir(f.Path(name))
	if err != nil {
		return entries, relativeError(err, name)
	}
	return entries, nil
}

// ReadLink returns the target of the symbolic link name, as the kernel
// wrote it (sysfs links are relative: "../../devices/pci0000:00/...").
// It implements fs.ReadLinkFS.
func (f FS) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	target, err := os.Readlink(f.Path(name))
	if err != nil {
		return "", relativeError(err, name)
	}
	return target, nil
}

// Lstat returns the file information of name without following a final
// symbolic link. It implements fs.ReadLinkFS.
func (f FS) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	info, err := os.Lstat(f.Path(name))
	if err != nil {
		return nil, relativeError(err, name)
	}
	return info, nil
}

// ReadAttr reads the sysfs attribute at name, relative to the root's sys/
// directory (e.g. "class/net/eth0/mtu"), with a single read(2), and returns
// its text without the trailing newline.
func (f FS) ReadAttr(name string) (string, error) {
	var buf [maxAttrSize]byte
	n, err := f.readAttr(name, buf[:])
	if err != nil {
		return "", err
	}
	return string(trimNewline(buf[:n])), nil
}

// readAttr reads the attribute sys/name into buf with one read(2).
func (f FS) readAttr(name string, buf []byte) (int, error) {
	var p attrPath
	p.reset(f, name)
	return f.readAttrAt(&p, buf)
}

// attrPath builds the NUL-terminated host path of attributes in a reusable
// buffer: a GID table is a thousand files, and unix.Open would copy each
// path string once more.
type attrPath struct {
	path    []byte // root + "/sys/" + name, then a NUL
	relFrom int    // where "sys/" starts, for error messages
	store   [256]byte
}

// reset sets the path to sys/name under the root of f.
func (p *attrPath) reset(f FS, name string) {
	p.path = append(p.store[:0], f.root...)
	p.path = append(p.path, '/')
	p.relFrom = len(p.path)
	p.path = append(p.path, "sys/"...)
	p.path = append(p.path, name...)
}

// rel returns the path relative to the root, as errors name it.
func (p *attrPath) rel() string { return string(p.path[p.relFrom:]) }

// readAttrAt reads the attribute at p into buf with one read(2).
func (f FS) readAttrAt(p *attrPath, buf []byte) (int, error) {
	if f.readHook != nil {
		if err := f.readHook(p.rel()); err != nil {
			return 0, &fs.PathError{Op: "read", Path: p.rel(), Err: err}
		}
	}
	cpath := append(p.path, 0)
	fd, err := openReadOnly(cpath)
	if err != nil {
		return 0, &fs.PathError{Op: "open", Path: p.rel(), Err: err}
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: p.rel(), Err: err}
		}
		return n, nil
	}
}

// openReadOnly is open(2) of a NUL-terminated path, without the string copy
// of unix.Open.
func openReadOnly(cpath []byte) (int, error) {
	atFDCWD := unix.AT_FDCWD // a variable: the negative constant does not convert
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&cpath[0])),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
		runtime.KeepAlive(cpath)
		switch errno {
		case 0:
			return int(fd), nil
		case unix.EINTR:
			continue
		default:
			return -1, errno
		}
	}
}

// InvalidNameError is a device, port or netdev name that cannot name one
// directory of sysfs: empty, ".", "..", or holding '/' or NUL. The readers
// refuse it before building a path, so that no name reaches outside the
// directory of its class.
type InvalidNameError struct {
	Kind, Name, Reason string
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("invalid %s name %q: %s", e.Kind, e.Name, e.Reason)
}

// CheckName refuses a name that is not one path element of sysfs (an
// *InvalidNameError naming kind, e.g. "RDMA device" or "netdev"), before
// any path is built from it.
func CheckName(kind, name string) error {
	reason := ""
	switch {
	case name == "":
		reason = "empty"
	case name == "." || name == "..":
		reason = "not a name"
	case strings.IndexByte(name, '/') >= 0:
		reason = "contains '/'"
	case strings.IndexByte(name, 0) >= 0:
		reason = "contains NUL"
	default:
		return nil
	}
	return &InvalidNameError{Kind: kind, Name: name, Reason: reason}
}

// IsGone reports whether err means that the object read has gone away:
// ENOENT (the device was unregistered) or ENODEV (it is being removed or was
// disassociated by a hot unplug).
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// isNoEntry reports whether err is the EINVAL with which the kernel answers a
// read of gid_attrs/types/N or ndevs/N that has no entry (or no netdev).
func isNoEntry(err error) bool {
	return errors.Is(err, unix.EINVAL)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// relativeError rewrites an *fs.PathError's host path to name, so errors
// read the same whatever the root is.
func relativeError(err error, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return err
}

func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// listNames returns the names in the directory sys/dir, unsorted, or nil if
// the directory does not exist (a class whose module is not loaded).
func (f FS) listNames(dir string) ([]string, error) {
	d, err := os.Open(f.root + "/sys/" + dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, relativeError(err, "sys/"+dir)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, relativeError(err, "sys/"+dir)
	}
	if names == nil {
		names = []string{}
	}
	return slices.DeleteFunc(names, func(name string) bool { return strings.HasPrefix(name, ".") }), nil
}
