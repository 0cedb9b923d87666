// Package completion is grdma's shell completion: it walks the grammar of
// each object (package grammar, the one table of verbs, keywords and
// values that the parsers use too) and names what the machine has where a
// value is a device name, DEV/PORT, a netdev or a network namespace.
// Verbs and keywords are matched as rdma abbreviates them
// (cmdline.Abbrev). Completion never fails: what cannot be read is not
// offered.
package completion

import (
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
)

// Names is where the names completion offers come from; nil functions
// offer none.
type Names struct {
	// Devices lists the RDMA devices (over RDMA netlink).
	Devices func() ([]nldev.Device, error)
	// Sysfs reads /sys/class/net for netdev names.
	Sysfs func() (sysfs.FS, error)
	// NetnsDir is where named network namespaces live; DefaultNetnsDir
	// when empty.
	NetnsDir string
}

// DefaultNetnsDir is where ip netns add makes named network namespaces.
const DefaultNetnsDir = "/run/netns"

// Complete returns the candidates for the word toComplete after words, the
// words after object on a command line ("link", ["add", "rxe0", "type"],
// "r" gives "rxe"). known is false when object has no grammar.
func Complete(src Names, object string, words []string, toComplete string) (cands []string, known bool) {
	g := grammar.Object(object)
	if g == nil {
		return nil, false
	}
	c := &completer{src: src, toComplete: toComplete}
	return c.filter(g.Next(words, c.values)), true
}

// NetnsNames lists the named network namespaces of dir (DefaultNetnsDir
// when empty); none when it cannot be read.
func NetnsNames(dir string) []string {
	if dir == "" {
		dir = DefaultNetnsDir
	}
	return dirNames(os.ReadDir(dir))
}

// dirNames returns the names of a directory's entries; none on error.
func dirNames(entries []fs.DirEntry, err error) []string {
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// completer produces the candidates of one word being completed.
type completer struct {
	src        Names
	toComplete string
}

// filter keeps the candidates starting with the word being completed (the
// shells filter too; this keeps the answer short and testable).
func (c *completer) filter(cands []string) []string {
	out := cands[:0:0]
	for _, s := range cands {
		if strings.HasPrefix(s, c.toComplete) {
			out = append(out, s)
		}
	}
	return out
}

// devices lists the RDMA devices; none on any error.
func (c *completer) devices() []nldev.Device {
	if c.src.Devices == nil {
		return nil
	}
	devs, err := c.src.Devices()
	if err != nil {
		return nil
	}
	return devs
}

func (c *completer) deviceNames() []string {
	var names []string
	for _, d := range c.devices() {
		names = append(names, d.Name)
	}
	return names
}

// ports lists DEV/PORT for every port; with withDevs, also each DEV. The
// ports of a device are offered once the word names it (or has its
// slash), so a machine with many devices first completes the device.
func (c *completer) ports(withDevs bool) []string {
	var out []string
	for _, d := range c.devices() {
		if withDevs {
			out = append(out, d.Name)
		}
		if withDevs && d.Name != c.toComplete && !strings.HasPrefix(c.toComplete, d.Name+"/") {
			continue
		}
		for p := uint32(1); p <= d.NumPorts; p++ {
			out = append(out, d.Name+"/"+strconv.FormatUint(uint64(p), 10))
		}
	}
	return out
}

// netdevs lists the network devices of /sys/class/net.
func (c *completer) netdevs() []string {
	if c.src.Sysfs == nil {
		return nil
	}
	fsys, err := c.src.Sysfs()
	if err != nil {
		return nil
	}
	return dirNames(fsys.ReadDir("sys/class/net"))
}

// displays lists the PCI display functions (class 0x03) and processing
// accelerators (0x12): what gpu BDF names.
func (c *completer) displays() []string {
	if c.src.Sysfs == nil {
		return nil
	}
	fsys, err := c.src.Sysfs()
	if err != nil {
		return nil
	}
	addrs, _ := pci.List(fsys)
	var out []string
	for _, a := range addrs {
		if id, err := pci.ReadIdentity(fsys, a); err == nil && (id.Class.Base() == 0x03 || id.Class.Base() == 0x12) {
			out = append(out, a.String())
		}
	}
	return out
}

// values names the candidates of a value of the grammar.
func (c *completer) values(v grammar.Value, done []string) []string {
	switch v.Kind {
	case grammar.Words:
		return v.Words
	case grammar.Device:
		return c.deviceNames()
	case grammar.DevPort:
		return c.ports(true)
	case grammar.Port:
		return c.ports(false)
	case grammar.Netdev:
		return c.netdevs()
	case grammar.Netns:
		return NetnsNames(c.src.NetnsDir)
	case grammar.GPUFunction:
		return c.displays()
	case grammar.AutoOnOff:
		if len(done) == 1 && done[0] == "off" {
			return nil
		}
		return []string{"on", "off"}
	}
	return v.Words // free text (names, numbers), and the words it also takes
}

// DevPorts completes a DEV[/PORT] value of an option (the exporter's
// --pingmesh.device): device names, then the ports of the one named.
func DevPorts(src Names, toComplete string) []string {
	c := &completer{src: src, toComplete: toComplete}
	return c.filter(c.ports(true))
}
