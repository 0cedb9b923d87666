package main

// grdma is built twice from this package (make build):
//
//   - bin/grdma, with the build tag grdma_noprometheus: everything except the
//     three commands that need the Prometheus packages, which it hands to
//     grdma-prometheus by exec'ing it with the same command line;
//   - bin/grdma-prometheus, without the tag: all of grdma, client_golang and
//     exporter-toolkit included.
//
// Go runs the init of every linked package for every command, and those of
// client_golang, its protobuf model and exporter-toolkit cost ~3 ms on the
// host and ~13 ms in the emulated guest (BENCHMARKS.md, "Start-up since the
// exporter"): the commands scripts run many times a minute should not pay
// for a daemon's libraries. A plain `go build ./cmd/grdma` or `go install`
// gives the complete single binary.

// The exporter command's summary, the same in both builds.
const (
	exporterUse   = "exporter [--web.listen-address ADDR]... [--web.telemetry-path PATH] [--web.config.file FILE] [--collector.check [--collector.check.interval D]] [--probe.config.file FILE] [--collector.pingmesh --pingmesh.targets FILE]"
	exporterShort = "Serve RDMA metrics to Prometheus"
)
