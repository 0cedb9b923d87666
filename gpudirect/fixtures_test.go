package gpudirect_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/grdma/grdma/gpudirect"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

// wantVerdict is what a fixture must give for one mechanism. reason is a
// phrase the reason must contain; action must match exactly.
type wantVerdict struct {
	supported, kernelSupport *bool
	reason, action           string
}

// probeAnswers is a DMABufProbe that returns fixed per-device errors.
func probeAnswers(results ...gpudirect.DMABufProbeResult) gpudirect.DMABufProbe {
	return func() ([]gpudirect.DMABufProbeResult, error) { return results, nil }
}

var fixtureCases = []struct {
	name             string
	opts             gpudirect.Options
	peerMem, dmabuf  wantVerdict
	iommuMode        string
	memoryWarnings   int
	signalsThatCount map[string]gpudirect.State // a few signals worth pinning by name
}{
	{
		// DOCA-OFED on 6.8: no memory_peers directory, so the module decides.
		name: "peermem-proprietary",
		opts: gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited),
			ProbeDMABuf: probeAnswers(gpudirect.DMABufProbeResult{Device: "mlx5_0", Err: syscall.EBADF})},
		peerMem: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "nvidia_peermem 535.183.01 is loaded"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true),
			reason: "the proprietary NVIDIA kernel module 535.183.01 is loaded",
			action: "use the open NVIDIA kernel modules (dma-buf needs them)"},
		iommuMode: "passthrough",
		signalsThatCount: map[string]gpudirect.State{
			"module:nvidia_peermem": gpudirect.StateYes, "memory_peers": gpudirect.StateNo,
			"peer_memory_api": gpudirect.StateYes, "verbs_probe:mlx5_0": gpudirect.StateYes,
		},
	},
	{
		name: "open-dmabuf",
		opts: gpudirect.Options{MemlockLimit: new(uint64(8 << 20)),
			ProbeDMABuf: probeAnswers(
				gpudirect.DMABufProbeResult{Device: "mlx5_0", Err: syscall.EBADF},
				gpudirect.DMABufProbeResult{Device: "mlx5_1", Err: syscall.EBADF})},
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false),
			reason: "ib_core lacks the PeerDirect API",
			action: "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "NVIDIA open kernel module 560.35.03 loaded; REG_DMABUF_MR reached the driver (EBADF) on mlx5_0, mlx5_1"},
		iommuMode:      "translated",
		memoryWarnings: 2, // 8 MiB memlock, DMA-FQ groups
		signalsThatCount: map[string]gpudirect.State{
			"nvidia_open_kernel_module": gpudirect.StateYes, "dmabuf_import": gpudirect.StateYes,
			"config:CONFIG_DMABUF_MOVE_NOTIFY": gpudirect.StateNo,
		},
	},
	{
		// MLNX_OFED 5.8 on 5.4: memory_peers/nv_mem and the PeerDirect API.
		name:    "mofed-peermem",
		opts:    gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited)},
		peerMem: wantVerdict{supported: new(true), kernelSupport: new(true), reason: "nv_peer_mem 1.1-0 is loaded"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(false),
			reason: "only the open kernel modules export GPU memory as dma-buf; kernel 5.4.0-150-generic is older than 5.12 and has no ib_umem_dmabuf_get",
			action: "use the open NVIDIA kernel modules (dma-buf needs them); upgrade to Linux 5.12 or newer"},
		iommuMode: "passthrough", // from iommu=pt: 5.4 groups have no type file
		signalsThatCount: map[string]gpudirect.State{
			"memory_peer:nv_mem": gpudirect.StateYes, "module:nv_peer_mem": gpudirect.StateYes,
			"peer_memory_api": gpudirect.StateYes, "iommu_groups": gpudirect.StateUnknown,
		},
	},
	{
		// An rxe guest without GPUs: a clear no, with the kernel side still reported.
		name: "no-gpu",
		opts: gpudirect.Options{MemlockLimit: new(uint64(8 << 20))},
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "no NVIDIA driver loaded",
			action: "load the NVIDIA driver, if this node has NVIDIA GPUs"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(true), reason: "no NVIDIA driver loaded",
			action: "load the NVIDIA driver, if this node has NVIDIA GPUs"},
		iommuMode:      "off",
		memoryWarnings: 1,
		signalsThatCount: map[string]gpudirect.State{
			"nvidia_driver": gpudirect.StateNo, "dmabuf_import": gpudirect.StateYes, "peer_memory_api": gpudirect.StateNo,
			"verbs_probe": gpudirect.StateNotRun,
		},
	},
	{
		// What a non-root user reads: zero addresses, same verdicts as root.
		name: "kallsyms-hidden",
		opts: gpudirect.Options{MemlockLimit: new(uint64(64 << 10))},
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"},
		dmabuf: wantVerdict{supported: new(true), kernelSupport: new(true),
			reason: "kernel 6.12.10-arch1-1 has ib_umem_dmabuf_get; verbs probe not run: kallsyms decides"},
		iommuMode:      "passthrough",
		memoryWarnings: 1,
		signalsThatCount: map[string]gpudirect.State{
			"dmabuf_import": gpudirect.StateYes, "config:CONFIG_DMABUF_MOVE_NOTIFY": gpudirect.StateYes,
		},
	},
	{
		name: "old-kernel",
		opts: gpudirect.Options{MemlockLimit: new(gpudirect.MemlockUnlimited)},
		peerMem: wantVerdict{supported: new(false), kernelSupport: new(false), reason: "ib_core lacks the PeerDirect API",
			action: "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"},
		dmabuf: wantVerdict{supported: new(false), kernelSupport: new(false),
			reason: "kernel 5.10.0-33-amd64 is older than 5.12 and has no ib_umem_dmabuf_get",
			action: "upgrade to Linux 5.12 or newer"},
		iommuMode: "off",
		signalsThatCount: map[string]gpudirect.State{
			"kernel_version": gpudirect.StateNo, "ib_umem": gpudirect.StateYes, "dmabuf_import": gpudirect.StateNo,
			"nvidia_open_kernel_module": gpudirect.StateYes,
		},
	},
}

