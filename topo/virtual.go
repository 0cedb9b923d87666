package topo

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/pci"
)

// Platform says whether the node is a virtual machine.
type Platform uint8

// Platforms. PlatformAuto detects it (Virtual).
const (
	PlatformAuto Platform = iota
	PlatformBareMetal
	PlatformVirtual
)

// Virtual is whether the node looks like a virtual machine, whose PCI
// topology is the hypervisor's invention: GPUs and NICs on the root bus
// without bridges, or behind emulated ports, with NUMA nodes unknown. NCCL
// classifies what it is shown, so a GPU and a NIC that share a switch on
// the host often look PHB apart in the guest and lose GDR.
type Virtual struct {
	// Likely is the verdict (Options.Platform overrides it).
	Likely bool `json:"likely"`
	// Signals are what points at a hypervisor, or at a topology that is
	// not the host's.
	Signals []string `json:"signals"`
	// Remedies are what to do about it when Likely.
	Remedies []string `json:"remedies,omitempty"`
}

// vmVendors are DMI system vendors and products of hypervisors.
var vmVendors = []string{"QEMU", "KVM", "Xen", "VMware", "innotek GmbH", "Microsoft Corporation Virtual Machine",
	"Amazon EC2", "Google Compute Engine", "OpenStack Foundation", "Firecracker", "Cloud Hypervisor", "BHYVE"}

// Remedies of a virtual topology.
var virtualRemedies = []string{
	"give NCCL the host's topology: NCCL_TOPO_FILE=<xml> (cloud images ship one per instance type; NCCL reads /var/run/nvidia-topologyd/virtualTopology.xml by default)",
	"or let NCCL use GDR whatever the guest's classes: NCCL_NET_GDR_LEVEL=SYS",
}

func detectVirtual(fsys fs.FS, t *Topology, platform Platform) Virtual {
	var v Virtual
	strong := false
	if b, err := fs.ReadFile(fsys, "proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			key, flags, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(key) == "flags" && hasWord(flags, "hypervisor") {
				v.Signals = append(v.Signals, "the CPU has the hypervisor flag (/proc/cpuinfo)")
				strong = true
				break
			}
		}
	}
	vendor, _ := readLine(fsys, "sys/class/dmi/id/sys_vendor")
	product, _ := readLine(fsys, "sys/class/dmi/id/product_name")
	for _, vm := range vmVendors {
		if vendor != "" && strings.Contains(vendor+" "+product, vm) {
			v.Signals = append(v.Signals, "DMI names a hypervisor: "+strings.TrimSpace(vendor+" "+product))
			strong = true
			break
		}
	}
	var rootBus, noNUMA, devices int
	for _, f := range append(gpuFunctions(t), nicFunctions(t)...) {
		devices++
		if len(f.Upstream) == 0 {
			rootBus++
		}
		if f.NUMANode < 0 {
			noNUMA++
		}
		if strings.Contains(f.Path, "/VMBUS") {
			v.Signals = append(v.Signals, f.Address.String()+" is on Hyper-V's VMBus")
			strong = true
		}
	}
	if rootBus > 0 {
		v.Signals = append(v.Signals, plural(rootBus, "GPU or NIC sits", "GPUs and NICs sit")+" on a root bus with no port above")
	}
	if devices > 0 && noNUMA == devices {
		v.Signals = append(v.Signals, "no GPU or NIC has a NUMA node (numa_node -1)")
	}
	switch platform {
	case PlatformBareMetal:
		v.Likely = false
		v.Signals = append(v.Signals, "taken as bare metal, as asked")
	case PlatformVirtual:
		v.Likely = true
		v.Signals = append(v.Signals, "taken as virtual, as asked")
	default:
		v.Likely = strong
	}
	if v.Likely {
		v.Remedies = virtualRemedies
	}
	if v.Signals == nil {
		v.Signals = []string{}
	}
	return v
}

func gpuFunctions(t *Topology) []*pci.Function {
	var out []*pci.Function
	for i := range t.GPUs {
		out = append(out, &t.GPUs[i].Function)
	}
	return out
}

func nicFunctions(t *Topology) []*pci.Function {
	var out []*pci.Function
	for _, n := range t.NICs {
		if n.Function != nil {
			out = append(out, n.Function)
		}
	}
	return out
}

func hasWord(s, word string) bool { return slices.Contains(strings.Fields(s), word) }

func readLine(fsys fs.FS, name string) (string, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
