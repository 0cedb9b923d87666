// Package manifests holds grdma's Kubernetes manifests, embedded, for
// tests that check them and use their settings (the e2e guests' fleet
// scenarios). The files themselves are what to deploy.
package manifests

import _ "embed"

// SweepCoordinate is sweep-coordinate.yaml: the /probe modules, host
// list and Job of a coordinated sweep against the DaemonSet.
//
//go:embed sweep-coordinate.yaml
var SweepCoordinate string
