package verbsprobe

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// StepError is a failed step: what failed, the errno when the kernel
// refused, and the likely cause when one is known.
type StepError struct {
	Step  string
	Err   error
	Cause string // "" when no cause is known
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }

func (e *StepError) Unwrap() error { return e.Err }

// Errno returns the errno the kernel answered, or 0.
func (e *StepError) Errno() unix.Errno {
	var errno unix.Errno
	if errors.As(e.Err, &errno) {
		return errno
	}
	return 0
}

// ErrnoName returns the errno's symbol, e.g. "EINVAL", or "".
func (e *StepError) ErrnoName() string {
	if errno := e.Errno(); errno != 0 {
		return unix.ErrnoName(errno)
	}
	return ""
}

// diagnose wraps a step's error with its likely cause; t is what is
// known of the device port (nil: nothing).
func (t *target) diagnose(step string, err error) *StepError {
	if t == nil {
		return &StepError{Step: step, Err: err}
	}
	return &StepError{Step: step, Err: err, Cause: t.likelyCause(step, err)}
}

// likelyCause explains the failures an operator can do something about.
func (t *target) likelyCause(step string, err error) string {
	var (
		errno     unix.Errno
		notFound  *ib.NotFoundError
		inactive  *PortNotActiveError
		noGID     *NoGIDError
		badIndex  *GIDIndexError
		addrState *AddressStateError
		noLID     *NoLIDError
		wcErr     *WCError
		timeout   *CompletionTimeoutError
		mismatch  *PayloadMismatchError
	)
	errors.As(err, &errno)
	switch {
	case errors.As(err, &notFound) && notFound.Port == 0:
		return t.knownDevices()
	case errors.As(err, &notFound):
		dev, _ := t.device()
		return fmt.Sprintf("%s has ports %v", t.opts.Device, dev.Ports)
	case errors.Is(err, sysfs.ErrNoVerbsDevice):
		return "ib_uverbs is not loaded (modprobe ib_uverbs), or the device has no user verbs interface"
	case step == StepOpen && (errno == unix.EACCES || errno == unix.EPERM):
		return fmt.Sprintf("no permission to open /dev/infiniband/%s: run as root, or give the user access to it (rdma-core's udev rules make uverbs devices 0666; a container needs the device and its cgroup rule)",
			t.verbsDevice)
	case step == StepOpen && errno == unix.ENOENT && isPathError(err):
		return fmt.Sprintf("/dev/infiniband/%s does not exist: /dev has no devtmpfs, or a container lacks the device", t.verbsDevice)
	case errors.As(err, &inactive):
		return t.inactiveCause(inactive)
	case errors.As(err, &noGID):
		return t.noGIDCause()
	case errors.As(err, &addrState):
		return addressStateCause(addrState)
	case errors.As(err, &badIndex):
		return "give a populated index with gid-index, or leave it out to let the gid selector choose (grdma gid lists the table)"
	case errors.As(err, &noLID):
		return "the port has no LID: is a subnet manager running on the fabric (opensm)?"
	case errno == unix.ENOMEM && (step == StepRegMR || (t.driverName == "mlx5_core" && (step == StepCreateCQ || step == StepCreateQP))):
		return memlockCause(step)
	case errno == unix.EOPNOTSUPP:
		return "the device does not enable this uverbs command"
	case errno == unix.ENOSPC || errno == unix.EFAULT:
		return "the kernel rejected the command's layout: a grdma bug, please report it"
	case step == StepRTR && errno == unix.ETIMEDOUT && t.addr.GIDIndex >= 0:
		return t.resolutionTimeoutCause()
	case step == StepRTR && (errno == unix.EINVAL || errno == unix.ENODATA || errno == unix.EHOSTUNREACH || errno == unix.ENETUNREACH || errno == unix.ETIMEDOUT):
		return t.addressCause()
	case errors.As(err, &wcErr):
		return t.completionCause(wcErr.WC.Status)
	case errors.As(err, &timeout):
		return "the kernel did not complete the requests: the queue pair stalled (see dmesg)"
	case errors.As(err, &mismatch):
		return "the device delivered wrong data: a device or driver bug"
	case errno == unix.EBUSY:
		return "another object still uses it"
	}
	return ""
}

func isPathError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe)
}

func (t *target) knownDevices() string {
	names, err := t.opts.Sysfs.DeviceNames()
	if err != nil || len(names) == 0 {
		return "there are no RDMA devices (is the driver loaded? rxe: grdma link add rxe0 type rxe netdev eth0)"
	}
	return "the RDMA devices are: " + strings.Join(names, ", ")
}

