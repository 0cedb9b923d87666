package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/topo"
	"github.com/spf13/cobra"
)

func (a *app) checkCommand() *cobra.Command {
	var quiet bool
	var textfile string
	cmd := &cobra.Command{
		Use:   "check [devices|ports|probe|gdr|cm]... [state STATE] [min-rate GBPS] [mtu BYTES] [gid-type v1|v2|ib] [gid-index N [type v1|v2|ib] [ipv4|ipv6]] [netdev-mtu BYTES] [device-count N] [device-names A,B] [gpu BDF...]",
		Short: "Check node health: RDMA devices, ports, GPUDirect RDMA, the RDMA CM",
		Long: `Run health checks and print a PASS/WARN/FAIL table (-j: a JSON object with
"ok" and "checks"; -q: nothing, the exit status tells). With no check
named, all run:

  devices  every RDMA device has an accessible uverbs character device;
           device-count N and device-names A,B set what must exist
  ports    every port is ACTIVE and LINK_UP (or "state STATE"), and meets
           min-rate (Gb/s), mtu (active MTU, bytes), gid-type (a GID of that
           type exists), netdev-mtu, and gid-index N: the GID index grdma gid
           show -q chooses (among the GIDs of type/ipv4/ipv6 given after it)
           is N on every port, so that an index configured for a job
           (NCCL_IB_GID_INDEX) is caught drifting
  probe    the verbs probe (grdma probe ... traffic) on every ACTIVE port:
           an RC QP brought to RTS and, on rxe, data sent and verified
  gdr      GPUDirect RDMA readiness: peer_mem (nvidia_peermem, PeerDirect)
           and dma-buf, with huge pages, RLIMIT_MEMLOCK and the IOMMU mode;
           a node without an NVIDIA driver only warns, one without an RDMA
           device on PCI never passes (nothing to pair a GPU with). Then
           per GPU, with the NIC NCCL would give it (grdma topo): FAIL for
           a PCIe link on the way trained below what both ends can do (a
           GPU's speed alone is mentioned: idle GPUs drop to Gen1); WARN
           for a path beyond NCCL_NET_GDR_LEVEL (PHB, NODE, SYS: NCCL turns
           GPUDirect off), and on bare metal for ACS redirecting peer
           traffic on a bridge between them or an IOMMU translating, for
           GPUs sharing a NIC while a closer one idles, Max Payload Sizes
           that differ, and AER errors since boot. gpu BDF... treats more
           PCI functions as GPUs
  cm       the RDMA connection manager, on every ACTIVE RoCE port with an IP
           address: connections over each address go through that port,
           with a GID of the RoCE version of the port's default mode (grdma
           cm); a RoCE v1 default warns, and so does a GID index grdma gid
           show -q (with the gid-index criteria) would choose of another
           RoCE version than the CM's; a node without rdma_ucm warns

WARN does not fail the node. --textfile writes the results as Prometheus
gauges for node_exporter's textfile collector, atomically and through one
descriptor (no name another account could swap for a symlink is followed);
a directory writable by group or others without the sticky bit is refused
(exit 1) before the checks run.

Exit status: 0 no check failed, 1 a check failed, 2 the checks could not
run (bad arguments).`,
		Example: `  grdma check
  grdma check ports min-rate 100 mtu 4096 gid-type v2 netdev-mtu 9000
  grdma check ports gid-index 3 type v2 ipv4
  grdma -j check gdr
  grdma check gdr gpu 0000:05:00.0
  grdma check cm
  grdma check devices device-count 8 -q && echo healthy
  grdma check --textfile /var/lib/node_exporter/textfile/grdma_check.prom`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.check(args, quiet, textfile)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing; the exit status tells")
	cmd.Flags().StringVar(&textfile, "textfile", "", "also write the results as Prometheus gauges to `PATH`")
	return cmd
}

func (a *app) check(args []string, quiet bool, textfile string) error {
	if textfile != "" {
		if err := a.needPrometheus("grdma check --textfile"); err != nil {
			return err
		}
	}
	names, exp, err := grammar.ParseCheck(args)
	if err != nil {
		return cmdline.WithHelp(err, "grdma check --help")
	}
	if textfile != "" {
		if err := checkTextfileDir(textfile); err != nil {
			return err
		}
	}
	sys, err := a.sysfs("check")
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return err
	} else if err != nil {
		return &cannotRunError{fmt.Errorf("cannot read sysfs: %w", err)}
	}
	ranAt := time.Now()
	var results []health.Result
	var snap *node.Snapshot // read once, for devices, ports and probe
	readNode := func() *node.Snapshot {
		if snap == nil {
			if c, err := a.nl(); err != nil {
				snap = &node.Snapshot{DevicesErr: err, PortsErr: err}
			} else {
				snap = node.Reader{Sysfs: sys, Netlink: c}.Read()
			}
		}
		return snap
	}
	for _, name := range names {
		switch name {
		case "devices":
			results = append(results, health.CheckDevices(readNode(), exp)...)
		case "ports":
			results = append(results, health.CheckPorts(readNode(), exp)...)
		case "probe":
			results = append(results, health.Probe(context.Background(), readNode(), sys)...)
		case "gdr":
			rep := gpudirect.Check(sys, gpudirect.Options{ProbeDMABuf: node.DMABufProbe(sys, a.nl)})
			t, err := topo.Read(sys, topo.Options{GPUs: exp.GPUs, NodeGDR: gpudirect.NodeCanRegister(rep)})
			if err != nil {
				return &cannotRunError{fmt.Errorf("gdr: %w", topoError(err))}
			}
			results = append(results, health.CheckGDRTopology(rep, t)...)
		case "cm":
			results = append(results, health.CheckCM(context.Background(), readNode(), a.cmSource(sys, exp))...)
		}
	}
	rep := health.NewSummary(results)
	if textfile != "" {
		if err := writeCheckTextfile(textfile, rep, ranAt); err != nil {
			return err
		}
	}
	if !quiet {
		if err := render.CheckSummary(a.stdout, rep, output.Options{JSON: a.opts.json, Pretty: a.opts.pretty}); err != nil {
			return err
		}
	}
	if !rep.OK {
		return errBatchFailed // failures are in the report already
	}
	return nil
}

// cmSource is where check cm reads: the RDMA CM, configfs and each
// device's QUERY_DEVICE through its uverbs node.
func (a *app) cmSource(sys sysfs.FS, exp health.Expect) health.CMSource {
	return health.CMSource{
		Sysfs: sys,
		OpenCM: func() (*rdmacm.Channel, error) {
			c, err := a.nl()
			if err != nil {
				return nil, err
			}
			return locator.OpenRDMACM(sys, c)
		},
		MaxCQE: func(d node.Device) (uint32, error) {
			c, err := a.nl()
			if err != nil {
				return 0, err
			}
			v, err := locator.Open(sys, c, d.Index, d.Name)
			if err != nil {
				return 0, err
			}
			defer v.Close()
			attr, err := v.QueryDevice()
			return attr.MaxCQE, err
		},
		GIDSelect: exp.GIDSelect,
	}
}
