package gpudirect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grdma/grdma/internal/kver"
)

// dmabufVerdict decides the dma-buf path. Prerequisites: an NVIDIA driver
// (else a plain no), the open kernel module, a kernel with RDMA dma-buf
// import, an RDMA stack, and, when the verbs probe ran, a device that
// accepts dma-buf MRs.
func (n *node) dmabufVerdict() Verdict {
	open := n.nvidia.openSignal()
	v := Verdict{Signals: slices.Concat(
		[]Signal{
			n.nvidia.loadedSignal(),
			open,
			n.kernelVersionSignal(),
			n.rdmaCoreSignal(),
			n.kallsyms.signal("ib_umem", symUmemGet, "marks ib_uverbs' user-memory code as loaded: only then does a missing "+symUmemDmabufGet+" count"),
			n.kallsyms.signal("dmabuf_import", symUmemDmabufGet, "RDMA dma-buf import; libfabric's verbs provider checks it"),
		},
		n.kernelConfig.signals(),
		n.dmabufProbe.signals(),
	)}
	kernel := n.dmabufKernelSide()
	v.KernelSupport = kernel.supported
	if n.nvidia.loadedState == StateNo {
		noNVIDIADriver(&v)
		return v
	}

	var b verdictBuilder
	switch open.State {
	case StateNo:
		b.block(fmt.Sprintf("the proprietary NVIDIA kernel module %s is loaded; only the open kernel modules export GPU memory as dma-buf", n.nvidia.version),
			"use the open NVIDIA kernel modules (dma-buf needs them)")
	case StateUnknown:
		b.undecided("cannot tell whether the NVIDIA kernel module is the open one ("+open.Detail+")", "")
	}
	probe := n.dmabufProbe
	switch {
	case len(probe.supported) > 0:
		// A device accepted the request: the RDMA side is proven.
	case n.rdmaStackAbsent():
		b.block(noRDMAStackReason, noRDMAStackAction)
	case kernel.supported != nil && !*kernel.supported:
		b.block(kernel.reason, kernel.action)
	case len(probe.unsupported) > 0:
		// Every device that answered refused: decisive even where
		// kallsyms could not tell.
		b.block("REG_DMABUF_MR is refused on "+probe.unsupportedSummary(),
			"use an RDMA device whose driver implements dma-buf MRs (mlx5 needs CONFIG_INFINIBAND_ON_DEMAND_PAGING)")
	case kernel.supported == nil:
		b.undecided(kernel.reason, kernel.action)
	}

	success := []string{"NVIDIA open kernel module " + n.nvidia.version + " loaded", kernel.reason}
	switch {
	case !probe.ran || probe.err == nil && len(probe.results) == 0:
		success = append(success, "verbs probe not run: kallsyms decides")
	case !probe.decided():
		success = append(success, "verbs probe inconclusive: kallsyms decides")
	case len(probe.unsupported) > 0:
		success = append(success, "refused on "+probe.unsupportedSummary())
	}
	b.fill(&v, strings.Join(success, "; "))
	return v
}

// dmabufKernelSide decides whether the kernel's RDMA stack imports dma-buf.
// A device accepting the probe settles it; then ib_umem_dmabuf_get in
// kallsyms (which also reveals backports to older kernels); then, when
// kallsyms cannot tell, the release and CONFIG_INFINIBAND_USER_MEM.
func (n *node) dmabufKernelSide() kernelSide {
	const upgradeAction = "upgrade to Linux 5.12 or newer"
	version, versionKnown := kver.Parse(n.release)
	versionKnown = versionKnown && n.releaseErr == nil
	older := versionKnown && !version.AtLeast(dmabufImportSince.Major, dmabufImportSince.Minor)
	release := n.release

	switch dmabufImport := n.kallsyms.has(symUmemDmabufGet); {
	case len(n.dmabufProbe.supported) > 0:
		return kernelSide{supported: new(true),
			reason: "REG_DMABUF_MR reached the driver (EBADF) on " + strings.Join(n.dmabufProbe.supported, ", ")}
	case dmabufImport == StateYes && older:
		return kernelSide{supported: new(true),
			reason: fmt.Sprintf("kernel %s has %s (backported before 5.12)", release, symUmemDmabufGet)}
	case dmabufImport == StateYes:
		return kernelSide{supported: new(true), reason: fmt.Sprintf("%s has %s", n.kernelName(), symUmemDmabufGet)}
	case dmabufImport == StateNo && n.kallsyms.has(symUmemGet) == StateYes && older:
		return kernelSide{supported: new(false), action: upgradeAction,
			reason: fmt.Sprintf("kernel %s is older than 5.12 and has no %s", release, symUmemDmabufGet)}
	case dmabufImport == StateNo && n.kallsyms.has(symUmemGet) == StateYes:
		return kernelSide{supported: new(false), action: "use a kernel with RDMA dma-buf import (upstream 5.12 or newer)",
			reason: fmt.Sprintf("%s has %s but no %s: its RDMA core lacks dma-buf import", n.kernelName(), symUmemGet, symUmemDmabufGet)}
	case older:
		return kernelSide{supported: new(false), action: upgradeAction,
			reason: fmt.Sprintf("kernel %s is older than 5.12", release)}
	}

	// kallsyms cannot tell: unreadable, or the umem module is not loaded.
	why, action := "ib_uverbs is not loaded (no "+symUmemGet+" in /proc/kallsyms)", "load ib_uverbs"
	if n.kallsyms.err != nil {
		why, action = "/proc/kallsyms is unreadable ("+describeReadError(n.kallsyms.err)+")", "run the check where /proc/kallsyms is readable"
	}
	if !versionKnown {
		return kernelSide{reason: "cannot tell whether the kernel imports dma-buf: " + why + " and the kernel release is unknown", action: action}
	}
	switch n.kernelConfig.option("CONFIG_INFINIBAND_USER_MEM") {
	case StateYes:
		return kernelSide{supported: new(true),
			reason: fmt.Sprintf("kernel %s is 5.12 or newer and built with CONFIG_INFINIBAND_USER_MEM (%s)", release, why)}
	case StateNo:
		return kernelSide{supported: new(false), action: "use a kernel built with CONFIG_INFINIBAND_USER_MEM",
			reason: fmt.Sprintf("kernel %s is built without CONFIG_INFINIBAND_USER_MEM", release)}
	}
	return kernelSide{action: action,
		reason: fmt.Sprintf("kernel %s is 5.12 or newer, but %s and its config is unreadable", release, why)}
}

// kernelName is "kernel 6.8.0-45-generic", or "the kernel" when the
// release is unknown.
func (n *node) kernelName() string {
	if n.release == "" {
		return "the kernel"
	}
	return "kernel " + n.release
}
