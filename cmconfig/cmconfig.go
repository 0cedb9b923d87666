// Package cmconfig reads and sets the defaults the RDMA connection
// manager applies to each port's connections, in configfs
// (/sys/kernel/config/rdma_cm/DEV/ports/N): default_roce_mode, the RoCE
// version (GID type) of the GIDs it picks, and default_roce_tos, the ToS
// byte of connections whose application sets none. It does what
// rdma-core's cma_roce_mode and cma_roce_tos scripts do: the kernel shows
// a device's directory only once it is created, so a reader creates it
// (root only), reads, and removes it again; the values live in the kernel
// either way. configfs is mounted on /sys/kernel/config if it is not,
// and unmounted again after.
package cmconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
)

// Where configfs and the CM's part of it are, below the root.
const (
	ConfigfsDir = "sys/kernel/config"
	Dir         = ConfigfsDir + "/rdma_cm"
)

// The configfs attributes of a port.
const (
	modeFile = "default_roce_mode"
	tosFile  = "default_roce_tos"
)

// Defaults are one port's connection defaults.
type Defaults struct {
	Device string
	Port   uint32
	// RoCEMode is the GID type of the GIDs the CM picks (gid.TypeRoCEv2
	// since Linux 4.14 where the port has them; rxe has nothing else);
	// gid.TypeIB on an InfiniBand port.
	RoCEMode gid.Type
	// ToS is the ToS byte (DSCP<<2 | ECN) of connections whose
	// application sets none (librdmacm's RDMA_OPTION_ID_TOS).
	ToS uint8
}

// Setting is a change to a port's defaults; zero fields stay as they
// are.
type Setting struct {
	RoCEMode gid.Type // gid.TypeRoCEv1 or gid.TypeRoCEv2
	ToS      *uint8
}

// ErrNoConfigfs means the kernel shows no rdma_cm directory in configfs:
// rdma_cm is not loaded, or the kernel lacks
// CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS.
var ErrNoConfigfs = errors.New("no rdma_cm in configfs")

