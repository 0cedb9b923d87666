package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
)

// UnsupportedDriverError means the device's driver needs GET_CONTEXT
// request data that this package does not send.
type UnsupportedDriverError struct {
	Device string // the RDMA device
	Driver string // e.g. "mlx5_core"; "" when sysfs names none
	Reason string
}

func (e *UnsupportedDriverError) Error() string {
	driver := e.Driver
	if driver == "" {
		driver = "(unknown)"
	}
	return fmt.Sprintf("%s: driver %s not supported: %s", e.Device, driver, e.Reason)
}

// contextRequests are GET_CONTEXT with the driver request data of the
// drivers that need some, by the name sysfs gives their driver; the others
// get none.
var contextRequests = map[string]func(*Context) error{
	mlx5Driver: (*Context).getMlx5Context,
}

// openVerbsDevice opens the character device at name, which must be the
// one sysfs names (vd's device number) and belong to ib_uverbs (a major
// /proc/devices lists as infiniband_verbs, where it can be read). It is
// checked before the open (no side effects of opening another device) and
// after (no swap in between); a symbolic link is refused.
func openVerbsDevice(fsys sysfs.FS, name string, vd sysfs.VerbsDevice, ibdev string) (int, error) {
	if vd.Major == fixedMajor {
		// ib_uverbs' own: no need to read /proc/devices.
	} else if majors, err := verbsMajors(fsys); err == nil && !slices.Contains(majors, vd.Major) {
		return -1, fmt.Errorf("%s: sysfs names device %d:%d, whose major %d is not ib_uverbs' (/proc/devices: infiniband_verbs %v)",
			ibdev, vd.Major, vd.Minor, vd.Major, majors)
	}
	want := unix.Mkdev(vd.Major, vd.Minor)
	check := func(st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != want {
			return fmt.Errorf("/%s is not character device %d:%d, which sysfs names for %s", name, vd.Major, vd.Minor, ibdev)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, fsys.Path(name), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/" + name, Err: err}
	}
	if err := check(&st); err != nil {
		return -1, err
	}
	fd, err := unix.Open(fsys.Path(name), unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/" + name, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: "/" + name, Err: err}
	}
	if err := check(&st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// fixedMajor is IB_UVERBS_MAJOR, the major of the first 32 uverbs devices.
const fixedMajor = 231

// verbsMajors returns the character device majors /proc/devices lists for
// infiniband_verbs (231, and a dynamic one beyond 32 devices).
func verbsMajors(fsys sysfs.FS) ([]uint32, error) {
	b, err := fsys.ReadFile("proc/devices")
	if err != nil {
		return nil, err
	}
	var majors []uint32
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		num, dev, ok := strings.Cut(strings.TrimSpace(line), " ")
		if m, err := strconv.ParseUint(num, 10, 32); ok && err == nil && dev == "infiniband_verbs" {
			majors = append(majors, uint32(m))
		}
	}
	if len(majors) == 0 {
		return nil, errors.New("no infiniband_verbs in /proc/devices")
	}
	return majors, nil
}

// Open opens the uverbs device of RDMA device ibdev and creates a user
// context on it (ibv_open_device). The character device is the one
// /sys/class/infiniband_verbs/uverbsN/ibdev names, under the root of fsys
// (dev/infiniband/uverbsN), and must carry the device number sysfs shows.
//
// Errors: sysfs.ErrNoVerbsDevice when ib_uverbs serves no such device, an
// *fs.PathError from open(2) (EACCES without permission on /dev/infiniband),
// an *UnsupportedDriverError, or a *CommandError.
func Open(fsys sysfs.FS, ibdev string) (*Context, error) {
	abi, err := fsys.VerbsABIVersion()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: ib_uverbs is not loaded", ibdev, sysfs.ErrNoVerbsDevice)
	}
	if err != nil {
		return nil, err
	}
	if abi != ABIVersion {
		return nil, fmt.Errorf("%s: kernel uverbs ABI %d, want %d", ibdev, abi, ABIVersion)
	}
	vd, err := fsys.VerbsDeviceFor(ibdev)
	if err != nil {
		return nil, err
	}
	dev, err := fsys.Device(ibdev)
	if err != nil {
		return nil, err
	}
	return openContext(fsys, ibdev, vd, dev.Driver, 0)
}

// openContext opens the character device of vd and creates the user
// context with the request data of driver; driverID, when known (not 0),
// lets a driver without request data use the ioctl GET_CONTEXT.
func openContext(fsys sysfs.FS, ibdev string, vd sysfs.VerbsDevice, driver string, driverID uint32) (*Context, error) {
	name := "dev/infiniband/" + vd.Name
	fd, err := openVerbsDevice(fsys, name, vd, ibdev)
	if err != nil {
		return nil, err
	}
	c, err := newContext(contextName(vd.Name, ibdev), deviceFile{fd})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.Verbs, c.Driver = vd, driver
	if err := c.start(ibdev, driverID); err != nil {
		return nil, err
	}
	return c, nil
}

// contextName is a context's name in errors: "uverbs0 (rxe0)".
func contextName(node, ibdev string) string { return fmt.Sprintf("%s (%s)", node, ibdev) }

// start creates the user context with the request data of c.Driver;
// driverID, when known (not 0), lets a driver without request data use the
// ioctl GET_CONTEXT. On failure c is closed.
func (c *Context) start(ibdev string, driverID uint32) error {
	getContext := (*Context).getContext
	if request, ok := contextRequests[c.Driver]; ok {
		getContext = request
	} else if driverID != 0 {
		getContext = func(c *Context) error { return c.getContextIoctl(driverID) }
	}
	if err := getContext(c); err != nil {
		c.Close()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return &UnsupportedDriverError{Device: ibdev, Driver: c.Driver,
				Reason: fmt.Sprintf("the kernel refused GET_CONTEXT without driver data (%v)", errors.Unwrap(err))}
		}
		return err
	}
	return nil
}

