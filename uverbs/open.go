package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// UnsupportedDriverError means the device's driver needs GET_CONTEXT
// request data that this package does not send.
type UnsupportedDriverError struct {
	Device string // the RDMA device
	Driver string // e.g. "mlx5_core"; "" when unknown
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

// openChardev opens the character device path, which must carry node's
// device number and belong to ib_uverbs (a major /proc/devices below root
// lists as infiniband_verbs, where it can be read). It is checked before
// the open (no side effects of opening another device) and after (no swap
// in between); a symbolic link is refused.
func openChardev(root, path string, node Node, ibdev string) (int, error) {
	if node.Major == fixedMajor {
		// ib_uverbs' own: no need to read /proc/devices.
	} else if majors, err := verbsMajors(root); err == nil && !slices.Contains(majors, node.Major) {
		return -1, fmt.Errorf("%s: %s is device %d:%d, whose major %d is not ib_uverbs' (/proc/devices: infiniband_verbs %v)",
			ibdev, node.Name, node.Major, node.Minor, node.Major, majors)
	}
	name := "/dev/infiniband/" + node.Name
	want := unix.Mkdev(node.Major, node.Minor)
	check := func(st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != want {
			return fmt.Errorf("%s is not character device %d:%d, which the kernel names for %s", name, node.Major, node.Minor, ibdev)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err := check(&st); err != nil {
		return -1, err
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if err := check(&st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// fixedMajor is IB_UVERBS_MAJOR, the major of the first 32 uverbs devices.
const fixedMajor = 231

// verbsMajors returns the character device majors root's /proc/devices
// lists for infiniband_verbs (231, and a dynamic one beyond 32 devices).
func verbsMajors(root string) ([]uint32, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/devices"))
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

// Node is a uverbs character device, /dev/infiniband/<Name>, with the
// device number the kernel gave it, and the driver of the RDMA device it
// serves. Package locator finds it, through RDMA netlink or sysfs.
type Node struct {
	Name         string // "uverbs0"
	Major, Minor uint32
	// Driver is the RDMA device's driver as sysfs names it ("rxe",
	// "mlx5_core"); "" means DriverName(DriverID). DriverID is its enum
	// rdma_driver_id, 0 when unknown. They choose GET_CONTEXT's request
	// data.
	Driver   string
	DriverID uint32
}

// Open opens node, the uverbs device of RDMA device ibdev, and creates a
// user context on it (ibv_open_device). The character device is
// dev/infiniband/<node.Name> below root, the directory that holds dev/ and
// proc/ ("" or "/" on a live system); it must carry node's device number,
// and that number must be ib_uverbs'. ibdev names the device in errors.
//
// Errors: an *fs.PathError from open(2) (EACCES without permission on
// /dev/infiniband), an *UnsupportedDriverError, or a *CommandError.
func Open(root, ibdev string, node Node) (*Context, error) {
	if err := checkNodeName(node.Name); err != nil {
		return nil, err
	}
	if root == "" {
		root = "/"
	}
	if node.Driver == "" {
		node.Driver = DriverName(node.DriverID)
	}
	fd, err := openChardev(root, filepath.Join(root, "dev/infiniband", node.Name), node, ibdev)
	if err != nil {
		return nil, err
	}
	c, err := newContext(contextName(node.Name, ibdev), deviceFile{fd})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := c.start(ibdev, node); err != nil {
		return nil, err
	}
	return c, nil
}

// contextName is a context's name in errors: "uverbs0 (rxe0)".
func contextName(node, ibdev string) string { return fmt.Sprintf("%s (%s)", node, ibdev) }

// start creates the user context on node with the request data of its
// driver; a known DriverID lets a driver without request data use the
// ioctl GET_CONTEXT. On failure c is closed.
func (c *Context) start(ibdev string, node Node) error {
	if node.Driver == "" {
		node.Driver = DriverName(node.DriverID)
	}
	c.Node = node
	getContext := (*Context).getContext
	if request, ok := contextRequests[node.Driver]; ok {
		getContext = request
	} else if node.DriverID != 0 {
		getContext = func(c *Context) error { return c.getContextIoctl(node.DriverID) }
	}
	if err := getContext(c); err != nil {
		c.Close()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return &UnsupportedDriverError{Device: ibdev, Driver: node.Driver,
				Reason: fmt.Sprintf("the kernel refused GET_CONTEXT without driver data (%v)", errors.Unwrap(err))}
		}
		return err
	}
	return nil
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

// checkNodeName refuses a node name that is not a plain uverbsN.
func checkNodeName(name string) error {
	n, ok := strings.CutPrefix(name, "uverbs")
	if _, err := strconv.ParseUint(n, 10, 32); !ok || err != nil {
		return fmt.Errorf("uverbs: %q is not a uverbs device name", name)
	}
	return nil
}