// Error is a failed configfs operation, explained.
type Error struct {
	Op   string // "read rxe0/1", "set rxe0/1 roce-mode v1", ...
	Path string // the configfs path, from the root
	Hint string
	Err  error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s: %v", e.Op, "/"+e.Path, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Hooks for tests: configfs creates a device's ports when its directory
// is made, which a directory of captured files cannot do.
var (
	mkdir  = func(p string) error { return unix.Mkdir(p, 0o755) }
	rmdir  = unix.Rmdir
	mount  = func(target string) error { return unix.Mount("configfs", target, "configfs", 0, "") }
	umount = func(target string) error { return unix.Unmount(target, 0) }
)

// session is configfs opened for one device: what it had to do to
// show the device's directory, which close undoes.
type session struct {
	fsys    sysfs.FS
	dev     string
	dir     string // Dir/dev
	made    bool
	mounted bool
}

// open shows dev's directory: configfs mounted (on the live root only),
// the device's directory created if absent.
func open(fsys sysfs.FS, dev string) (*session, error) {
	if !validName(dev) {
		return nil, fmt.Errorf("cmconfig: invalid device name %q", dev)
	}
	s := &session{fsys: fsys, dev: dev, dir: path.Join(Dir, dev)}
	if _, err := os.Stat(fsys.Path(Dir)); errors.Is(err, fs.ErrNotExist) && fsys.Root() == sysfs.DefaultRoot && !mounted(fsys) {
		if err := s.mount(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(fsys.Path(Dir)); err != nil {
		s.close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{Op: "read the RDMA CM defaults", Path: Dir, Err: ErrNoConfigfs,
				Hint: "load rdma_cm (modprobe rdma_ucm); the kernel needs CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS"}
		}
		return nil, &Error{Op: "read the RDMA CM defaults", Path: Dir, Err: err}
	}
	if _, err := os.Stat(fsys.Path(s.dir)); errors.Is(err, fs.ErrNotExist) {
		if err := mkdir(fsys.Path(s.dir)); err != nil {
			s.close()
			e := &Error{Op: "show " + dev + " in configfs", Path: s.dir, Err: err}
			switch {
			case errors.Is(err, fs.ErrPermission):
				e.Hint = "the kernel shows a device's RDMA CM defaults only once its configfs directory is made, which needs root (CAP_SYS_ADMIN)"
			case errors.Is(err, unix.ENODEV):
				e.Err = &ib.NotFoundError{Device: dev}
			}
			return nil, e
		}
		s.made = true
	}
	return s, nil
}

// validName reports whether dev can name a directory of configfs's
// rdma_cm.
func validName(dev string) bool {
	return dev != "" && dev != "." && dev != ".." && !strings.ContainsAny(dev, "/\x00")
}

// mounted reports whether a file system is mounted on sys/kernel/config:
// whether it lies on another device than sys/kernel.
func mounted(fsys sysfs.FS) bool {
	var dir, parent unix.Stat_t
	if unix.Stat(fsys.Path(ConfigfsDir), &dir) != nil || unix.Stat(fsys.Path(path.Dir(ConfigfsDir)), &parent) != nil {
		return true // nothing to mount on, or cannot tell: do not try
	}
	return dir.Dev != parent.Dev
}

// mount mounts configfs on the live root's sys/kernel/config, where
// nothing is mounted yet.
func (s *session) mount() error {
	target := s.fsys.Path(ConfigfsDir)
	if err := mount(target); err != nil {
		e := &Error{Op: "mount configfs", Path: ConfigfsDir, Err: err}
		if errors.Is(err, fs.ErrPermission) {
			e.Hint = "needs root (CAP_SYS_ADMIN); or mount it: mount -t configfs none /sys/kernel/config"
		}
		return e
	}
	s.mounted = true
	return nil
}

// close removes what open made: the device's directory (the values stay
// in the kernel), and configfs if it mounted it.
func (s *session) close() error {
	var errs []error
	if s.made {
		if err := rmdir(s.fsys.Path(s.dir)); err != nil {
			errs = append(errs, &Error{Op: "remove the configfs directory made to read " + s.dev, Path: s.dir, Err: err})
		}
		s.made = false
	}
	if s.mounted {
		if err := umount(s.fsys.Path(ConfigfsDir)); err != nil {
			errs = append(errs, &Error{Op: "unmount configfs", Path: ConfigfsDir, Err: err})
		}
		s.mounted = false
	}
	return errors.Join(errs...)
}

// ports lists the port numbers configfs shows for the device.
func (s *session) ports() ([]uint32, error) {
	entries, err := os.ReadDir(s.fsys.Path(path.Join(s.dir, "ports")))
	if err != nil {
		return nil, &Error{Op: "list the ports of " + s.dev, Path: path.Join(s.dir, "ports"), Err: err}
	}
	var ports []uint32
	for _, e := range entries {
		if n, err := strconv.ParseUint(e.Name(), 10, 32); err == nil && n > 0 {
			ports = append(ports, uint32(n))
		}
	}
	slices.Sort(ports)
	return ports, nil
}

func (s *session) portFile(port uint32, file string) string {
	return path.Join(s.dir, "ports", strconv.FormatUint(uint64(port), 10), file)
}

// read reads one port's defaults; the port's link layer in sysfs tells
// IB from RoCE v1.
func (s *session) read(port uint32) (Defaults, error) {
	d := Defaults{Device: s.dev, Port: port}
	linkLayer, err := s.fsys.LinkLayer(s.dev, port)
	if err != nil {
		linkLayer = ib.LinkLayerEthernet // the CM's only use of it: naming v1
	}
	mode, err := s.readAttr(s.portFile(port, modeFile))
	if err != nil {
		return d, s.readError(port, modeFile, err)
	}
	if d.RoCEMode, err = gid.ParseSysfsType(mode, linkLayer); err != nil {
		return d, s.readError(port, modeFile, err)
	}
	tos, err := s.readAttr(s.portFile(port, tosFile))
	if err != nil {
		return d, s.readError(port, tosFile, err)
	}
	v, err := strconv.ParseUint(tos, 10, 8)
	if err != nil {
		return d, s.readError(port, tosFile, err)
	}
	d.ToS = uint8(v)
	return d, nil
}

// readAttr reads a configfs attribute (p is from the root, sysfs.FS's
// ReadAttr takes it from sys/).
func (s *session) readAttr(p string) (string, error) {
	return s.fsys.ReadAttr(strings.TrimPrefix(p, "sys/"))
}

func (s *session) readError(port uint32, file string, err error) error {
	e := &Error{Op: fmt.Sprintf("read %s/%d", s.dev, port), Path: s.portFile(port, file), Err: err}
	if errors.Is(err, fs.ErrNotExist) {
		e.Err = &ib.NotFoundError{Device: s.dev, Port: port}
	}
	return e
}

// Read returns the defaults of each port of device dev, or of port only
// when it is not 0, reading the link layer of each port in sysfs.
func Read(fsys sysfs.FS, dev string, port uint32) (out []Defaults, err error) {
	s, ports, err := openPorts(fsys, dev, port)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	for _, p := range ports {
		d, err := s.read(p)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// openPorts opens dev's directory and lists its ports, or port alone
// when it is not 0 (a port configfs does not show is an
// *ib.NotFoundError).
func openPorts(fsys sysfs.FS, dev string, port uint32) (*session, []uint32, error) {
	s, err := open(fsys, dev)
	if err != nil {
		return nil, nil, err
	}
	ports, err := s.ports()
	if err == nil && port != 0 {
		if !slices.Contains(ports, port) {
			err = &ib.NotFoundError{Device: dev, Port: port, NumPorts: uint32(len(ports))}
		}
		ports = []uint32{port}
	}
	if err != nil {
		return nil, nil, errors.Join(err, s.close())
	}
	return s, ports, nil
}

// Shown returns a port's defaults where configfs shows them already (the
// device's directory exists), making and mounting nothing: for messages
// that may mention them. Otherwise the error is fs.ErrNotExist.
func Shown(fsys sysfs.FS, dev string, port uint32) (Defaults, error) {
	if !validName(dev) {
		return Defaults{}, fs.ErrNotExist
	}
	return (&session{fsys: fsys, dev: dev, dir: path.Join(Dir, dev)}).read(port)
}

// modeText is what default_roce_mode takes for a GID type.
func modeText(t gid.Type) (string, error) {
	switch t {
	case gid.TypeIB, gid.TypeRoCEv1:
		return "IB/RoCE v1", nil
	case gid.TypeRoCEv2:
		return "RoCE v2", nil
	}
	return "", fmt.Errorf("cmconfig: no RoCE mode %v", t)
}

// Set changes a port's defaults and returns them as the kernel then
// shows them. A mode the port has no GIDs of is refused by the kernel
// (EINVAL; rxe has RoCE v2 only); nothing is changed then.
func Set(fsys sysfs.FS, dev string, port uint32, set Setting) (d Defaults, err error) {
	if port == 0 {
		return d, fmt.Errorf("cmconfig: set %s: the defaults are per port: name one", dev)
	}
	s, _, err := openPorts(fsys, dev, port)
	if err != nil {
		return d, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	before, err := s.read(port)
	if err != nil {
		return d, err
	}
	if set.RoCEMode != 0 {
		text, err := modeText(set.RoCEMode)
		if err != nil {
			return d, err
		}
		if err := s.write(port, modeFile, text); err != nil {
			e := err.(*Error)
			e.Op = fmt.Sprintf("set %s/%d roce-mode %s", dev, port, set.RoCEMode.Version())
			if errors.Is(err, unix.EINVAL) {
				e.Hint = fmt.Sprintf("the port has no %s GIDs (rxe has RoCE v2 only)", set.RoCEMode)
			}
			return d, e
		}
	}
	if set.ToS != nil {
		if err := s.write(port, tosFile, strconv.Itoa(int(*set.ToS))); err != nil {
			err.(*Error).Op = fmt.Sprintf("set %s/%d tos %d", dev, port, *set.ToS)
			// Leave the port as it was: the mode went in already.
			if set.RoCEMode != 0 && set.RoCEMode != before.RoCEMode {
				if text, terr := modeText(before.RoCEMode); terr == nil {
					err = errors.Join(err, s.write(port, modeFile, text))
				}
			}
			return d, err
		}
	}
	return s.read(port)
}

// write writes one attribute of a port.
func (s *session) write(port uint32, file, value string) error {
	p := s.portFile(port, file)
	f, err := os.OpenFile(s.fsys.Path(p), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(value + "\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		e := &Error{Op: "write", Path: p, Err: underlying(err)}
		if errors.Is(err, fs.ErrPermission) {
			e.Hint = "needs root"
		}
		return e
	}
	return nil
}

// underlying strips the *fs.PathError of a file operation: Error names
// the path.
func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