// Node is a uverbs character device as RDMA netlink's GET_CHARDEV names
// it (nldev.Chardev): with it a device is opened without reading sysfs.
type Node struct {
	Name         string // "uverbs0"; the device is dev/infiniband/<Name>
	Major, Minor uint32
	DriverID     uint32 // enum rdma_driver_id
}

// NodeOf is the uverbs node netlink's GET_CHARDEV reply names.
func NodeOf(ch nldev.Chardev) Node {
	return Node{Name: ch.Name, Major: unix.Major(ch.Dev), Minor: unix.Minor(ch.Dev), DriverID: ch.DriverID}
}

// enum rdma_driver_id values this package tells apart.
const (
	DriverIDMLX5 = 1
	DriverIDMLX4 = 2
	DriverIDRXE  = 14
	DriverIDSIW  = 18
)

// DriverName returns the name sysfs gives the driver of a device with
// rdma_driver_id id (device/driver, or rxe and siw for the software
// devices), or "" for the ids this package does not know.
func DriverName(id uint32) string {
	switch id {
	case DriverIDMLX5:
		return mlx5Driver
	case DriverIDMLX4:
		return "mlx4_core"
	case DriverIDRXE:
		return "rxe"
	case DriverIDSIW:
		return "siw"
	}
	return ""
}

// OpenNode is Open for a device whose uverbs node is known from RDMA
// netlink: it reads nothing in sysfs (Open reads the ABI version and walks
// class/infiniband_verbs, one file per uverbs device). The node must
// carry the device number netlink reported, as for Open.
func OpenNode(fsys sysfs.FS, ibdev string, node Node) (*Context, error) {
	if err := checkNodeName(node.Name); err != nil {
		return nil, err
	}
	vd := sysfs.VerbsDevice{Name: node.Name, IBDev: ibdev, Major: node.Major, Minor: node.Minor}
	return openContext(fsys, ibdev, vd, DriverName(node.DriverID), node.DriverID)
}

// checkNodeName refuses a node name that is not a plain uverbsN.
func checkNodeName(name string) error {
	n, ok := strings.CutPrefix(name, "uverbs")
	if _, err := strconv.ParseUint(n, 10, 32); !ok || err != nil {
		return fmt.Errorf("uverbs: %q is not a uverbs device name", name)
	}
	return nil
}
