package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
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

// NewRegistry returns a registry with c (unless nil), the Go runtime and
// process collectors (go_*, process_*: memory, file descriptors) and
// nothing else.
func NewRegistry(c prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, col := range []prometheus.Collector{c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if col == nil {
			continue
		}
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

	// MaxConnections bounds the connections open at once on each listen
	// address (0: DefaultMaxConnections); one that arrives past it closes
	// the connection idle longest between two requests, or waits in the
	// kernel's listen queue until one ends. IdleTimeout closes a
	// keep-alive connection idle that long (0: DefaultIdleTimeout).
	// Together they bound the descriptors, goroutines and memory any
	// number of clients can make the exporter hold.
	MaxConnections int
	IdleTimeout    time.Duration
}

// The server's own limits. A scrape's request is a few hundred bytes and
// its answer is written in well under a second; Prometheus keeps one
// connection per target and scrapes it every 15 s to 2 min.
const (
	// DefaultMaxRequests is how many scrapes are served at once;
	// more get 503 (node_exporter's --web.max-requests and its default).
	DefaultMaxRequests = 40
	// DefaultMaxConnections is how many connections a listen address
	// holds open at once.
	DefaultMaxConnections = 256
	// DefaultIdleTimeout closes keep-alive connections idle that long.
	DefaultIdleTimeout = 2 * time.Minute
	// readHeaderTimeout bounds a request's headers (a connection that
	// sends nothing is closed then), readTimeout the whole request and
	// writeTimeout the request and its answer (a scrape, a client that
	// reads slowly).
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute
	maxHeaderBytes    = 64 << 10
)

// Handler returns the HTTP handler of the exporter: metrics of reg on
// telemetryPath (promhttp, instrumented with promhttp_metric_handler_*;
// a metric that cannot be gathered is left out, never failing the
// scrape) and a landing page on /. At most maxRequests scrapes are
// served at once (DefaultMaxRequests is node_exporter's default); more
// are answered 503 Service Unavailable at once. 0 is no limit, as
// node_exporter's --web.max-requests 0.
func Handler(reg *prometheus.Registry, telemetryPath, version string, maxRequests int) (http.Handler, error) {
	return NewHandler(HandlerOptions{Registry: reg, TelemetryPath: telemetryPath, Version: version, MaxRequests: maxRequests})
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	Registry      *prometheus.Registry
	TelemetryPath string
	Version       string
	MaxRequests   int
	// Probe, when set, serves ProbePath: blackbox-style probes
	// (package prober), with limits of their own.
	Probe http.Handler
}

// ProbePath is where the probe handler is served.
const ProbePath = "/probe"

// NewHandler is Handler with the probe endpoint.
func NewHandler(o HandlerOptions) (http.Handler, error) {
	if err := checkTelemetryPath(o.TelemetryPath); err != nil {
		return nil, err
	}
	if o.MaxRequests < 0 {
		return nil, fmt.Errorf("--web.max-requests must be 0 (no limit) or more, not %d", o.MaxRequests)
	}
	if o.Probe != nil && o.TelemetryPath == ProbePath {
		return nil, fmt.Errorf("telemetry path %s is the probe endpoint's: choose another", ProbePath)
	}
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            o.Registry,
		MaxRequestsInFlight: o.MaxRequests,
	})
	mux.Handle(o.TelemetryPath, promhttp.InstrumentMetricHandler(o.Registry, metrics))
	links := []web.LandingLinks{{Address: o.TelemetryPath, Text: "Metrics"}}
	if o.Probe != nil {
		mux.Handle(ProbePath, o.Probe)
		links = append(links, web.LandingLinks{Address: ProbePath, Text: "Probe",
			Description: "RDMA probes from this node: /probe?target=HOST&module=NAME (add &debug=true for the probe's log)"})
	}
	if o.TelemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "grdma exporter",
			Description: "RDMA devices and ports of this node: states, rates, counters, GIDs, resources, health checks",
			Version:     o.Version,
			Links:       links,
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
//
// Each listen address gets its own http.Server (exporter-toolkit's
// web.Serve sets up TLS and basic auth by changing the server it is
// given, so one server shared by several addresses is a data race), with
// the timeouts and connection limit of ServerOptions.
func Serve(ctx context.Context, h http.Handler, o ServerOptions) error {
	if len(o.ListenAddresses) == 0 {
		o.ListenAddresses = []string{DefaultListenAddress}
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
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
	servers := make([]*http.Server, len(listeners))
	done := make(chan error, len(listeners))
	for i, l := range listeners {
		conns := newConnLimit(o.MaxConnections)
		l = conns.listener(l)
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       o.IdleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ConnState:         conns.track,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
		// Shutdown counts a connection that has not sent a request yet (a
		// client that dialled ahead, a port scan) as busy for 5 s: it has
		// no scrape in flight, so it is closed once the listeners are.
		srv.RegisterOnShutdown(conns.closeWithoutRequest)
		servers[i] = srv
		systemd := false
		flags := &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: &systemd, WebConfigFile: &o.ConfigFile}
		go func() { done <- web.Serve(l, srv, flags, logger) }()
	}
	var err error
	returned := 0
	select {
	case err = <-done: // one cannot serve (its TLS configuration): stop all
		returned++
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		serr := srv.Shutdown(sctx)
		if errors.Is(serr, context.DeadlineExceeded) {
			logger.Warn("scrapes still in flight after the shutdown grace period: closed", "grace", shutdownGrace)
			serr = srv.Close()
		}
		if err == nil {
			err = serr
		}
	}
	for ; returned < len(servers); returned++ {
		if serr := <-done; err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdownGrace is how long a shutdown waits for the scrapes in flight.
const shutdownGrace = 5 * time.Second
