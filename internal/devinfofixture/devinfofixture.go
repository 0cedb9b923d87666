// Package devinfofixture serves the recordings of devinfo/testdata (made
// in the e2e guest by devinfo/testdata/capture.sh) to tests: the netlink
// replies, the uverbs answers of each device, and a sysfs root with the
// netdevs' operstate.
package devinfofixture

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Dir is the recording of one kernel, e.g. "../devinfo/testdata/6.12".
type Dir string

// Kernel serves the netlink replies: the device dump, each device's port
// dump and port 1, its character devices, and rdma_cm.
func (d Dir) Kernel() *nlfixture.Kernel {
	k := nlfixture.NewKernel(filepath.Join(string(d), "nl"))
	k.On(nlfixture.Request{Cmd: nldev.CmdGet, Dump: true, Dev: -1, Port: -1}, "get_dump.bin")
	k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: -1, Port: -1, ChardevType: "rdma_cm"}, "chardev_rdma_cm.bin")
	for n := int64(0); n < 2; n++ {
		k.On(nlfixture.Request{Cmd: nldev.CmdPortGet, Dump: true, Dev: n, Port: -1}, fmt.Sprintf("port_dump_dev%d.bin", n))
		k.On(nlfixture.Request{Cmd: nldev.CmdPortGet, Dev: n, Port: 1}, fmt.Sprintf("port_doit_dev%d_port1.bin", n))
		k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: n, Port: -1, ChardevType: "uverbs"}, fmt.Sprintf("chardev_uverbs_dev%d.bin", n))
		for _, typ := range []string{"umad", "issm"} {
			k.On(nlfixture.Request{Cmd: nldev.CmdGetChardev, Dev: n, Port: 1, ChardevType: typ}, fmt.Sprintf("chardev_%s_dev%d_port1.bin", typ, n))
		}
	}
	return k
}

// Sysfs makes, under dir, a sysfs root with the recorded netdevs'
// operstate (tools/netdevs.txt: "NAME IFINDEX OPERSTATE") and the classes
// of ib_umad and rdma_ucm, which were loaded (the GET_CHARDEV replies
// name their devices).
func (d Dir) Sysfs(dir string) (sysfs.FS, error) {
	for _, class := range []string{"infiniband_mad", "misc/rdma_cm"} {
		if err := os.MkdirAll(filepath.Join(dir, "sys", "class", class), 0o755); err != nil {
			return sysfs.FS{}, err
		}
	}
	b, err := os.ReadFile(filepath.Join(string(d), "tools", "netdevs.txt"))
	if err != nil {
		return sysfs.FS{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return sysfs.FS{}, fmt.Errorf("netdevs.txt: line %q", line)
		}
		net := filepath.Join(dir, "sys", "class", "net", f[0])
		if err := os.MkdirAll(net, 0o755); err != nil {
			return sysfs.FS{}, err
		}
		if err := os.WriteFile(filepath.Join(net, "operstate"), []byte(f[2]+"\n"), 0o644); err != nil {
			return sysfs.FS{}, err
		}
	}
	return sysfs.NewFS(dir)
}

// IbvDevinfo returns what ibv_devinfo -v printed for the recorded state.
func (d Dir) IbvDevinfo() (string, error) {
	b, err := os.ReadFile(filepath.Join(string(d), "tools", "ibv_devinfo-v.txt"))
	return string(b), err
}

// Verbs answers the uverbs commands of device dev with the recorded
// answers; it implements devinfo.Verbs.
func (d Dir) Verbs(dev string) *Verbs { return &Verbs{dir: filepath.Join(string(d), "verbs", dev)} }

// Verbs is one device's recorded uverbs answers.
type Verbs struct{ dir string }

func (v *Verbs) decode(name string, into any) error {
	b, err := os.ReadFile(filepath.Join(v.dir, name))
	if err != nil {
		return err
	}
	_, err = binary.Decode(b, binary.NativeEndian, into)
	return err
}

// QueryDeviceEx answers the extended QUERY_DEVICE (rxe adds no driver data).
func (v *Verbs) QueryDeviceEx() (uverbs.DeviceAttrEx, uverbs.DriverDeviceAttr, error) {
	var a uverbs.DeviceAttrEx
	return a, uverbs.DriverDeviceAttr{}, v.decode("query_device_ex.bin", &a)
}

// QueryPortEx answers QUERY_PORT (ioctl) for rxe's driver id.
func (v *Verbs) QueryPortEx(driverID uint32, port uint8) (uverbs.PortAttrEx, error) {
	var a uverbs.PortAttrEx
	if driverID != uverbs.DriverIDRXE {
		return a, fmt.Errorf("QUERY_PORT with driver id %d, the recording is rxe's (%d)", driverID, uverbs.DriverIDRXE)
	}
	return a, v.decode(fmt.Sprintf("query_port_%d.bin", port), &a)
}

// QueryPort answers the write QUERY_PORT.
func (v *Verbs) QueryPort(port uint8) (uverbs.PortAttr, error) {
	a, err := v.QueryPortEx(uverbs.DriverIDRXE, port)
	return a.PortAttr, err
}

// QueryGIDTable answers QUERY_GID_TABLE.
func (v *Verbs) QueryGIDTable(driverID uint32, maxEntries int) ([]uverbs.GIDEntry, error) {
	b, err := os.ReadFile(filepath.Join(v.dir, "gid_table.bin"))
	if err != nil {
		return nil, err
	}
	entries := make([]uverbs.GIDEntry, len(b)/32)
	if len(entries) > maxEntries {
		return nil, fmt.Errorf("%d GID entries recorded, room for %d", len(entries), maxEntries)
	}
	_, err = binary.Decode(b, binary.NativeEndian, entries)
	return entries, err
}

// CompVectors is GET_CONTEXT's num_comp_vectors.
func (v *Verbs) CompVectors() int {
	b, _ := os.ReadFile(filepath.Join(v.dir, "num_comp_vectors.txt"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// Close does nothing.
func (v *Verbs) Close() error { return nil }
