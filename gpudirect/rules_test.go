package gpudirect_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/grdma/grdma/gpudirect"
)

const (
	openBanner        = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Oct  8 16:30:26 UTC 2024\n"
	proprietaryBanner = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 16:30:26 UTC 2024\n"

	kallsymsCore   = "ffffffff81000000 T _stext\nffffffff81a3c2e0 T dma_buf_get\n"
	kallsymsIBCore = "ffffffffc0600000 T ib_register_device\t[ib_core]\n"
	kallsymsPeer   = "ffffffffc0601000 T ib_register_peer_memory_client\t[ib_core]\n"
	kallsymsUmem   = "ffffffffc0a1a000 T ib_umem_get\t[ib_uverbs]\n"
	kallsymsDmabuf = "ffffffffc0a1b2c0 T ib_umem_dmabuf_get\t[ib_uverbs]\n"
)

// gpuNode is a healthy dma-buf node: open driver, kernel 6.8 with inbox
// RDMA. Tests change a file or two to reach each rule.
func gpuNode() fstest.MapFS {
	return fstest.MapFS{
		"proc/sys/kernel/osrelease":  file("6.8.0-45-generic\n"),
		"proc/kallsyms":              file(kallsymsCore + kallsymsIBCore + kallsymsUmem + kallsymsDmabuf),
		"proc/driver/nvidia/version": file(openBanner),
		"sys/module/nvidia/version":  file("550.127.05\n"),
		"sys/module/nvidia/taint":    file("OE\n"),
		"boot/config-6.8.0-45-generic": file("CONFIG_DMA_SHARED_BUFFER=y\nCONFIG_INFINIBAND_USER_MEM=y\n" +
			"CONFIG_INFINIBAND_ON_DEMAND_PAGING=y\n# CONFIG_DMABUF_MOVE_NOTIFY is not set\nCONFIG_PCI_P2PDMA=y\n"),
	}
}

func file(text string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(text)} }

// deniedFS fails to open the listed paths with EACCES, as a non-root
// reader of a 0400 file would.
type deniedFS struct {
	fs.FS
	denied map[string]bool
}

