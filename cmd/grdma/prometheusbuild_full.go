//go:build !grdma_noprometheus

package main

import (
	"time"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/sysfs"
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
