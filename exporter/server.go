package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// DefaultListenAddress is where `grdma exporter` listens unless told
// otherwise. Prometheus' default port allocations (the wiki page
// "Default port allocations" of the prometheus/prometheus repository)
// give exporters fixed ports so that the instance label stays the same
// across restarts; 9100-9999 is fully allocated, so grdma takes 10041
// beyond it.
const DefaultListenAddress = ":10041"

// DefaultTelemetryPath is the path metrics are served on.
const DefaultTelemetryPath = "/metrics"

// NewRegistry returns a registry with c, the Go runtime and process
// collectors (go_*, process_*: memory, file descriptors) and nothing else.
func NewRegistry(c prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, col := range []prometheus.Collector{c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// ServerOptions configure Serve.
type ServerOptions struct {
	// ListenAddresses are host:port addresses to listen on (default
	// DefaultListenAddress).
	ListenAddresses []string
	// TelemetryPath is where metrics are served (default /metrics); a
	// landing page linking to it is served on /.
	TelemetryPath string
	// ConfigFile is exporter-toolkit's web configuration file (TLS,
	// basic auth); "" serves plain HTTP without authentication.
	ConfigFile string
	// Version is shown on the landing page.
	Version string
	// Logger receives the server's messages; nil discards them.
	Logger *slog.Logger
	// Listening, when set, is called with the addresses listened on
	// once the listeners are open (the port of ":0" is known then).
	Listening func(addrs []net.Addr)
}

// Handler returns the HTTP handler of the exporter: metrics of reg on
// telemetryPath (promhttp, instrumented with promhttp_metric_handler_*;
// a metric that cannot be gathered is left out, never failing the
// scrape) and a landing page on /.
func Handler(reg *prometheus.Registry, telemetryPath, version string) (http.Handler, error) {
	if err := checkTelemetryPath(telemetryPath); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: 64,
	})
	mux.Handle(telemetryPath, promhttp.InstrumentMetricHandler(reg, metrics))
	if telemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "grdma exporter",
			Description: "RDMA devices and ports of this node: states, rates, counters, GIDs, resources, health checks",
			Version:     version,
			Links:       []web.LandingLinks{{Address: telemetryPath, Text: "Metrics"}},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

func checkTelemetryPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("telemetry path %q must start with /, e.g. /metrics", p)
	}
	return nil
}

// CheckServerOptions validates o without listening: the listen addresses
// (host:port), the telemetry path and the web configuration file (its
// YAML, users and certificates).
func CheckServerOptions(o ServerOptions) error {
	for _, l := range o.ListenAddresses {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return fmt.Errorf("--web.listen-address %q must be host:port, e.g. :10041 or 127.0.0.1:10041", l)
		}
	}
	if o.TelemetryPath != "" {
		if err := checkTelemetryPath(o.TelemetryPath); err != nil {
			return err
		}
	}
	if err := web.Validate(o.ConfigFile); err != nil {
		return fmt.Errorf("web config file %s: %w", o.ConfigFile, err)
	}
	return nil
}

// Serve serves h until ctx is done, then shuts down: requests in flight
// get up to 5 s to finish. It returns nil after a shutdown, or why it
// could not listen or serve.
func Serve(ctx context.Context, h http.Handler, o ServerOptions) error {
	if len(o.ListenAddresses) == 0 {
		o.ListenAddresses = []string{DefaultListenAddress}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := CheckServerOptions(o); err != nil {
		return err
	}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	var addrs []net.Addr
	for _, a := range o.ListenAddresses {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		addrs = append(addrs, l.Addr())
	}
	if o.Listening != nil {
		o.Listening(addrs)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var waiting connsWithoutRequest
	srv.ConnState = waiting.track
	systemd := false
	flags := &web.FlagConfig{WebListenAddresses: &o.ListenAddresses, WebSystemdSocket: &systemd, WebConfigFile: &o.ConfigFile}
	done := make(chan error, 1)
	go func() { done <- web.ServeMultiple(listeners, srv, flags, logger) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Shutdown counts a connection that has not sent a request yet (a client
	// that dialled ahead, a port scan) as busy for 5 s: it has no scrape in
	// flight, so it is closed once the listeners are.
	srv.RegisterOnShutdown(waiting.closeAll)
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("scrapes still in flight after the shutdown grace period: closed", "grace", shutdownGrace)
		err = srv.Close()
	}
	if serr := <-done; err == nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	return err
}

// shutdownGrace is how long a shutdown waits for the scrapes in flight.
const shutdownGrace = 5 * time.Second

// connsWithoutRequest follows the connections that have not begun a
// request (http.StateNew), for Serve to close at shutdown; one accepted
// while it closes them is closed as it comes.
type connsWithoutRequest struct {
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
}

func (w *connsWithoutRequest) track(c net.Conn, s http.ConnState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case s == http.StateNew && w.closing:
		c.Close()
	case s == http.StateNew:
		if w.conns == nil {
			w.conns = map[net.Conn]struct{}{}
		}
		w.conns[c] = struct{}{}
	default:
		delete(w.conns, c)
	}
}

func (w *connsWithoutRequest) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	for c := range w.conns {
		c.Close()
	}
}
