//go:build !grdma_noprometheus

package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/pci"
	"github.com/spf13/cobra"
)

// exporterOptions are the flags of grdma exporter, named as Prometheus
// exporters name them.
type exporterOptions struct {
	listen        []string
	telemetryPath string
	configFile    string
	checks        bool
	checkInterval time.Duration
	maxRequests   int
	pcie          bool
	pcieGPUs      []string
}

func (a *app) exporterCommand() *cobra.Command {
	var o exporterOptions
	cmd := &cobra.Command{
		Use:   exporterUse,
		Short: exporterShort,
		Long: `Serve the metrics of every RDMA device and port of this node to Prometheus,
read at each scrape: port state, physical state, rate, active MTU and width,
every hardware counter by name, PMA data counters in bytes, device
information, the RoCE v2 IPv4 GID a job would choose (index and GID),
resource counts, the PCIe links of GPUs and RDMA devices with the GPU-NIC
path types of grdma topo (--collector.pcie, on by default;
--collector.pcie.gpu BDF names more functions as GPUs), and with
--collector.check the health checks "devices" and "ports" of grdma check
(run at most once per --collector.check.interval, cached in between). Devices added, renamed or deleted show at the next
scrape. A device that vanishes during a scrape is left out; whatever else
cannot be read is counted in grdma_export_read_error and
grdma_exporter_read_errors_total and never fails the scrape.

Scrapes that come at once share one reading of the devices, and a reading
less than a second old serves the next scrapes too: however many scrape, the
devices are read at most about once a second. At most --web.max-requests
scrapes are served at once (default 40, as node_exporter; 0 no limit); more
are answered 503 at once.

The server decides its own limits: each listen address holds at most 256
connections; one that arrives past them closes the connection idle longest
between two requests, or waits in the kernel's listen queue until one ends.
A connection that has not sent its request headers within 10 s is closed, a
request gets 30 s to be read and 1 min to be answered, and a keep-alive
connection idle for 2 min is closed.

The default port, 10041, follows Prometheus' default port allocations
(9100-9999 is taken). --web.config.file is exporter-toolkit's web
configuration file: TLS and basic auth; without it anyone who reaches the
port may scrape. SIGTERM or SIGINT stops the server after the scrapes in
flight (5 s at most).

make build's bin/grdma is built without the Prometheus packages, so that the
other commands start faster; it runs this command, stat export and check
--textfile by exec'ing grdma-prometheus, the complete build, installed next
to it.

Exit status: 0 stopped by a signal, 1 it could not listen or serve, 2 bad
flags or web configuration file.`,
		Example: `  grdma exporter
  grdma exporter --web.listen-address=127.0.0.1:10041 --collector.check
  grdma exporter --web.config.file=/etc/grdma/web.yml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := newArgv(args, "grdma exporter --help").Done(); err != nil {
				return err
			}
			return a.exporter(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.listen, "web.listen-address", []string{exporter.DefaultListenAddress}, "listen on `ADDR` (host:port; repeat for several)")
	f.StringVar(&o.telemetryPath, "web.telemetry-path", exporter.DefaultTelemetryPath, "serve metrics on `PATH`")
	f.StringVar(&o.configFile, "web.config.file", "", "TLS and basic auth from `FILE` (exporter-toolkit web configuration)")
	f.IntVar(&o.maxRequests, "web.max-requests", exporter.DefaultMaxRequests, "serve at most `N` scrapes at once, answer more with 503 (0: no limit)")
	f.BoolVar(&o.checks, "collector.check", false, "also export the devices and ports health checks (grdma_check_status)")
	f.DurationVar(&o.checkInterval, "collector.check.interval", exporter.DefaultCheckInterval, "run the checks at most once per `DURATION`")
	f.BoolVar(&o.pcie, "collector.pcie", true, "export the PCIe links of GPUs and RDMA devices (grdma_pcie_link_degraded, ...) and the GPU-NIC path types (grdma topo)")
	f.StringArrayVar(&o.pcieGPUs, "collector.pcie.gpu", nil, "treat PCI function `BDF` as a GPU (repeat for several; grdma topo gpu BDF)")
	return cmd
}

func (a *app) exporter(cmd *cobra.Command, o *exporterOptions) error {
	help := "grdma exporter --help"
	if o.checkInterval <= 0 {
		return usagef(help, "--collector.check.interval must be a positive duration such as 1m, not %s", o.checkInterval)
	}
	if cmd.Flags().Changed("collector.check.interval") && !o.checks {
		return usagef(help, "--collector.check.interval goes with --collector.check")
	}
	if o.maxRequests < 0 {
		return usagef(help, "--web.max-requests must be 0 (no limit) or more, not %d", o.maxRequests)
	}
	var gpus []pci.Address
	for _, g := range o.pcieGPUs {
		addr, err := pci.ParseAddress(g)
		if err != nil {
			return usagef(help, "--collector.pcie.gpu: %v", err)
		}
		gpus = append(gpus, addr)
	}
	if len(gpus) > 0 && !o.pcie {
		return usagef(help, "--collector.pcie.gpu goes with --collector.pcie")
	}
	so := exporter.ServerOptions{ListenAddresses: o.listen, TelemetryPath: o.telemetryPath, ConfigFile: o.configFile,
		Logger: slog.New(slog.NewTextHandler(a.stderr, nil))}
	if err := exporter.CheckServerOptions(so); err != nil {
		return usagef(help, "%v", err)
	}
	sys, err := a.sysfs("exporter")
	if err != nil {
		return err
	}
	col := exporter.New(exporter.Options{Sysfs: sys, Dial: a.newClient, Checks: o.checks, CheckInterval: o.checkInterval, PCIe: o.pcie, PCIeGPUs: gpus})
	reg, err := exporter.NewRegistry(col)
	if err != nil {
		return err
	}
	so.Version = versionString()
	h, err := exporter.Handler(reg, o.telemetryPath, so.Version, o.maxRequests)
	if err != nil {
		return err
	}
	so.Listening = func(addrs []net.Addr) {
		for _, ad := range addrs {
			so.Logger.Info("listening", "address", ad.String(), "telemetry_path", o.telemetryPath)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := exporter.Serve(ctx, h, so); err != nil {
		return err
	}
	so.Logger.Info("stopped")
	return nil
}
