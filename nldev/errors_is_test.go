package nldev

import (
	"errors"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// Errors answer errors.Is with the io/fs sentinels, as mdlayher/ethtool's
// do, so a library user needs no errno.
func TestErrorIs(t *testing.T) {
	for _, tt := range []struct {
		err        error
		notExist   bool
		permission bool
	}{
		{&Error{Op: "get RDMA device 7", Err: unix.ENODEV}, true, false},
		{&Error{Op: "link add rxe0", Err: unix.EPERM}, false, true},
		{&Error{Op: "res show", Err: unix.EACCES}, false, true},
		{&Error{Op: "get RDMA device 7", Err: unix.EINVAL}, false, false}, // ambiguous: Gone tells
		{&ib.NotFoundError{Device: "rxe9"}, true, false},
		{&Error{Op: "x", Err: errors.New("not an errno")}, false, false},
	} {
		if got := errors.Is(tt.err, fs.ErrNotExist); got != tt.notExist {
			t.Errorf("%v: Is(fs.ErrNotExist) = %v", tt.err, got)
		}
		if got := errors.Is(tt.err, fs.ErrPermission); got != tt.permission {
			t.Errorf("%v: Is(fs.ErrPermission) = %v", tt.err, got)
		}
	}
}

type lookup map[uint32]error

func (l lookup) Device(index uint32) (Device, error) { return Device{Index: index}, l[index] }

// A device is gone when the kernel said EINVAL or ENODEV about it and a
// fresh look-up says the same; not for other errors, nor for a device
// that is still there.
func TestDeviceGone(t *testing.T) {
	einval := &Error{Op: "list ports", Err: unix.EINVAL}
	gone := lookup{3: &Error{Op: "get RDMA device 3", Err: unix.EINVAL}}
	for _, tt := range []struct {
		index uint32
		err   error
		want  bool
	}{
		{3, einval, true},
		{3, &Error{Op: "list ports", Err: unix.ENODEV}, true},
		{1, einval, false}, // still there: a real EINVAL
		{3, &Error{Op: "list ports", Err: unix.EPERM}, false}, // not about existence
		{3, nil, false},
	} {
		if got := DeviceGone(gone, tt.index, tt.err); got != tt.want {
			t.Errorf("DeviceGone(%d, %v) = %v", tt.index, tt.err, got)
		}
	}
}
