package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Class is a PCI class code: base class, subclass and programming
// interface, 0x030200 for a 3D controller.
type Class uint32

// Class codes that matter for GPU–NIC topology.
const (
	ClassHostBridge Class = 0x060000
	ClassPCIBridge  Class = 0x060400
	ClassEthernet   Class = 0x020000
	ClassInfiniBand Class = 0x020700
	ClassVGA        Class = 0x030000 // display: VGA compatible
	Class3D         Class = 0x030200 // display: 3D controller (datacenter GPUs)
	ClassNVSwitch   Class = 0x068000 // bridge: other (NVIDIA NVSwitch)
	// ClassProcessingAccelerator is what AMD Instinct MI300 GPUs report
	// (amdgpu binds it; RCCL takes it for a GPU).
	ClassProcessingAccelerator Class = 0x120000
)

// Base returns the base class: 0x03 display, 0x02 network, 0x06 bridge.
func (c Class) Base() uint8 { return uint8(c >> 16) }

// String formats c as sysfs does: "0x030200".
func (c Class) String() string { return fmt.Sprintf("0x%06x", uint32(c)) }

// MarshalText writes String.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// ID is a vendor or device ID.
type ID uint16

// String formats id as sysfs does: "0x10de".
func (id ID) String() string { return fmt.Sprintf("0x%04x", uint16(id)) }

// MarshalText writes String.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// Function is one PCI function as sysfs shows it. Fields that could not
// be read are zero (NUMANode -1) or nil.
type Function struct {
	Address Address `json:"address"`
	// Path is the function's real directory on the machine,
	// "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0".
	Path string `json:"path"`
	// HostBridge is the directory above the topmost function of Path,
	// "pci0000:00": the host bridge the function hangs off.
	HostBridge string `json:"host_bridge"`
	// Upstream are the bridges between the function and its host bridge,
	// nearest first: for an endpoint under a switch, the switch's
	// downstream port, its upstream port, then the root port.
	Upstream []Address `json:"upstream"`

	Class           Class `json:"class"`
	Vendor          ID    `json:"vendor"`
	Device          ID    `json:"device"`
	SubsystemVendor ID    `json:"subsystem_vendor"`
	SubsystemDevice ID    `json:"subsystem_device"`
	// NUMANode is numa_node: -1 when the firmware gives none (common in
	// VMs), the kernel has no NUMA support, or it is unreadable.
	NUMANode int `json:"numa_node"`
	// LocalCPUs is local_cpulist, "0-15"; "" when unreadable.
	LocalCPUs string `json:"local_cpus,omitempty"`
	// Driver is the bound driver ("mlx5_core", "nvidia"); "" when none.
	Driver string `json:"driver,omitempty"`
	// IOMMUGroup is the function's IOMMU group ("17"), "" without an
	// active IOMMU; IOMMUType is that group's type: "identity"
	// (passthrough), "DMA" or "DMA-FQ" (translated), "" when unknown.
	IOMMUGroup string `json:"iommu_group,omitempty"`
	IOMMUType  string `json:"iommu_type,omitempty"`
	// Link is nil for a function that is not PCI Express (no *_link_*
	// files: conventional PCI, the host bridge, virtio in many VMs).
	Link *Link `json:"link"`
	// AER are the error counters since boot; nil without AER reporting.
	AER *AER `json:"aer"`
	// Config is nil when config space beyond the header is unreadable
	// (not root).
	Config *Config `json:"config"`
	// Netdevs and RDMADevices are the network and RDMA devices the
	// function carries (its net/ and infiniband/ directories).
	Netdevs     []string `json:"netdevs,omitempty"`
	RDMADevices []string `json:"rdma_devices,omitempty"`
}

// AER is a function's Advanced Error Reporting counters (the TOTAL_ERR_*
// lines of aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal).
type AER struct {
	Correctable uint64 `json:"correctable"`
	NonFatal    uint64 `json:"nonfatal"`
	Fatal       uint64 `json:"fatal"`
}

// Total is the sum of the three counters.
func (a AER) Total() uint64 { return a.Correctable + a.NonFatal + a.Fatal }

const devicesDir = "sys/bus/pci/devices"

