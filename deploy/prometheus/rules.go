// Package rules holds grdma's Prometheus rule files, embedded, for tests
// that load them into a Prometheus (the e2e guests' fleet scenarios). The
// files themselves are what to deploy.
package rules

import _ "embed"

// Alerts is grdma-alerts.yml: the exporter's device and port alerts.
//
//go:embed grdma-alerts.yml
var Alerts string

// Pingmesh is grdma-pingmesh.yml: the pingmesh's and /probe's recording
// and alerting rules.
//
//go:embed grdma-pingmesh.yml
var Pingmesh string