func (d deniedFS) Open(name string) (fs.File, error) {
	if d.denied[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

func deny(fsys fs.FS, paths ...string) fs.FS {
	denied := map[string]bool{}
	for _, p := range paths {
		denied[p] = true
	}
	return deniedFS{fsys, denied}
}

func with(base fstest.MapFS, changes fstest.MapFS) fstest.MapFS {
	merged := maps.Clone(base)
	for name, f := range changes {
		if f == nil {
			delete(merged, name)
		} else {
			merged[name] = f
		}
	}
	return merged
}

var ruleCases = []struct {
	name            string
	fsys            fs.FS
	probe           gpudirect.DMABufProbe
	peerMem, dmabuf wantVerdict
}{
	{
		name: "kallsyms unreadable, config shows user memory",
		fsys: deny(gpuNode(), "proc/kallsyms"),
		peerMem: wantVerdict{supported: new(false), reason: "/proc/kallsyms is unreadable so the PeerDirect API is unknown",
			action: "load nvidia_peermem; it needs the PeerDirect API of MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "kernel 6.8.0-45-generic is 5.12 or newer and built with CONFIG_INFINIBAND_USER_MEM (/proc/kallsyms is unreadable (permission denied))"},
	},
	{
		name: "kallsyms and config unreadable",
		fsys: deny(with(gpuNode(), fstest.MapFS{"boot/config-6.8.0-45-generic": nil}), "proc/kallsyms"),
		peerMem: wantVerdict{supported: new(false), reason: "PeerDirect API is unknown",
			action: "load nvidia_peermem; it needs the PeerDirect API of MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{reason: "kernel 6.8.0-45-generic is 5.12 or newer, but /proc/kallsyms is unreadable (permission denied) and its config is unreadable",
			action: "run the check where /proc/kallsyms is readable"},
	},
	{
		name:  "the probe proves dma-buf where kallsyms cannot",
		fsys:  deny(with(gpuNode(), fstest.MapFS{"boot/config-6.8.0-45-generic": nil}), "proc/kallsyms"),
		probe: probeAnswers(gpudirect.DMABufProbeResult{Device: "mlx5_0", Err: syscall.EBADF}),
		peerMem: wantVerdict{supported: new(false), reason: "PeerDirect API is unknown",
			action: "load nvidia_peermem; it needs the PeerDirect API of MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "REG_DMABUF_MR reached the driver (EBADF) on mlx5_0"},
	},
	{
		name: "RHEL 8 kernel with dma-buf import backported",
		fsys: with(gpuNode(), fstest.MapFS{
			"proc/sys/kernel/osrelease":    file("4.18.0-553.el8_10.x86_64\n"),
			"boot/config-6.8.0-45-generic": nil,
		}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "kernel 4.18.0-553.el8_10.x86_64 has ib_umem_dmabuf_get (backported before 5.12)"},
	},
	{
		name: "GPU node without an RDMA stack",
		fsys: with(gpuNode(), fstest.MapFS{"proc/kallsyms": file(kallsymsCore)}),
		peerMem: wantVerdict{supported: new(false), reason: "no RDMA stack loaded",
			action: "load the RDMA NIC driver (e.g. mlx5_ib), which brings in ib_core and ib_uverbs"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true), reason: "no RDMA stack loaded",
			action: "load the RDMA NIC driver (e.g. mlx5_ib), which brings in ib_core and ib_uverbs"},
	},
	{
		name: "ib_uverbs not loaded and no config",
		fsys: with(gpuNode(), fstest.MapFS{
			"proc/kallsyms":                file(kallsymsCore + kallsymsIBCore),
			"boot/config-6.8.0-45-generic": nil,
		}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{reason: "ib_uverbs is not loaded (no ib_umem_get in /proc/kallsyms)", action: "load ib_uverbs"},
	},
	{
		name: "PeerDirect API without a client",
		fsys: with(gpuNode(), fstest.MapFS{
			"proc/kallsyms": file(kallsymsCore + kallsymsIBCore + kallsymsPeer + kallsymsUmem + kallsymsDmabuf),
		}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(true),
			reason: "ib_core has the PeerDirect API but no NVIDIA peer-memory client is loaded",
			action: "load nvidia_peermem (modprobe nvidia-peermem)"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "has ib_umem_dmabuf_get"},
	},
	{
		// NCCL's check alone: nv_mem_nc is registered only by nvidia-peermem.
		name: "memory_peers nv_mem_nc, no module directory",
		fsys: with(gpuNode(), fstest.MapFS{
			"proc/kallsyms": file(kallsymsCore + kallsymsIBCore + kallsymsPeer + kallsymsUmem + kallsymsDmabuf),
			"sys/kernel/mm/memory_peers/nv_mem_nc/version": file("550.127.05\n"),
		}),
		peerMem: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "peer-memory client nv_mem_nc 550.127.05 is registered"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "has ib_umem_dmabuf_get"},
	},
	{
		name: "only a ROCm memory peer",
		fsys: with(gpuNode(), fstest.MapFS{
			"proc/kallsyms": file(kallsymsCore + kallsymsIBCore + kallsymsPeer + kallsymsUmem + kallsymsDmabuf),
			"sys/kernel/mm/memory_peers/amdkfd/version": file("1.0\n"),
		}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(true),
			reason: "ib_core has the PeerDirect API but no NVIDIA peer-memory client is loaded",
			action: "load nvidia_peermem (modprobe nvidia-peermem)"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "has ib_umem_dmabuf_get"},
	},
	{
		name:    "probe refused on every device",
		fsys:    gpuNode(),
		probe:   probeAnswers(gpudirect.DMABufProbeResult{Device: "rxe0", Err: syscall.EOPNOTSUPP}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API", action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true), reason: "REG_DMABUF_MR is refused on rxe0 (EOPNOTSUPP)",
			action: "use an RDMA device whose driver implements dma-buf MRs (mlx5 needs CONFIG_INFINIBAND_ON_DEMAND_PAGING)"},
	},
	{
		name:  "probe refusal decides where kallsyms cannot",
		fsys:  deny(with(gpuNode(), fstest.MapFS{"boot/config-6.8.0-45-generic": nil}), "proc/kallsyms"),
		probe: probeAnswers(gpudirect.DMABufProbeResult{Device: "siw0", Err: syscall.EOPNOTSUPP}),
		peerMem: wantVerdict{supported: new(false), reason: "PeerDirect API is unknown",
			action: "load nvidia_peermem; it needs the PeerDirect API of MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(false), reason: "REG_DMABUF_MR is refused on siw0 (EOPNOTSUPP)",
			action: "use an RDMA device whose driver implements dma-buf MRs (mlx5 needs CONFIG_INFINIBAND_ON_DEMAND_PAGING)"},
	},
	{
		name: "probe: kernel without the uverbs method",
		fsys: gpuNode(),
		probe: probeAnswers(gpudirect.DMABufProbeResult{Device: "mlx5_0", Err: syscall.EPROTONOSUPPORT},
			gpudirect.DMABufProbeResult{Device: "mlx5_1", Err: syscall.EPROTONOSUPPORT}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API", action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true),
			reason: "refused on mlx5_0 (EPROTONOSUPPORT), mlx5_1 (EPROTONOSUPPORT)",
			action: "use an RDMA device whose driver implements dma-buf MRs (mlx5 needs CONFIG_INFINIBAND_ON_DEMAND_PAGING)"},
	},
	{
		name: "probe: one device of two",
		fsys: gpuNode(),
		probe: probeAnswers(gpudirect.DMABufProbeResult{Device: "mlx5_0", Err: syscall.EBADF},
			gpudirect.DMABufProbeResult{Device: "rxe0", Err: syscall.EOPNOTSUPP}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API", action: "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "(EBADF) on mlx5_0; refused on rxe0 (EOPNOTSUPP)"},
	},
	{
		name: "probe could not run",
		fsys: gpuNode(),
		probe: func() ([]gpudirect.DMABufProbeResult, error) {
			return nil, errors.New("open /dev/infiniband/uverbs0: permission denied")
		},
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API", action: "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"},
		dmabuf:  wantVerdict{supported: new(true), kernelSupport: new(true), reason: "verbs probe inconclusive: kallsyms decides"},
	},
	{
		name: "flavour from sys/module/nvidia/taint",
		fsys: deny(with(gpuNode(), fstest.MapFS{"sys/module/nvidia/taint": file("POE\n")}), "proc/driver/nvidia/version"),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true),
			reason: "the proprietary NVIDIA kernel module 550.127.05 is loaded",
			action: "use the open NVIDIA kernel modules (dma-buf needs them)"},
	},
	{
		name: "flavour unknown",
		fsys: deny(with(gpuNode(), fstest.MapFS{"sys/module/nvidia/taint": nil}), "proc/driver/nvidia/version"),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{kernelSupport: new(true), reason: "cannot tell whether the NVIDIA kernel module is the open one"},
	},
	{
		name: "proprietary banner",
		fsys: with(gpuNode(), fstest.MapFS{"proc/driver/nvidia/version": file(proprietaryBanner)}),
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true), reason: "the proprietary NVIDIA kernel module 550.127.05",
			action: "use the open NVIDIA kernel modules (dma-buf needs them)"},
	},
}

func TestRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			report := gpudirect.Check(tc.fsys, gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited), ProbeDMABuf: tc.probe})
			checkVerdict(t, "peer_mem", report.PeerMem, tc.peerMem)
			checkVerdict(t, "dmabuf", report.DMABuf, tc.dmabuf)
		})
	}
}

// An unknown verdict must reach JSON as null, not be dropped or be false.
func TestVerdictJSONShape(t *testing.T) {
	report := gpudirect.Check(deny(with(gpuNode(), fstest.MapFS{"boot/config-6.8.0-45-generic": nil}), "proc/kallsyms"), gpudirect.Options{})
	b, err := json.Marshal(report.DMABuf)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"supported": "null", "kernel_support": "null"} {
		if got := string(fields[field]); got != want {
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	if !strings.HasPrefix(string(fields["reason"]), `"kernel 6.8.0-45-generic is 5.12 or newer`) {
		t.Errorf("reason = %s", fields["reason"])
	}
	if _, ok := fields["signals"]; !ok {
		t.Error("no signals list")
	}
}

func TestMemlock(t *testing.T) {
	cases := []struct {
		name      string
		limit     uint64
		minimum   uint64
		state     gpudirect.State
		value     string
		warning   string
		unlimited bool
	}{
		{name: "unlimited", limit: gpudirect.MemlockUnlimited, state: gpudirect.StateYes, value: "unlimited", unlimited: true},
		{name: "large", limit: 64 << 30, state: gpudirect.StateYes, value: "64 GiB"},
		{name: "kernel default", limit: 8 << 20, state: gpudirect.StateNo, value: "8 MiB", warning: "RLIMIT_MEMLOCK is 8 MiB: registering more than that fails with ENOMEM"},
		{name: "zero", limit: 0, state: gpudirect.StateNo, value: "0", warning: "ibv_reg_mr fails with EPERM"},
		{name: "custom minimum", limit: 8 << 20, minimum: 4 << 20, state: gpudirect.StateYes, value: "8 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			memory := gpudirect.Check(fstest.MapFS{}, gpudirect.Options{MemlockLimit: new(tc.limit), MinMemlock: tc.minimum}).Memory
			if memory.Memlock == nil || memory.Memlock.LimitBytes != tc.limit || memory.Memlock.Unlimited != tc.unlimited {
				t.Errorf("memlock = %+v, want limit %d unlimited %v", memory.Memlock, tc.limit, tc.unlimited)
			}
			s := findSignal(t, memory.Signals, "memlock")
			if s.State != tc.state || s.Value != tc.value {
				t.Errorf("memlock signal = %s %q, want %s %q", s.State, s.Value, tc.state, tc.value)
			}
			switch {
			case tc.warning == "" && len(memory.Warnings) != 0:
				t.Errorf("warnings = %q, want none", memory.Warnings)
			case tc.warning != "" && (len(memory.Warnings) != 1 || !strings.Contains(memory.Warnings[0], tc.warning)):
				t.Errorf("warnings = %q, want one containing %q", memory.Warnings, tc.warning)
			}
		})
	}
}

