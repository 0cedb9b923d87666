//go:build !grdma_noprometheus

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExporterUsage: bad flags and web configuration files exit 2 naming
// the problem, before anything listens.
func TestExporterUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	os.WriteFile(bad, []byte("basic_auth_users: [nope\n"), 0o644)
	modules := filepath.Join(dir, "probe.yml")
	os.WriteFile(modules, []byte("modules:\n  x:\n    prober: icmp\n"), 0o644)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"--web.listen-address=nope"}, `--web.listen-address "nope" must be host:port`},
		{[]string{"--web.telemetry-path=metrics"}, `telemetry path "metrics" must start with /`},
		{[]string{"--web.config.file=" + filepath.Join(dir, "missing.yml")}, "missing.yml"},
		{[]string{"--web.config.file=" + bad}, "web config file " + bad},
		{[]string{"--collector.check", "--collector.check.interval=-1s"}, "--collector.check.interval must be a positive duration"},
		{[]string{"--collector.check.interval=1m"}, "--collector.check.interval goes with --collector.check"},
		{[]string{"--web.max-requests=-1"}, "--web.max-requests must be 0 (no limit) or more, not -1"},
		{[]string{"--web.max-requests=many"}, `invalid argument "many" for "--web.max-requests"`},
		{[]string{"now"}, `"now"`},
		{[]string{"--probe.config.file=" + modules}, `--probe.config.file: ` + modules + `: module x: unknown prober "icmp"`},
		{[]string{"--probe.config.file=" + filepath.Join(dir, "missing.yml")}, "missing.yml"},
		{[]string{"--probe.max-concurrent=0"}, "--probe.max-concurrent must be from 1 to 256, not 0"},
		{[]string{"--probe.timeout-offset=-1s"}, "--probe.timeout-offset must not be negative"},
		{[]string{"--collector.devices=false", "--collector.check"}, "--collector.check reads the devices"},
		{[]string{"--pingmesh.targets=/x.yml"}, "--pingmesh.targets goes with --collector.pingmesh"},
		{[]string{"--collector.pingmesh"}, "--collector.pingmesh needs --pingmesh.targets FILE"},
		{[]string{"--collector.pingmesh", "--pingmesh.targets=/etc/hosts"}, "a file_sd file is .json, .yml or .yaml"},
		{[]string{"--collector.pingmesh", "--pingmesh.targets=/m.yml", "--pingmesh.rate=0"}, "--pingmesh.rate 0: more than 0"},
		{[]string{"--collector.pingmesh", "--pingmesh.targets=/m.yml", "--pingmesh.sizes=8"}, "size 8: from"},
		{[]string{"--collector.pingmesh", "--pingmesh.targets=/m.yml", "--pingmesh.aggregate-by=__x"}, "aggregation label"},
		{[]string{"--collector.pingmesh", "--pingmesh.targets=/m.yml", "--pingmesh.key-file=" + filepath.Join(dir, "nokey")}, "--pingmesh.key-file"},
		{[]string{"-n", "blue"}, "-n blue reaches RDMA netlink only"},
	} {
		_, stderr, code := runGrdma(t, standardKernel("6.12"), append([]string{"exporter"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.msg) {
			t.Errorf("exporter %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, stderr, c.msg)
		}
	}
}

// TestExporterCompletion: the new flags complete by name, and
// --pingmesh.device with the devices and their ports.
func TestExporterCompletion(t *testing.T) {
	for line, want := range map[string]string{
		"exporter --pingmesh.device ":     "rxe0 rxe1",
		"exporter --pingmesh.device rxe0": "rxe0 rxe0/1",
		"exporter --pingmesh.t":           "--pingmesh.targets --pingmesh.timeout",
		"exporter --probe.":               "--probe.config.file --probe.max-concurrent --probe.timeout-offset",
		"exporter --collector.pi":         "--collector.pingmesh",
	} {
		got, _ := complete(t, recordedDial("6.12"), strings.Split(line, " ")...)
		var names []string
		for _, g := range got {
			names = append(names, strings.SplitN(g, "\t", 2)[0])
		}
		if strings.Join(names, " ") != want {
			t.Errorf("%q: got %q, want %q", line, names, want)
		}
	}
}
