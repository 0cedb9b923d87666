package locator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/internal/devinfofixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/rdmacm"
)

// TestRDMACMNetlink: the node RDMA netlink's recorded GET_CHARDEV reply
// names (rdma_cm, misc major 10, ABI 4).
func TestRDMACMNetlink(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			rec := devinfofixture.Dir(filepath.Join("..", "devinfo", "testdata", k))
			nl := nldev.NewClient(rec.Kernel().Conn())
			defer nl.Close()
			root := t.TempDir()
			n, err := RDMACM(mustFS(t, root), nl)
			if err != nil {
				t.Fatal(err)
			}
			if n.Path != filepath.Join(root, "dev/infiniband/rdma_cm") || n.ABI != rdmacm.ABIVersion || unix.Major(n.Dev) != 10 {
				t.Errorf("node %+v (major %d)", n, unix.Major(n.Dev))
			}
		})
	}
}

// TestRDMACMSysfs: without netlink, /sys/class/misc/rdma_cm as the
// guests show it (testdata/cmconfig's capture).
func TestRDMACMSysfs(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "cmconfig", k)
			want, err := os.ReadFile(filepath.Join(dir, "sys/class/misc/rdma_cm/dev"))
			if err != nil {
				t.Fatal(err)
			}
			n, err := RDMACM(mustFS(t, dir), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%d:%d\n", unix.Major(n.Dev), unix.Minor(n.Dev)); got != string(want) || n.ABI != rdmacm.ABIVersion {
				t.Errorf("node %+v, dev %q; sysfs says %q", n, got, want)
			}
		})
	}
	// Neither: rdma_ucm is not loaded.
	_, err := RDMACM(mustFS(t, t.TempDir()), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no rdma_cm: %v", err)
	}
}

// TestCMDevice: the device of the port the CM bound an ID to, by node
// GUID in sysfs trees captured in the guests; a GUID sysfs does not show
// is an error naming it.
func TestCMDevice(t *testing.T) {
	for _, k := range []string{"6.1", "6.12"} {
		t.Run(k, func(t *testing.T) {
			fsys := mustFS(t, filepath.Join("..", "sysfs", "testdata", "rxe-"+k))
			devs, err := fsys.Devices()
			if err != nil || len(devs) < 2 {
				t.Fatalf("%d devices: %v", len(devs), err)
			}
			for _, d := range devs {
				if name, err := CMDevice(fsys, rdmacm.DevicePort{Index: 9, NodeGUID: d.NodeGUID, Port: 1}); err != nil || name != d.Name {
					t.Errorf("node GUID %#x: %q, %v; want %s", d.NodeGUID, name, err, d.Name)
				}
			}
			_, err = CMDevice(fsys, rdmacm.DevicePort{Index: 7, NodeGUID: 0x1234, Port: 1})
			if err == nil || !strings.Contains(err.Error(), "device index 7 (node GUID 0x1234), which sysfs does not show") {
				t.Errorf("unknown GUID: %v", err)
			}
		})
	}
}
