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
resource counts, and with --collector.check the health checks "devices" and
"ports" of grdma check (run at most once per --collector.check.interval,
cached in between). Devices added, renamed or deleted show at the next
scrape. A device that vanishes during a scrape is left out; whatever else
cannot be read is counted in grdma_export_read_error and
grdma_exporter_read_errors_total and never fails the scrape.

The default port, 10041, follows Prometheus' default port allocations
(9100-9999 is taken). --web.config.file is exporter-toolkit's web
configuration file: TLS and basic auth. SIGTERM or SIGINT stops the server
after the scrapes in flight (5 s at most).

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
	f.BoolVar(&o.checks, "collector.check", false, "also export the devices and ports health checks (grdma_check_status)")
	f.DurationVar(&o.checkInterval, "collector.check.interval", exporter.DefaultCheckInterval, "run the checks at most once per `DURATION`")
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
	so := exporter.ServerOptions{ListenAddresses: o.listen, TelemetryPath: o.telemetryPath, ConfigFile: o.configFile,
		Logger: slog.New(slog.NewTextHandler(a.stderr, nil))}
	if err := exporter.CheckServerOptions(so); err != nil {
		return usagef(help, "%v", err)
	}
	sys, err := a.sysfs("exporter")
	if err != nil {
		return err
	}
	col := exporter.New(exporter.Options{Sysfs: sys, Dial: a.newClient, Checks: o.checks, CheckInterval: o.checkInterval})
	reg, err := exporter.NewRegistry(col)
	if err != nil {
		return err
	}
	so.Version = versionString()
	h, err := exporter.Handler(reg, o.telemetryPath, so.Version)
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