// List lists the functions in sys/bus/pci/devices, ordered by address; a
// machine without PCI (or a root without sys/bus/pci) has none.
func List(fsys fs.FS) ([]Address, error) {
	entries, err := fs.ReadDir(fsys, devicesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var addrs []Address
	for _, e := range entries {
		if a, err := ParseAddress(e.Name()); err == nil {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, Address.Compare)
	return addrs, nil
}

// Identity is what a function is, read with three small reads: enough to
// pick GPUs out of a machine's functions before reading them whole.
type Identity struct {
	Address Address
	Class   Class
	Vendor  ID
	Device  ID
}

// ReadIdentity reads the class, vendor and device of the function at
// addr (zero where unreadable); a function that does not exist is
// fs.ErrNotExist.
func ReadIdentity(fsys fs.FS, addr Address) (Identity, error) {
	dir := devicesDir + "/" + addr.String()
	class, err := fs.ReadFile(fsys, dir+"/class")
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, err
	}
	id := Identity{Address: addr, Class: Class(parseHex(string(class), 32))}
	id.Vendor = ID(readHex(fsys, dir+"/vendor", 16))
	id.Device = ID(readHex(fsys, dir+"/device", 16))
	return id, nil
}

// Functions reads every function in sys/bus/pci/devices, ordered by
// address. A function that vanishes while it is read is left out; a
// machine without PCI (or a root without sys/bus/pci) has none.
func Functions(fsys fs.ReadLinkFS) ([]Function, error) {
	addrs, err := List(fsys)
	if err != nil {
		return nil, err
	}
	out := make([]Function, 0, len(addrs))
	for _, a := range addrs {
		f, err := ReadFunction(fsys, a)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// ReadFunction reads the function at addr. The only errors are a function
// that does not exist (fs.ErrNotExist) and a sysfs link that cannot be
// followed.
func ReadFunction(fsys fs.ReadLinkFS, addr Address) (Function, error) {
	dir, err := Resolve(fsys, devicesDir+"/"+addr.String())
	if err != nil {
		return Function{}, err
	}
	f := Function{Address: addr, Path: "/" + dir, NUMANode: -1}
	f.HostBridge, f.Upstream = upstream(dir)
	f.Class = Class(readHex(fsys, dir+"/class", 32))
	f.Vendor = ID(readHex(fsys, dir+"/vendor", 16))
	f.Device = ID(readHex(fsys, dir+"/device", 16))
	f.SubsystemVendor = ID(readHex(fsys, dir+"/subsystem_vendor", 16))
	f.SubsystemDevice = ID(readHex(fsys, dir+"/subsystem_device", 16))
	if s, ok := readText(fsys, dir+"/numa_node"); ok {
		if n, err := strconv.Atoi(s); err == nil && n >= -1 {
			f.NUMANode = n
		}
	}
	f.LocalCPUs, _ = readText(fsys, dir+"/local_cpulist")
	f.Driver = linkBase(fsys, dir+"/driver")
	if g := linkBase(fsys, dir+"/iommu_group"); g != "" {
		f.IOMMUGroup = g
		f.IOMMUType, _ = readText(fsys, "sys/kernel/iommu_groups/"+g+"/type")
	}
	if max, ok := readText(fsys, dir+"/max_link_speed"); ok {
		l := &Link{MaxSpeed: ParseSpeed(max)}
		cur, _ := readText(fsys, dir+"/current_link_speed")
		l.Speed = ParseSpeed(cur)
		l.Width = readInt(fsys, dir+"/current_link_width")
		l.MaxWidth = readInt(fsys, dir+"/max_link_width")
		f.Link = l
	}
	f.AER = readAER(fsys, dir)
	if b, err := fs.ReadFile(fsys, dir+"/config"); err == nil {
		f.Config = parseConfig(b)
	}
	f.Netdevs = listNames(fsys, dir+"/net")
	f.RDMADevices = listNames(fsys, dir+"/infiniband")
	return f, nil
}

// upstream splits a resolved function directory into its host bridge (the
// component above the topmost function) and the functions between the
// function and it, nearest first.
func upstream(dir string) (hostBridge string, chain []Address) {
	parts := strings.Split(dir, "/")
	i := len(parts) - 2
	for ; i >= 0 && isAddress(parts[i]); i-- {
		a, _ := ParseAddress(parts[i])
		chain = append(chain, a)
	}
	if i >= 0 {
		hostBridge = parts[i]
	}
	return hostBridge, chain
}

// readText reads a small attribute without its trailing newline.
func readText(fsys fs.FS, name string) (string, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func readHex(fsys fs.FS, name string, bits int) uint64 {
	s, _ := readText(fsys, name)
	return parseHex(s, bits)
}

// parseHex parses "0x10de"; 0 when it is not a number.
func parseHex(s string, bits int) uint64 {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0x"), 16, bits)
	if err != nil {
		return 0
	}
	return v
}

func readInt(fsys fs.FS, name string) int {
	s, _ := readText(fsys, name)
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// linkBase is the last element of a symbolic link's target ("" when the
// link does not exist): the driver's or IOMMU group's name.
func linkBase(fsys fs.ReadLinkFS, name string) string {
	target, err := fsys.ReadLink(name)
	if err != nil {
		return ""
	}
	return path.Base(target)
}

func listNames(fsys fs.FS, dir string) []string {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// readAER reads the TOTAL_ERR_* lines of the aer_dev_* files.
func readAER(fsys fs.FS, dir string) *AER {
	var a AER
	found := false
	for _, f := range []struct {
		file string
		to   *uint64
	}{
		{"aer_dev_correctable", &a.Correctable},
		{"aer_dev_nonfatal", &a.NonFatal},
		{"aer_dev_fatal", &a.Fatal},
	} {
		b, err := fs.ReadFile(fsys, dir+"/"+f.file)
		if err != nil {
			continue
		}
		found = true
		for line := range strings.Lines(string(b)) {
			name, count, ok := strings.Cut(strings.TrimSpace(line), " ")
			if ok && strings.HasPrefix(name, "TOTAL_") {
				*f.to, _ = strconv.ParseUint(strings.TrimSpace(count), 10, 64)
			}
		}
	}
	if !found {
		return nil
	}
	return &a
}

// maxLinks bounds the symbolic links Resolve follows, as the kernel's
// path walk does (ELOOP).
const maxLinks = 40

// Resolve returns name, relative to the root of fsys, with every symbolic
// link in it followed and no "." or ".." left: what realpath(3) gives on
// the machine, without the leading "/". Links are resolved against the
// root, never above it.
func Resolve(fsys fs.ReadLinkFS, name string) (string, error) {
	var done []string
	todo := strings.Split(name, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		p := strings.Join(append(done, c), "/")
		info, err := fsys.Lstat(p)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: name, Err: errTooManyLinks}
		}
		target, err := fsys.ReadLink(p)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return strings.Join(done, "/"), nil
}

var errTooManyLinks = errors.New("too many levels of symbolic links")
