//go:build !grdma_noprometheus

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/httpprobe"
	"github.com/grdma/grdma/sysfs"
	"github.com/prometheus/common/config"
)

// needPrometheus is where the build without Prometheus hands the command
// line to grdma-prometheus; this build has everything.
func (a *app) needPrometheus(string) error { return nil }

// writeCheckTextfile writes check's results as Prometheus gauges.
func writeCheckTextfile(path string, rep health.Summary, ranAt time.Time) error {
	return (&exporter.CheckResults{Results: rep.Checks, RanAt: ranAt}).WriteTextfile(path)
}

// writeStatTextfile writes the exporter's metrics once.
func (a *app) writeStatTextfile(sys sysfs.FS, path string) error {
	return exporter.New(exporter.Options{Sysfs: sys, Dial: a.newClient}).WriteTextfile(path)
}

// checkTextfileDir refuses, before any work, a textfile directory that
// is missing or that another account may write in (exporter.CheckTextfileDir).
func checkTextfileDir(path string) error { return exporter.CheckTextfileDir(path) }

// sweepProber drives a coordinated sweep through the nodes' exporters'
// /probe (package httpprobe, which reads Prometheus' text format). Hosts
// that do not resolve here, or name one exporter twice, are refused.
func (a *app) sweepProber(ctx context.Context, req grammar.SweepCoordinateRequest, hosts []sweep.Host) (sweep.TestProber, error) {
	port := req.ExporterPort
	if port == 0 {
		port = httpprobe.DefaultExporterPort
	}
	if _, err := resolveHosts(ctx, hosts, port); err != nil {
		return nil, err
	}
	cfg := &config.HTTPClientConfig{}
	if req.HTTPConfig != "" {
		var err error
		if cfg, _, err = config.LoadHTTPConfigFile(req.HTTPConfig); err != nil {
			return nil, usagef("grdma sweep help", "http-config %s: %v", req.HTTPConfig, err)
		}
		if err := cfg.Validate(); err != nil {
			return nil, usagef("grdma sweep help", "http-config %s: %v", req.HTTPConfig, err)
		}
	}
	// Credentials go to the listed exporters only.
	cfg.FollowRedirects = false
	client, err := config.NewClientFromConfig(*cfg, "grdma_sweep", config.WithUserAgent("grdma-sweep/"+version))
	if err != nil {
		return nil, fmt.Errorf("http-config %s: %v", req.HTTPConfig, err)
	}
	p := &httpprobe.Prober{Client: client, BWModule: req.BWModule, LatModule: req.LatModule}
	for _, h := range hosts {
		if h.Port == 0 && req.ExporterPort != 0 {
			h.Port = req.ExporterPort
		}
		p.Nodes = append(p.Nodes, httpprobe.NodeOf(h, req.Scheme, req.ResponderPort))
	}
	return p, nil
}
