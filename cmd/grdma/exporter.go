//go:build !grdma_noprometheus

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/internal/completion"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/pingmesh"
	"github.com/grdma/grdma/prober"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// exporterOptions are the flags of grdma exporter, named as Prometheus
// exporters name them.
type exporterOptions struct {
	listen        []string
	telemetryPath string
	configFile    string
	devices       bool
	checks        bool
	checkInterval time.Duration
	maxRequests   int

	probeConfig        string
	probeTimeoutOffset time.Duration
	probeMaxConcurrent int

	mesh     pingmeshOptions
	pcie     bool
	pcieGPUs []string
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

/probe?target=HOST&module=NAME runs an RDMA probe from this node to HOST and
answers with that probe's metrics, as blackbox_exporter does: probe_success,
probe_duration_seconds, probe_failure_info{reason,step} when it failed, and
the module's results. Built-in modules: rc_lat (perftest's lat write), rc_bw
(bw write for 2 s) and rc_connect (the queue pairs to RTS, no data), each
against the responder HOST runs (grdma probe DEV serve, port 18515 unless
HOST:PORT says another), and cm_connect (the same connection made by the
RDMA CM, against grdma probe DEV serve cm). --probe.config.file adds or replaces modules (YAML:
modules: NAME: {prober: rc, timeout: 5s, source: {device, port, gid_index},
rc: {test, op, size, iters, duration, target_port, key_file, max_size, via: tcp|cm}});
SIGHUP reads it again. A request may set op, size, iters or duration of an rc
module. The probe's time is Prometheus' scrape timeout
(X-Prometheus-Scrape-Timeout-Seconds) less --probe.timeout-offset, at most
the module's timeout (10 s). Bandwidth tests run one at a time, other probes
at most --probe.max-concurrent at once; a probe that gets no slot in its time
fails (probe_busy). Every failure (unknown module, a target that does not
resolve or runs no responder, a busy responder, a timeout) is an answer with
probe_success 0, never a failed scrape; only a request without a target is
answered 400. debug=true answers with the probe's log. /probe is behind the
same --web.config.file as /metrics. The probes need the uverbs devices and
locked memory, as grdma probe does.

--collector.pingmesh probes the nodes of --pingmesh.targets (Prometheus'
file_sd format: targets and labels such as rack, tor, rail; re-read when it
changes, a malformed file keeping the last good targets and counted) from one
UD queue pair on --pingmesh.device, each at --pingmesh.rate probes a second
(default 1), all within --pingmesh.max-rate (500), sizes cycling 64, 512, 1024
bytes and the path MTU, against each node's responder (grdma probe DEV serve,
which gives its UD address over TCP). It exports per target: probes sent and
lost by size, the last answer's time, losses in a row, whether the responder
answers, and up to --pingmesh.max-target-series targets (100) RTT and
responder-delay histograms and errors by kind (beyond, summed by the label
--pingmesh.aggregate-by, default tor). The target's labels are exported
prefixed target_ (target_rack, ...). This node itself is left out. With it,
/probe also has the module ud_ping. deploy/prometheus/grdma-pingmesh.yml
alerts on it.

