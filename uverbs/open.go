package uverbs

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

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
	name := "dev/infiniband/" + vd.Name
	fd, err := unix.Open(fsys.Path(name), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/" + name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: "/" + name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(vd.Major, vd.Minor) {
		unix.Close(fd)
		return nil, fmt.Errorf("/%s is not character device %d:%d, which sysfs names for %s",
			name, vd.Major, vd.Minor, ibdev)
	}
	c, err := newContext(fmt.Sprintf("%s (%s)", vd.Name, ibdev), fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.Verbs, c.Driver = vd, dev.Driver
	getContext := (*Context).getContext
	if request, ok := contextRequests[dev.Driver]; ok {
		getContext = request
	}
	if err := getContext(c); err != nil {
		c.Close()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, &UnsupportedDriverError{Device: ibdev, Driver: dev.Driver,
				Reason: fmt.Sprintf("the kernel refused GET_CONTEXT without driver data (%v)", errors.Unwrap(err))}
		}
		return nil, err
	}
	return c, nil
}
