package gpudirect_test

import (
	"fmt"
	"os"
	"syscall"

	"github.com/grdma/grdma/gpudirect"
)

// Check reads a machine through an fs.FS rooted at its "/". Here the root
// is a fixture of a GPU node with the open NVIDIA driver; the verbs probe,
// implemented outside this package, is stood in for by fixed answers.
func ExampleCheck() {
	probe := func() ([]gpudirect.DMABufProbeResult, error) {
		return []gpudirect.DMABufProbeResult{{Device: "mlx5_0", Err: syscall.EBADF}}, nil
	}
	report := gpudirect.Check(os.DirFS("testdata/open-dmabuf"), gpudirect.Options{
		MemlockLimit: new(gpudirect.MemlockUnlimited),
		ProbeDMABuf:  probe,
	})
	for _, mechanism := range []struct {
		name    string
		verdict gpudirect.Verdict
	}{{"peer_mem", report.PeerMem}, {"dmabuf", report.DMABuf}} {
		fmt.Printf("%s: supported=%v\n  reason: %s\n", mechanism.name, *mechanism.verdict.Supported, mechanism.verdict.Reason)
		if mechanism.verdict.Action != "" {
			fmt.Printf("  action: %s\n", mechanism.verdict.Action)
		}
	}
	fmt.Println("iommu:", report.Memory.IOMMU.Mode)
	// Output:
	// peer_mem: supported=false
	//   reason: ib_core lacks the PeerDirect API (no ib_register_peer_memory_client), so nvidia_peermem cannot load
	//   action: use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED
	// dmabuf: supported=true
	//   reason: NVIDIA open kernel module 560.35.03 loaded; REG_DMABUF_MR reached the driver (EBADF) on mlx5_0
	// iommu: translated
}
