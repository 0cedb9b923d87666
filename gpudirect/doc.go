// Package gpudirect decides whether a node can do GPUDirect RDMA between
// NVIDIA GPUs and RDMA NICs, by each of the two kernel mechanisms, and
// reports the memory settings that break memory registration.
//
// NCCL, UCX, libfabric and Open MPI each probe this differently and none
// gives the operator one answer. Check reads the signals they use, through
// an fs.FS rooted at the machine's "/" (so fixtures can stand in for /proc
// and /sys), and returns a Verdict per mechanism: Supported true, false, or
// nil when the signals cannot decide, with the reason, an action, and every
// signal with its source.
//
// # Signals
//
// peer_mem (MLNX_OFED/DOCA-OFED PeerDirect with nvidia_peermem):
//   - kallsyms ib_register_peer_memory_client: the PeerDirect API is in the
//     running ib_core (libfabric's verbs provider and RCCL check this).
//     Names are visible to non-root readers, whose addresses read as zero.
//   - sys/module/nvidia_peermem and sys/module/nv_peer_mem: a client module
//     is loaded; its version file gives the version (NCCL 2.23.4+, UCX).
//   - sys/kernel/mm/memory_peers/<client>/version: a client registered with
//     PeerDirect (NCCL, UCX, Open MPI, NVSHMEM). nv_mem, nv_mem_nc and
//     nvidia-peermem count; amdkfd or nvidia-fs are listed but do not. The
//     directory is gone on inbox kernels and on OFED for 6.6+, so its
//     absence proves nothing.
//
// dmabuf (upstream dma-buf import with the open NVIDIA modules):
//   - proc/driver/nvidia/version: the driver is loaded, with its version;
//     its first line says "NVIDIA UNIX Open Kernel Module" for the open
//     flavour and "NVIDIA UNIX <arch> Kernel Module" for the proprietary
//     one. Without it, sys/module/nvidia and its taint file (P: proprietary
//     licence) answer the same questions.
//   - kallsyms ib_umem_dmabuf_get: the kernel imports dma-buf as an MR
//     (libfabric's check). It lives in ib_uverbs with ib_umem_get, so its
//     absence counts only when ib_umem_get is present.
//   - proc/sys/kernel/osrelease: the release, against 5.12 where the import
//     landed upstream. Kallsyms wins over the number, since distributions
//     backport the feature (RHEL 8's 4.18 has it).
//   - CONFIG_DMA_SHARED_BUFFER, CONFIG_INFINIBAND_USER_MEM,
//     CONFIG_INFINIBAND_ON_DEMAND_PAGING, CONFIG_DMABUF_MOVE_NOTIFY and
//     CONFIG_PCI_P2PDMA, from proc/config.gz, boot/config-<release> or
//     lib/modules/<release>/build/.config, whichever is readable first.
//     Informational: NVIDIA's exporter is static, so MOVE_NOTIFY and
//     P2PDMA (amdgpu, NVMe) do not matter to it; USER_MEM stands in for
//     kallsyms only when kallsyms cannot tell.
//   - the verbs probe, when the caller gives a DMABufProbe: NCCL's test of
//     registering a dma-buf MR with fd -1. EBADF means supported,
//     EOPNOTSUPP or EPROTONOSUPPORT unsupported, anything else nothing.
//
// Both use kallsyms ib_register_device as the sign that ib_core is loaded:
// without it there is no RDMA device and missing symbols prove nothing.
// Kallsyms is streamed once for all four symbols; names match exactly.
//
// # Verdict rules
//
// Both mechanisms: no NVIDIA driver (proc/driver/nvidia/version and
// sys/module/nvidia absent while /proc or /sys is visible) gives false,
// "no NVIDIA driver loaded", whatever the kernel can do. KernelSupport
// still says what the RDMA kernel side provides, so a GPU-less node shows
// whether it is ready for GPUs.
//
// peer_mem, first rule that applies:
//  1. an NVIDIA client is loaded (nvidia_peermem, nv_peer_mem, or
//     memory_peers nv_mem, nv_mem_nc or nvidia-peermem): true. A loaded
//     client proves the PeerDirect API, since nvidia_peermem fails to load
//     (EINVAL) without it.
//  2. ib_core absent from kallsyms: false, no RDMA stack.
//  3. ib_register_peer_memory_client absent: false, nvidia_peermem cannot
//     load; the action points at dma-buf when that verdict is true.
//  4. a client source unreadable: unknown.
//  5. the API present, or kallsyms unreadable: false, load nvidia_peermem.
//
// dmabuf: every prerequisite must hold. Any that fails makes the verdict
// false and all failing ones are named; otherwise any undecidable one
// makes it unknown; otherwise it is true.
//   - the NVIDIA module is the open one (proprietary: false; unreadable:
//     unknown);
//   - the RDMA side: a device accepting the verbs probe settles it;
//     otherwise ib_core must be loaded, the kernel must import dma-buf
//     (kallsyms, else the release and CONFIG_INFINIBAND_USER_MEM), and a
//     probe that ran must not have been refused on every device.
//
// Without the probe a true dmabuf verdict rests on kallsyms, which cannot
// see whether the NIC driver implements dma-buf MRs (mlx5, for one,
// refuses them without ODP); the reason says the probe did not run. Only CUDA's
// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED speaks for the GPU model (Turing
// or newer) and CUDA version (11.7+); this package does not load CUDA.
//
// # Memory
//
// Memory reports the default huge page size (proc/meminfo Hugepagesize, as
// libfabric reads it) and every pool under sys/kernel/mm/hugepages; the
// caller's RLIMIT_MEMLOCK (Options.MemlockLimit, else getrlimit), with a
// warning below Options.MinMemlock (DefaultMinMemlock, 1 GiB) because
// ibv_reg_mr pins host pages against it unless the process has
// CAP_IPC_LOCK; and the IOMMU mode from sys/class/iommu,
// sys/kernel/iommu_groups/*/type and proc/cmdline, with a warning when
// groups translate DMA, which NVIDIA advises against (iommu=pt) for
// GPU-NIC peer-to-peer on bare metal.
package gpudirect