// netdev names the network device of a RoCE port: the parent of a
// software device, or the netdev of its GIDs.
func (t *target) netdev() string {
	if dev, err := t.device(); err == nil && dev.Netdev != "" {
		return dev.Netdev
	}
	attrs, err := t.opts.Sysfs.GIDAttrs(t.opts.Device, t.opts.Port)
	if err != nil {
		return ""
	}
	for _, a := range attrs {
		if a.Netdev != "" {
			return a.Netdev
		}
	}
	return ""
}

func (t *target) inactiveCause(e *PortNotActiveError) string {
	if t.port.LinkLayer == ib.LinkLayerInfiniBand {
		if e.State == ib.PortInit {
			return "the link is up but no subnet manager has configured the port (opensm)"
		}
		return "no physical link: check the cable and the switch port"
	}
	nd := t.netdev()
	if nd == "" {
		return "the port's network device is down or has no carrier"
	}
	state := ""
	if n, err := t.opts.Sysfs.Netdev(nd); err == nil {
		state = " (operstate " + n.OperState + ")"
	}
	return fmt.Sprintf("network device %s is down or has no carrier%s: ip link set %s up", nd, state, nd)
}

func (t *target) noGIDCause() string {
	if nd := t.netdev(); nd != "" {
		return fmt.Sprintf("RoCE GIDs come from the addresses of network device %s: give it an IP address (ip addr add ... dev %s)", nd, nd)
	}
	return "RoCE GIDs come from the addresses of the port's network device: give it an IP address"
}

func (t *target) addressCause() string {
	return fmt.Sprintf("the kernel could not use GID index %d as the source address, or could not resolve its own GID %s to a MAC address: the address may have left the network device, or the device is down",
		t.addr.GIDIndex, t.addr.GID)
}

// resolutionTimeoutCause explains ETIMEDOUT at RTR on RoCE: the kernel
// resolves the destination GID to a MAC address (its neighbour table) while
// it moves the queue pair to RTR, and gave up.
func (t *target) resolutionTimeoutCause() string {
	nd := t.netdev()
	if nd == "" {
		nd = "the port's network device"
	}
	return fmt.Sprintf("the kernel's address resolution of GID %s on %s timed out: check that %s is up with carrier (ip link show %s), that the address is not tentative or duplicated (ip addr show dev %s), and its neighbour entries (ip neigh show dev %s)",
		t.addr.GID, nd, nd, nd, nd, nd)
}

func addressStateCause(e *AddressStateError) string {
	nd := e.Entry.Netdev
	if e.Entry.State == gid.AddrDADFailed {
		return fmt.Sprintf("another host on the link has the address %s: give %s another address or MAC (ip -6 addr show dev %s shows it dadfailed), or choose another GID with gid-index",
			e.Entry.GID, nd, nd)
	}
	return fmt.Sprintf("the kernel cannot resolve a tentative address: wait for duplicate address detection to finish (ip -6 addr show dev %s), give %s an IPv4 address, or turn DAD off on it (sysctl -w net.ipv6.conf.%s.accept_dad=0)",
		nd, nd, nd)
}

func (t *target) completionCause(status uverbs.WCStatus) string {
	switch status {
	case uverbs.WCRetryExcErr:
		if nd := t.netdev(); nd != "" {
			return fmt.Sprintf("packets looped back through network device %s were lost: is it up, and is nothing filtering UDP port 4791?", nd)
		}
		return "packets were lost on the way"
	case uverbs.WCRNRRetryExcErr:
		return "no receive request was ready for the SEND"
	case uverbs.WCRemAccessErr, uverbs.WCLocProtErr:
		return "the memory region's keys or access rights were refused"
	}
	return ""
}

func memlockCause(step string) string {
	var lim unix.Rlimit
	limit := "unknown"
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
		limit = fmt.Sprintf("%d bytes", lim.Cur)
		if lim.Cur == unix.RLIM_INFINITY {
			limit = "unlimited"
		}
	}
	what := "the memory region"
	if step != StepRegMR {
		what = "the queue's buffers"
	}
	return fmt.Sprintf("RLIMIT_MEMLOCK (%s) is too small to pin %s: raise it (ulimit -l, systemd LimitMEMLOCK=) or grant CAP_IPC_LOCK",
		limit, what)
}
