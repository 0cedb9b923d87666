package nldev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OpenNetNS opens a network namespace the way iproute2's -n and
// `dev set DEV netns` name one: a name in /run/netns (ip netns add), a path
// (anything with a '/'), or the PID of a process inside it. The caller
// closes the file. A namespace that exists but cannot be opened is told
// apart from one that does not exist, so that the message does not send
// the user looking for it.
func OpenNetNS(ns string) (*os.File, error) {
	if ns == "" {
		return nil, errors.New("no network namespace named: give a name in /run/netns, a path or a PID")
	}
	path := filepath.Join("/run/netns", ns)
	switch {
	case strings.Contains(ns, "/"):
		path = ns
	case strings.Trim(ns, "0123456789") == "":
		path = fmt.Sprintf("/proc/%s/ns/net", ns)
	}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("network namespace %s: %s: %w: run as root", ns, path, pathErrno(err))
	case err != nil:
		return nil, fmt.Errorf("network namespace %s not found (%s: %w)", ns, path, pathErrno(err))
	}
	return f, nil
}

// pathErrno strips the *os.PathError around an errno: the message names
// the path already. errors.Is still sees the errno.
func pathErrno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// DialNetNS is Dial inside the network namespace ns (see OpenNetNS for the
// forms of ns); "" is the caller's own. Equivalent of `rdma -n NETNS`.
func DialNetNS(ns string) (*Client, error) {
	if ns == "" {
		return Dial(nil)
	}
	f, err := OpenNetNS(ns)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Dial(&Config{NetNS: int(f.Fd())})
}

// MoveDeviceToNetNS moves an RDMA device into the network namespace ns
// (see OpenNetNS). Equivalent of `rdma dev set NAME netns NS`.
func (c *Client) MoveDeviceToNetNS(name, ns string) error {
	f, err := OpenNetNS(ns)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.SetDeviceNetNS(name, int(f.Fd()))
}

// MonitorNetNS is Monitor on the RDMA netlink of the network namespace ns
// (see OpenNetNS); "" is the caller's own. Equivalent of
// `rdma -n NETNS monitor`.
func (c *Client) MonitorNetNS(ns string) (*Monitor, error) {
	if ns == "" {
		return c.Monitor(nil)
	}
	f, err := OpenNetNS(ns)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return c.Monitor(&Config{NetNS: int(f.Fd())})
}
