package topo

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/grdma/grdma/pci"
)

// GPU vendors.
const (
	VendorNVIDIA pci.ID = 0x10de
	VendorAMD    pci.ID = 0x1002
)

// firstTuringID is the lowest PCI device ID of NVIDIA's Turing generation:
// the open kernel modules, which dma-buf export needs, support "any
// Turing or later GPU", and their README's table of supported IDs starts
// at 0x1E02 (595.45.04); Volta (0x1DBx) and older are below.
const firstTuringID = 0x1e00

// GPU is a GPU's PCI function with what the driver says about it.
type GPU struct {
	// Name is "GPU<n>", n counting GPUs in PCI address order as
	// nvidia-smi does (CUDA's default order may differ: set
	// CUDA_DEVICE_ORDER=PCI_BUS_ID to match).
	Name     string       `json:"name"`
	Function pci.Function `json:"function"`
	// Vendor is "NVIDIA" or "AMD"; "" for a function the caller named
	// (Options.GPUs) that is neither.
	Vendor string `json:"vendor"`
	// Named is true when the caller listed the function (Options.GPUs).
	Named bool `json:"named"`
	// Driver is the NVIDIA driver's view of the GPU
	// (/proc/driver/nvidia/gpus/BDF/information); nil when it is not
	// loaded or the file is unreadable.
	Driver *NVIDIAInfo `json:"driver"`
	// DMABuf says whether the model can export its memory as dma-buf
	// (Turing or newer: the open kernel modules support nothing older);
	// nil for a GPU that is not NVIDIA's.
	DMABuf *bool `json:"dmabuf_capable"`
	// Hops are the links from the GPU up to its root port.
	Hops []Hop `json:"hops"`
}

// Model names the GPU: the driver's model name ("NVIDIA H100 80GB
// HBM3"), else its vendor and IDs ("NVIDIA 0x10de:0x2330"), else for a
// function the caller named its IDs and class ("0x1af4:0x1050 class
// 0x030000").
func (g GPU) Model() string {
	f := g.Function
	switch {
	case g.Driver != nil && g.Driver.Model != "":
		return g.Driver.Model
	case g.Vendor != "":
		return fmt.Sprintf("%s %s:%s", g.Vendor, f.Vendor, f.Device)
	}
	return fmt.Sprintf("%s:%s class %s", f.Vendor, f.Device, f.Class)
}

// NVIDIAInfo is the NVIDIA driver's information file of one GPU.
type NVIDIAInfo struct {
	Model       string `json:"model"`        // "NVIDIA H100 80GB HBM3"
	UUID        string `json:"uuid"`         // "GPU-..."
	BusLocation string `json:"bus_location"` // "0000:00:06.0"
	DeviceMinor string `json:"device_minor"` // /dev/nvidiaN
	Firmware    string `json:"firmware,omitempty"`
	// Excluded is "GPU Excluded" ("Blacklisted" on older drivers).
	Excluded string `json:"excluded,omitempty"`
}

// isGPU reports whether f is a GPU by its IDs: an NVIDIA or AMD display
// function (class 0x03xxxx: VGA 0x0300, 3D 0x0302, AMD Instinct MI200
// 0x0380), or an AMD processing accelerator (0x1200: Instinct MI300, which
// RCCL's class table takes for a GPU too). NVSwitches (0x0680), audio
// functions (0x0403) and bridges are not.
func isGPU(f pci.Identity) (vendor string, ok bool) {
	switch {
	case f.Vendor == VendorNVIDIA && f.Class.Base() == 0x03:
		return "NVIDIA", true
	case f.Vendor == VendorAMD && (f.Class.Base() == 0x03 || f.Class>>8 == pci.ClassProcessingAccelerator>>8):
		return "AMD", true
	}
	return "", false
}

// dmabufCapable is the Turing-or-newer rule by device ID.
func dmabufCapable(f pci.Function) *bool {
	if f.Vendor != VendorNVIDIA {
		return nil
	}
	ok := f.Device >= firstTuringID
	return &ok
}

// nvidiaGPUsDir holds one directory per GPU the NVIDIA driver drives.
const nvidiaGPUsDir = "proc/driver/nvidia/gpus"

// readNVIDIAInfo reads proc/driver/nvidia/gpus/BDF/information: lines
// "Key: \t value" (kernel-open/nvidia/nv-procfs.c).
func readNVIDIAInfo(fsys fs.FS, addr pci.Address) *NVIDIAInfo {
	b, err := fs.ReadFile(fsys, nvidiaGPUsDir+"/"+addr.String()+"/information")
	if err != nil {
		return nil
	}
	return parseNVIDIAInfo(string(b))
}

func parseNVIDIAInfo(text string) *NVIDIAInfo {
	info := &NVIDIAInfo{}
	for line := range strings.Lines(text) {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "Model":
			info.Model = value
		case "GPU UUID":
			info.UUID = value
		case "Bus Location":
			info.BusLocation = value
		case "Device Minor":
			info.DeviceMinor = value
		case "GPU Firmware":
			info.Firmware = value
		case "GPU Excluded", "Blacklisted":
			info.Excluded = value
		}
	}
	return info
}