Exit status: 0 stopped by a signal, 1 it could not listen or serve (or the
pingmesh's queue pair failed for good), 2 bad flags, web configuration file,
modules file or pingmesh settings.`,
		Example: `  grdma exporter
  grdma exporter --web.listen-address=127.0.0.1:10041 --collector.check
  grdma exporter --web.config.file=/etc/grdma/web.yml
  grdma exporter --probe.config.file=/etc/grdma/probe.yml
  grdma exporter --collector.pingmesh --pingmesh.targets=/etc/grdma/mesh.yml --pingmesh.device=rxe0
  curl 'http://localhost:10041/probe?module=rc_lat&target=node2'`,
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
	f.BoolVar(&o.devices, "collector.devices", true, "export the RDMA devices and ports (false: only /probe and the pingmesh, for a second exporter that holds the uverbs devices)")
	f.BoolVar(&o.checks, "collector.check", false, "also export the devices and ports health checks (grdma_check_status)")
	f.DurationVar(&o.checkInterval, "collector.check.interval", exporter.DefaultCheckInterval, "run the checks at most once per `DURATION`")
	f.StringVar(&o.probeConfig, "probe.config.file", "", "/probe modules from `FILE` (YAML), over the built-in rc_lat, rc_bw, rc_connect, cm_connect")
	f.DurationVar(&o.probeTimeoutOffset, "probe.timeout-offset", prober.DefaultTimeoutOffset, "take `DURATION` from Prometheus' scrape timeout for a probe's time")
	f.IntVar(&o.probeMaxConcurrent, "probe.max-concurrent", prober.DefaultMaxConcurrent, "run at most `N` probes at once (bandwidth tests: one)")
	o.mesh.flags(f)
	_ = cmd.MarkFlagFilename("web.config.file", "yml", "yaml")
	_ = cmd.MarkFlagFilename("pingmesh.targets", "json", "yml", "yaml")
	_ = cmd.MarkFlagFilename("pingmesh.key-file")
	_ = cmd.RegisterFlagCompletionFunc("pingmesh.device", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completion.DevPorts(a.completionSource(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.MarkFlagFilename("probe.config.file", "yml", "yaml")
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
	if o.checks && !o.devices {
		return usagef(help, "--collector.check reads the devices: it goes with --collector.devices")
	}
	if o.maxRequests < 0 {
		return usagef(help, "--web.max-requests must be 0 (no limit) or more, not %d", o.maxRequests)
	}
	if o.probeTimeoutOffset < 0 {
		return usagef(help, "--probe.timeout-offset must not be negative, not %s", o.probeTimeoutOffset)
	}
	if o.probeMaxConcurrent < 1 || o.probeMaxConcurrent > maxProbeConcurrent {
		return usagef(help, "--probe.max-concurrent must be from 1 to %d, not %d", maxProbeConcurrent, o.probeMaxConcurrent)
	}
	probeCfg, err := loadProbeConfig(o.probeConfig)
	if err != nil {
		return usagef(help, "%v", err)
	}
	meshCfg, meshKey, err := o.mesh.check(cmd.Flags().Changed, help)
	if err != nil {
		return err
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
	var col prometheus.Collector
	if o.devices {
		col = exporter.New(exporter.Options{Sysfs: sys, Dial: a.newClient, Checks: o.checks, CheckInterval: o.checkInterval,
			PCIe: o.pcie, PCIeGPUs: gpus})
	}
	reg, err := exporter.NewRegistry(col)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var mesh *pingmesh.Pingmesh
	popts := prober.Options{Sysfs: sys, TimeoutOffset: o.probeTimeoutOffset, MaxConcurrent: o.probeMaxConcurrent, Logger: so.Logger}
	if o.mesh.enabled {
		if mesh, err = startPingmesh(ctx, sys, &o.mesh, meshCfg, meshKey, so.Logger); err != nil {
			return err
		}
		defer mesh.Close()
		if err := reg.Register(mesh.Mesh); err != nil {
			return err
		}
		popts.Pinger = mesh.Prober // ud_ping: single pings on the pingmesh's queue pair
	}
	probes, err := prober.NewHandler(probeCfg, popts)
	if err != nil {
		return usagef(help, "%v", err)
	}
	if err := reg.Register(probes.Collector()); err != nil {
		return err
	}
	so.Version = versionString()
	h, err := exporter.NewHandler(exporter.HandlerOptions{Registry: reg, TelemetryPath: o.telemetryPath, Version: so.Version,
		MaxRequests: o.maxRequests, Probe: probes})
	if err != nil {
		return err
	}
	so.Listening = func(addrs []net.Addr) {
		for _, ad := range addrs {
			so.Logger.Info("listening", "address", ad.String(), "telemetry_path", o.telemetryPath)
		}
	}
	go reloadOnHangup(ctx, so.Logger, o.probeConfig, probes)
	// The pingmesh's prober failing for good (its queue pair could not be
	// made again) stops the exporter: its supervisor restarts it.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	meshErr := make(chan error, 1)
	if mesh != nil {
		go func() {
			err := mesh.Run(sctx)
			meshErr <- err
			if err != nil {
				cancel()
			}
		}()
	}
	serr := exporter.Serve(sctx, h, so)
	cancel()
	if mesh != nil {
		if err := <-meshErr; err != nil {
			return fmt.Errorf("--collector.pingmesh: %w", err)
		}
	}
	if serr != nil {
		return serr
	}
	so.Logger.Info("stopped")
	return nil
}

// maxProbeConcurrent bounds --probe.max-concurrent: each probe holds a
// queue pair, pinned memory and a connection to a responder.
const maxProbeConcurrent = 256

// loadProbeConfig reads the modules file; "" is the built-in modules.
func loadProbeConfig(path string) (*prober.Config, error) {
	if path == "" {
		return nil, nil
	}
	cfg, err := prober.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("--probe.config.file: %w", err)
	}
	return cfg, nil
}

// reloadOnHangup reads the modules file again at each SIGHUP, as
// blackbox_exporter does; a file that does not load keeps the modules in
// use.
func reloadOnHangup(ctx context.Context, log *slog.Logger, path string, h *prober.Handler) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		cfg, err := loadProbeConfig(path)
		if err == nil {
			err = h.SetConfig(cfg)
		}
		if err != nil {
			log.Error("modules not reloaded; those in use stay", "err", err)
			continue
		}
		log.Info("modules reloaded", "file", path, "modules", strings.Join(h.Modules(), ","))
	}
}