func TestFixtures(t *testing.T) {
	for _, tc := range fixtureCases {
		t.Run(tc.name, func(t *testing.T) {
			report := gpudirect.Check(os.DirFS(filepath.Join("testdata", tc.name)), tc.opts)
			checkVerdict(t, "peer_mem", report.PeerMem, tc.peerMem)
			checkVerdict(t, "dmabuf", report.DMABuf, tc.dmabuf)
			if report.Memory.IOMMU.Mode != tc.iommuMode {
				t.Errorf("iommu mode = %q, want %q", report.Memory.IOMMU.Mode, tc.iommuMode)
			}
			if len(report.Memory.Warnings) != tc.memoryWarnings {
				t.Errorf("memory warnings = %q, want %d of them", report.Memory.Warnings, tc.memoryWarnings)
			}
			states := signalStates(report)
			for name, want := range tc.signalsThatCount {
				if got := states[name]; got != want {
					t.Errorf("signal %s = %q, want %q", name, got, want)
				}
			}
			compareGolden(t, filepath.Join("testdata", tc.name+".golden.json"), report)
		})
	}
}

func checkVerdict(t *testing.T, mechanism string, got gpudirect.Verdict, want wantVerdict) {
	t.Helper()
	if diff := cmp.Diff(want.supported, got.Supported); diff != "" {
		t.Errorf("%s supported (-want +got):\n%s\nreason: %s", mechanism, diff, got.Reason)
	}
	if diff := cmp.Diff(want.kernelSupport, got.KernelSupport); diff != "" {
		t.Errorf("%s kernel_support (-want +got):\n%s", mechanism, diff)
	}
	if !strings.Contains(got.Reason, want.reason) {
		t.Errorf("%s reason = %q, want it to contain %q", mechanism, got.Reason, want.reason)
	}
	if got.Action != want.action {
		t.Errorf("%s action = %q, want %q", mechanism, got.Action, want.action)
	}
}

// signalStates maps every signal name in the report to its state.
func signalStates(report gpudirect.Report) map[string]gpudirect.State {
	states := map[string]gpudirect.State{}
	for _, list := range [][]gpudirect.Signal{report.PeerMem.Signals, report.DMABuf.Signals, report.Memory.Signals} {
		for _, s := range list {
			states[s.Name] = s.State
		}
	}
	return states
}

func compareGolden(t *testing.T, path string, report gpudirect.Report) {
	t.Helper()
	got, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}
