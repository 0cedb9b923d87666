package nldev

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// Error is a failed RDMA_NLDEV operation, explained for an operator: what
// was attempted, what the kernel's errno means for that operation, and what
// to do about it.
type Error struct {
	Op     string // what was attempted, e.g. "link add rxe0"
	Reason string // the errno explained for this operation
	Extack string // the kernel's extended-ack message, when it sent one
	Err    error  // the underlying error (unwraps to a unix.Errno)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Reason != "" {
		b.WriteString(e.Reason)
	} else {
		b.WriteString(errnoText(e.Err))
	}
	if e.Extack != "" {
		fmt.Fprintf(&b, " (kernel: %s)", e.Extack)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports the kernel's errno as the io/fs error it stands for, as
// mdlayher/ethtool does: ENODEV is fs.ErrNotExist, EPERM and EACCES are
// fs.ErrPermission. (EINVAL, which the kernel also answers for an index no
// device has, means too much else: Client.Gone tells.)
func (e *Error) Is(target error) bool {
	var errno unix.Errno
	if !errors.As(e.Err, &errno) {
		return false
	}
	switch target {
	case fs.ErrNotExist:
		return errno == unix.ENODEV
	case fs.ErrPermission:
		return errno == unix.EPERM || errno == unix.EACCES
	}
	return false
}

// InvalidArgumentError is input rejected before anything was sent.
type InvalidArgumentError struct{ Reason string }

func (e *InvalidArgumentError) Error() string { return e.Reason }

// errnoText is the errno's own text, for errors without an explanation.
func errnoText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// explainer maps an errno to its meaning for one operation ("" = none).
type explainer func(errno unix.Errno) string

// wrap turns a kernel error into an *Error for op, explained by why.
// Errors that already say what they are pass through unchanged.
func wrap(op string, err error, why explainer) error {
	if err == nil {
		return nil
	}
	var nf *ib.NotFoundError
	var ia *InvalidArgumentError
	if errors.As(err, &nf) || errors.As(err, &ia) || errors.Is(err, ErrDumpInterrupted) || errors.Is(err, ErrNoRDMANetlink) {
		return err
	}
	e := &Error{Op: op, Err: err}
	var ke *KernelError
	var oe *netlink.OpError
	switch {
	case errors.As(err, &ke):
		e.Extack = ke.Message
	case errors.As(err, &oe):
		e.Extack = oe.Message
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if why != nil {
			e.Reason = why(errno)
		}
		if e.Reason == "" {
			e.Reason = commonReason(errno)
		}
	}
	return e
}

// commonReason explains errnos that mean the same for every operation.
func commonReason(errno unix.Errno) string {
	switch errno {
	case unix.EPERM:
		if !hasNetAdmin() {
			return "permission denied: this needs CAP_NET_ADMIN (run as root)"
		}
	case unix.EOPNOTSUPP:
		return "not supported by this kernel or device"
	}
	return ""
}

// hasNetAdmin reports whether this process holds CAP_NET_ADMIN, to tell a
// privilege problem from a kernel refusal that also returns EPERM.
func hasNetAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_NET_ADMIN) != 0
}