func TestHugePagesWithoutSysfs(t *testing.T) {
	fsys := fstest.MapFS{"proc/meminfo": file("MemTotal: 1000 kB\nHugePages_Total:     512\nHugePages_Free:      500\n" +
		"HugePages_Rsvd:        3\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n")}
	memory := gpudirect.Check(fsys, gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited)}).Memory
	want := []gpudirect.HugePagePool{{PageSize: 2 << 20, Total: 512, Free: 500, Reserved: 3, Default: true}}
	if memory.HugePageSize != 2<<20 || len(memory.HugePagePools) != 1 || memory.HugePagePools[0] != want[0] {
		t.Errorf("huge pages = %d %+v, want %d %+v", memory.HugePageSize, memory.HugePagePools, 2<<20, want)
	}
}

func findSignal(t *testing.T, signals []gpudirect.Signal, name string) gpudirect.Signal {
	t.Helper()
	for _, s := range signals {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no signal %q in %+v", name, signals)
	return gpudirect.Signal{}
}

// With nothing mounted there is no evidence either way: both verdicts must
// be unknown, and above all not "no NVIDIA driver loaded".
func TestEmptyRootDecidesNothing(t *testing.T) {
	report := gpudirect.Check(fstest.MapFS{}, gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited)})
	for name, v := range map[string]gpudirect.Verdict{"peer_mem": report.PeerMem, "dmabuf": report.DMABuf} {
		if v.Supported != nil {
			t.Errorf("%s supported = %v (%s), want unknown", name, *v.Supported, v.Reason)
		}
	}
	if s := findSignal(t, report.DMABuf.Signals, "nvidia_driver"); s.State != gpudirect.StateUnknown {
		t.Errorf("nvidia_driver = %s, want unknown", s.State)
	}
}
