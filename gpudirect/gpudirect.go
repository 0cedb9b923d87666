package gpudirect

import (
	"errors"
	"io/fs"
	"math"
	"strings"
)

// State is the outcome of one signal.
type State string

// Signal states. A signal names a property ("the kernel exports X", "module
// Y is loaded"), so yes and no read as answers to it.
const (
	StateYes     State = "yes"
	StateNo      State = "no"
	StateUnknown State = "unknown" // the source could not be read or parsed
	StateNotRun  State = "not_run" // the check needs something not given (the verbs probe)
)

// Signal is one piece of evidence and where it came from.
type Signal struct {
	// Name identifies the signal; per-instance signals carry the instance
	// after a colon ("module:nvidia_peermem", "memory_peer:nv_mem").
	Name string `json:"name"`
	// Source is the file read (an absolute path on the checked machine) or
	// the kallsyms symbol looked up.
	Source string `json:"source"`
	State  State  `json:"state"`
	// Value is what the source said, such as a version string.
	Value string `json:"value,omitempty"`
	// Detail explains the state: why it is unknown, or what it implies.
	Detail string `json:"detail,omitempty"`
}

// Verdict answers whether one GPUDirect RDMA mechanism works on the node.
type Verdict struct {
	// Supported is true or false, or nil when the signals cannot decide.
	Supported *bool `json:"supported"`
	// Reason names the signals that decided, in words.
	Reason string `json:"reason"`
	// Action is what the operator can do about a false or unknown verdict.
	Action string `json:"action,omitempty"`
	// KernelSupport says whether the running kernel's RDMA stack provides
	// the mechanism at all, whatever the GPU side: the PeerDirect API for
	// peer_mem, dma-buf import for dmabuf. Nil when the signals cannot tell.
	KernelSupport *bool    `json:"kernel_support"`
	Signals       []Signal `json:"signals"`
}

// Report is the result of Check.
type Report struct {
	// KernelRelease is proc/sys/kernel/osrelease; empty if unreadable.
	KernelRelease string  `json:"kernel_release"`
	PeerMem       Verdict `json:"peer_mem"`
	DMABuf        Verdict `json:"dmabuf"`
	Memory        Memory  `json:"memory"`
}

// MemlockUnlimited is RLIM_INFINITY, the RLIMIT_MEMLOCK of an unlimited process.
const MemlockUnlimited uint64 = math.MaxUint64

// DefaultMinMemlock is the RLIMIT_MEMLOCK below which Check warns. It is a
// heuristic: the usual defaults (64 KiB from old kernels and container
// runtimes, 8 MiB since Linux 5.16) break the host-buffer registrations of
// NCCL, UCX and MPI jobs, and RDMA stacks advise "unlimited".
const DefaultMinMemlock uint64 = 1 << 30

// Options adjusts Check. The zero value is ready to use.
type Options struct {
	// MemlockLimit is the RLIMIT_MEMLOCK soft limit, in bytes, of the
	// process that will register memory (MemlockUnlimited for none). Nil
	// reads the calling process's own limit with getrlimit(2).
	MemlockLimit *uint64
	// MinMemlock is the limit below which a finite RLIMIT_MEMLOCK is a
	// warning; 0 means DefaultMinMemlock.
	MinMemlock uint64
	// ProbeDMABuf runs the verbs-level dma-buf test. Nil leaves the
	// "verbs_probe" signal not run and the verdict rests on kallsyms.
	ProbeDMABuf DMABufProbe
}

// DMABufProbe runs the test NCCL, UCX and libfabric use on every uverbs
// device: allocate a PD and register a dma-buf MR with fd -1 through the
// ioctl ABI (UVERBS_METHOD_REG_DMABUF_MR). It returns one result per
// device, or an error if it could not run at all (no access to
// /dev/infiniband, say). Implementations live outside this package.
type DMABufProbe func() ([]DMABufProbeResult, error)

// DMABufProbeResult is the outcome of the dma-buf probe on one device.
type DMABufProbeResult struct {
	Device string // RDMA device name, e.g. "mlx5_0"
	// Err is the error REG_DMABUF_MR returned (a syscall.Errno), or nil if
	// an MR came back. EBADF means the kernel and driver took the request
	// as far as looking the fd up: supported. EOPNOTSUPP (driver or
	// provider lacks the op) and EPROTONOSUPPORT (kernel lacks the method)
	// mean unsupported. Anything else decides nothing.
	Err error
}

// Check reads the GPUDirect RDMA signals of the machine whose root
// directory is fsys and returns the verdicts. Unreadable sources become
// "unknown" signals rather than errors, so Check always returns a report.
func Check(fsys fs.FS, opts Options) Report {
	release, releaseErr := readTrimmed(fsys, osReleasePath)
	node := node{
		release:      release,
		releaseErr:   releaseErr,
		kallsyms:     readKallsyms(fsys),
		nvidia:       readNVIDIADriver(fsys),
		kernelConfig: readKernelConfig(fsys, release, releaseErr),
		dmabufProbe:  runDMABufProbe(opts.ProbeDMABuf),
		peerModules:  readPeerMemModules(fsys),
		memoryPeers:  readMemoryPeers(fsys),
	}
	report := Report{KernelRelease: release}
	report.DMABuf = node.dmabufVerdict()
	report.PeerMem = node.peerMemVerdict(report.DMABuf)
	report.Memory = readMemory(fsys, opts)
	return report
}

// node holds everything read from the machine, once, for the verdicts.
type node struct {
	release      string
	releaseErr   error
	kallsyms     kallsymsView
	nvidia       nvidiaDriver
	kernelConfig kernelConfig
	dmabufProbe  dmabufProbeOutcome
	peerModules  []Signal
	memoryPeers  []Signal
}

const osReleasePath = "proc/sys/kernel/osrelease"

// readTrimmed reads a small text file and trims surrounding white space.
func readTrimmed(fsys fs.FS, path string) (string, error) {
	b, err := fs.ReadFile(fsys, path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// displayPath turns an fs path into the absolute path on the checked machine.
func displayPath(path string) string { return "/" + path }

// describeReadError says briefly why a source could not be read.
func describeReadError(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}

// NodeCanRegister says whether the node can register GPU memory with its
// RDMA devices by either mechanism: true when one verdict is true, false
// when both are false, nil when neither is true and one is unknown.
func NodeCanRegister(r Report) *bool {
	yes := func(v Verdict) bool { return v.Supported != nil && *v.Supported }
	no := func(v Verdict) bool { return v.Supported != nil && !*v.Supported }
	switch {
	case yes(r.PeerMem) || yes(r.DMABuf):
		return new(true)
	case no(r.PeerMem) && no(r.DMABuf):
		return new(false)
	}
	return nil
}
