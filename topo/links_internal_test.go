package topo

import (
	"testing"

	"github.com/grdma/grdma/pci"
)

func fn(l *pci.Link) *pci.Function { return &pci.Function{Link: l} }

// TestJudgeLink: a link is judged against the lower of both ends'
// capabilities, as NCCL and NVML take it; the values are those of the
// kernel's and mlx5's messages (shared/reference/gpu-nic-topology.md §1,
// §6): no QEMU device trains a link below what both ends can do, so no
// captured tree has one.
func TestJudgeLink(t *testing.T) {
	gen4x16 := &pci.Link{Speed: pci.Gen4, Width: 16, MaxSpeed: pci.Gen4, MaxWidth: 16}
	for _, tt := range []struct {
		name         string
		lower, upper *pci.Link
		state        LinkState
		speed, width bool
	}{
		{"equal", gen4x16, gen4x16, LinkOK, false, false},
		// mlx5: "limited by 8.0 GT/s PCIe x8 link at 0000:00:01.0 (capable of ... 8.0 GT/s PCIe x16 link)"
		{"width", &pci.Link{Speed: pci.Gen3, Width: 8, MaxSpeed: pci.Gen3, MaxWidth: 16}, &pci.Link{Speed: pci.Gen3, Width: 8, MaxSpeed: pci.Gen3, MaxWidth: 16}, LinkDegraded, false, true},
		// Gen5 x16 retrained to Gen3 x8 after re-seating
		{"both", &pci.Link{Speed: pci.Gen3, Width: 8, MaxSpeed: pci.Gen5, MaxWidth: 16}, &pci.Link{Speed: pci.Gen3, Width: 8, MaxSpeed: pci.Gen5, MaxWidth: 16}, LinkDegraded, true, true},
		// a Gen4 NIC in a Gen5 slot runs at Gen4: not degraded
		{"slower partner", gen4x16, &pci.Link{Speed: pci.Gen4, Width: 16, MaxSpeed: pci.Gen5, MaxWidth: 16}, LinkOK, false, false},
		// QEMU's root port (16 GT/s x32) above a 2.5 GT/s x1 switch
		{"qemu root port", &pci.Link{Speed: pci.Gen1, Width: 1, MaxSpeed: pci.Gen1, MaxWidth: 1}, &pci.Link{Speed: pci.Gen1, Width: 1, MaxSpeed: pci.Gen4, MaxWidth: 32}, LinkOK, false, false},
		// QEMU's downstream ports report no capability
		{"unknown port", &pci.Link{Speed: pci.Gen1, Width: 1, MaxSpeed: pci.Gen1, MaxWidth: 1}, &pci.Link{Speed: pci.Gen1, Width: 1}, LinkOK, false, false},
		{"idle GPU speed", &pci.Link{Speed: pci.Gen1, Width: 16, MaxSpeed: pci.Gen5, MaxWidth: 16}, nil, LinkDegraded, true, false},
		{"down", &pci.Link{MaxSpeed: pci.Gen4, MaxWidth: 16}, gen4x16, LinkDown, false, false},
		{"no capability", &pci.Link{Speed: pci.Gen1, Width: 1}, nil, LinkUnknown, false, false},
		{"conventional PCI", nil, gen4x16, LinkUnknown, false, false},
	} {
		h := Hop{}
		var upper *pci.Function
		if tt.upper != nil {
			upper = fn(tt.upper)
		}
		judgeLink(&h, fn(tt.lower), upper)
		if h.State != tt.state || h.SpeedBelow != tt.speed || h.WidthBelow != tt.width {
			t.Errorf("%s: %+v, want %s speed %v width %v", tt.name, h, tt.state, tt.speed, tt.width)
		}
	}
}

func TestMirrorBits(t *testing.T) {
	// NCCL spreads 4 GPUs over 4 NICs as 0 2 1 3.
	for val, want := range []int{0, 2, 1, 3} {
		if got := mirrorBits(val, 4); got != want {
			t.Errorf("mirrorBits(%d, 4) = %d, want %d", val, got, want)
		}
	}
	if mirrorBits(1, 1) != 0 || mirrorBits(3, 8) != 6 {
		t.Error("mirrorBits")
	}
}

// TestParseNVIDIAInfo parses the information file in the layout
// nv-procfs.c prints (values as observed on an H100 VM,
// shared/reference/gpu-nic-topology.md §1.2).
func TestParseNVIDIAInfo(t *testing.T) {
	text := "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 37\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\n" +
		"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n" +
		"Bus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n"
	got := parseNVIDIAInfo(text)
	want := NVIDIAInfo{Model: "NVIDIA H100 80GB HBM3", UUID: "GPU-00000000-0000-0000-0000-000000000000", BusLocation: "0000:00:06.0",
		DeviceMinor: "0", Firmware: "580.159.04", Excluded: "No"}
	if *got != want {
		t.Errorf("got %+v\nwant %+v", *got, want)
	}
}

// TestGPUByID: NVIDIA and AMD display functions and AMD's processing
// accelerators are GPUs, NVIDIA's NVSwitch and audio functions are not; Turing (0x1E00) and newer can
// export dma-buf.
func TestGPUByID(t *testing.T) {
	for _, tt := range []struct {
		id     pci.Identity
		vendor string
		dmabuf *bool
	}{
		{pci.Identity{Class: pci.Class3D, Vendor: VendorNVIDIA, Device: 0x2330}, "NVIDIA", new(true)},        // H100 SXM
		{pci.Identity{Class: pci.Class3D, Vendor: VendorNVIDIA, Device: 0x20b0}, "NVIDIA", new(true)},        // A100
		{pci.Identity{Class: pci.Class3D, Vendor: VendorNVIDIA, Device: 0x1db1}, "NVIDIA", new(false)},       // V100
		{pci.Identity{Class: pci.ClassVGA, Vendor: VendorNVIDIA, Device: 0x1e02}, "NVIDIA", new(true)},       // TITAN RTX
		{pci.Identity{Class: 0x038000, Vendor: VendorAMD, Device: 0x740c}, "AMD", nil},                       // MI250X
		{pci.Identity{Class: pci.ClassProcessingAccelerator, Vendor: VendorAMD, Device: 0x74a1}, "AMD", nil}, // MI300X
		{pci.Identity{Class: pci.ClassProcessingAccelerator, Vendor: 0x1e52, Device: 0x0001}, "", nil},       // another vendor's accelerator
		{pci.Identity{Class: pci.ClassNVSwitch, Vendor: VendorNVIDIA, Device: 0x22a3}, "", nil},
		{pci.Identity{Class: 0x040300, Vendor: VendorNVIDIA, Device: 0x22ba}, "", nil},
		{pci.Identity{Class: pci.ClassVGA, Vendor: 0x1234, Device: 0x1111}, "", nil}, // QEMU's VGA
	} {
		vendor, ok := isGPU(tt.id)
		if vendor != tt.vendor || ok != (tt.vendor != "") {
			t.Errorf("%+v: %q %v", tt.id, vendor, ok)
			continue
		}
		got := dmabufCapable(pci.Function{Vendor: tt.id.Vendor, Device: tt.id.Device})
		if ok && (got == nil) != (tt.dmabuf == nil) || got != nil && tt.dmabuf != nil && *got != *tt.dmabuf {
			t.Errorf("%+v: dma-buf %v, want %v", tt.id, got, tt.dmabuf)
		}
	}
}
