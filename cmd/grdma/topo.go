package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/topo"
	"github.com/spf13/cobra"
)

func (a *app) topoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "topo [show] [gpu BDF...] [gdr-level LEVEL] [platform bare-metal|virtual]",
		Short: "Show how GPUs and RDMA NICs connect over PCIe, and what NCCL makes of it",
		Long: `Show the GPUs and RDMA devices of this node as nvidia-smi topo -m draws
them: between every two devices X (itself), PIX (at most one PCIe bridge:
one switch), PXB (several bridges, no host bridge), PHB (through a host
bridge: the CPU), NODE (between host bridges of one NUMA node) or SYS
(across NUMA nodes), with each device's CPU and NUMA affinity. Then each
device's links from the device up to its root port, current against what
both ends can do (a link trained below that is "degraded"); and per GPU the
NIC NCCL would use and whether it would use GPUDirect RDMA with it: NCCL
does when the path is within NCCL_NET_GDR_LEVEL (default PXB; NODE counts
as PHB to NCCL) and the node can register GPU memory (peer_mem or dma-buf,
as grdma check gdr says). Path types and rules are NCCL 2.27-2.30's.

GPUs are NVIDIA and AMD display functions found by their PCI IDs (with the
NVIDIA driver's model name where it is loaded); gpu BDF... adds functions to
treat as GPUs. An RDMA device is placed at its PCI function; a software
device (rxe, siw) at its netdev's. gdr-level sets NCCL_NET_GDR_LEVEL (LOC,
PIX, PXB, PHB, SYS or 0-4; default: $NCCL_NET_GDR_LEVEL, else PXB).

In a virtual machine the classes describe the hypervisor's PCI topology,
not the host's: the output says when the node looks virtual (hypervisor CPU
flag, DMI vendor, devices on a root bus, no NUMA node) and what to do
(NCCL_TOPO_FILE, NCCL_NET_GDR_LEVEL); platform overrides the detection.

Config space (Relaxed Ordering, MPS, MRRS, ACS, ATS) is read only as root.
--sysfs-root and --proc-root read a captured tree.`,
		Example: `  grdma topo
  grdma -j topo
  grdma topo gpu 0000:05:00.0
  grdma topo gdr-level PHB
  grdma --sysfs-root /host --proc-root /host/proc topo`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.topo(cmd, args)
		},
	}
}

func (a *app) topo(cmd *cobra.Command, words []string) error {
	opts, help, err := grammar.ParseTopo(words)
	if err != nil {
		return cmdline.WithHelp(err, "grdma topo help")
	}
	if help {
		return cmd.Help()
	}
	if env := os.Getenv("NCCL_NET_GDR_LEVEL"); env != "" && opts.GDRLevel == topo.PathUnknown {
		level, err := topo.ParseGDRLevel(env)
		if err != nil {
			return usagef("grdma topo help", "%v (from the environment; unset it or pass gdr-level)", err)
		}
		opts.GDRLevel = level
	}
	fsys, err := a.sysfs("topo")
	if err != nil {
		return err
	}
	rep := gpudirect.Check(fsys, gpudirect.Options{})
	opts.NodeGDR = gpudirect.NodeCanRegister(rep)
	t, err := topo.Read(fsys, opts)
	if err != nil {
		return topoError(err)
	}
	return render.Topology(a.stdout, t, output.Options{JSON: a.opts.json, Pretty: a.opts.pretty})
}

// topoError words an error of topo.Read for topo and check gdr: a
// function named by gpu BDF that does not exist, or a read that failed.
func topoError(err error) error {
	var nf *topo.NotFoundError
	if errors.As(err, &nf) {
		return fmt.Errorf("gpu %s: no such PCI function (lspci or ls /sys/bus/pci/devices lists them)", nf.Address)
	}
	return fmt.Errorf("reading the PCI topology: %w", err)
}
