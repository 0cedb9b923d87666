//go:build !grdma_noprometheus

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/pingmesh"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/spf13/pflag"
)

// pingmeshOptions are the flags of --collector.pingmesh.
type pingmeshOptions struct {
	enabled      bool
	targets      string
	device       string
	keyFile      string
	rate         float64
	maxRate      float64
	timeout      time.Duration
	sizes        []int
	maxSeries    int
	aggregateBy  string
	reloadPeriod time.Duration
}

func (o *pingmeshOptions) flags(f *pflag.FlagSet) {
	f.BoolVar(&o.enabled, "collector.pingmesh", false, "probe the nodes of --pingmesh.targets continuously over UD and export RTT, loss and errors (grdma_pingmesh_*)")
	f.StringVar(&o.targets, "pingmesh.targets", "", "the nodes to probe: `FILE` in Prometheus' file_sd format (.json, .yml, .yaml), re-read when it changes")
	f.StringVar(&o.device, "pingmesh.device", "", "probe from `DEV[/PORT]` (default: the only ACTIVE port)")
	f.StringVar(&o.keyFile, "pingmesh.key-file", "", "the responders' shared secret, `FILE` (chmod 600), for responders started with auth")
	f.Float64Var(&o.rate, "pingmesh.rate", pingmesh.DefaultRate, "probes a second to each target (`N`)")
	f.Float64Var(&o.maxRate, "pingmesh.max-rate", pingmesh.DefaultMaxRate, "probes a second in all (`N`): more targets are each probed less often")
	f.DurationVar(&o.timeout, "pingmesh.timeout", pingmesh.DefaultTimeout, "a probe unanswered after `DURATION` is lost")
	f.IntSliceVar(&o.sizes, "pingmesh.sizes", nil, "probe sizes in bytes, in turn (`N,...`; default 64,512,1024 and the path MTU)")
	f.IntVar(&o.maxSeries, "pingmesh.max-target-series", pingmesh.DefaultMaxTargetSeries, "per-target histograms and errors up to `N` targets; beyond, per value of --pingmesh.aggregate-by")
	f.StringVar(&o.aggregateBy, "pingmesh.aggregate-by", pingmesh.DefaultAggregateBy, "the targets' `LABEL` histograms are summed by beyond --pingmesh.max-target-series")
	f.DurationVar(&o.reloadPeriod, "pingmesh.reload-interval", pingmesh.DefaultReloadInterval, "check the targets file for changes every `DURATION`")
}

// check validates the flags before anything is opened.
func (o *pingmeshOptions) check(set func(string) bool, help string) (pingmesh.Config, []byte, error) {
	if !o.enabled {
		for _, name := range []string{"pingmesh.targets", "pingmesh.device", "pingmesh.key-file", "pingmesh.rate", "pingmesh.max-rate",
			"pingmesh.timeout", "pingmesh.sizes", "pingmesh.max-target-series", "pingmesh.aggregate-by", "pingmesh.reload-interval"} {
			if set(name) {
				return pingmesh.Config{}, nil, usagef(help, "--%s goes with --collector.pingmesh", name)
			}
		}
		return pingmesh.Config{}, nil, nil
	}
	if o.targets == "" {
		return pingmesh.Config{}, nil, usagef(help, "--collector.pingmesh needs --pingmesh.targets FILE (Prometheus' file_sd format)")
	}
	switch filepath.Ext(o.targets) {
	case ".json", ".yml", ".yaml":
	default:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.targets %s: a file_sd file is .json, .yml or .yaml", o.targets)
	}
	switch {
	case o.rate <= 0:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.rate %v: more than 0 probes a second", o.rate)
	case o.maxRate <= 0:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.max-rate %v: more than 0 probes a second", o.maxRate)
	case o.timeout <= 0:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.timeout %v: more than 0", o.timeout)
	case o.reloadPeriod <= 0:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.reload-interval %v: more than 0", o.reloadPeriod)
	case o.maxSeries < 0:
		return pingmesh.Config{}, nil, usagef(help, "--pingmesh.max-target-series %d: 0 or more", o.maxSeries)
	}
	cfg := pingmesh.Config{Rate: o.rate, MaxRate: o.maxRate, Timeout: o.timeout, Sizes: o.sizes, MaxTargetSeries: o.maxSeries,
		AggregateBy: o.aggregateBy, ReloadInterval: o.reloadPeriod}
	if o.maxSeries == 0 {
		cfg.MaxTargetSeries = -1 // 0 on the command line: none per target
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return cfg, nil, usagef(help, "--collector.pingmesh: %v", err)
	}
	var key []byte
	if o.keyFile != "" {
		k, err := verbsprobe.LoadKey(o.keyFile)
		if err != nil {
			return cfg, nil, usagef(help, "--pingmesh.key-file: %v", err)
		}
		key = k
	}
	return cfg, key, nil
}

// startPingmesh starts the pingmesh of the flags on the port they name
// (or the only ACTIVE one), this node left out of its targets.
func startPingmesh(ctx context.Context, sys sysfs.FS, o *pingmeshOptions, cfg pingmesh.Config, key []byte, log *slog.Logger) (*pingmesh.Pingmesh, error) {
	ref, err := pingmeshPort(sys, o.device)
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	addrs := pingmesh.LocalAddrs()
	cfg.Skip = func(t pingmesh.Target) bool { return pingmesh.LocalTarget(t, hostname, addrs) }
	cfg.Logger = log.With("collector", "pingmesh")
	pm, err := pingmesh.Start(ctx, cfg, pingmesh.StartOptions{
		Device: verbsprobe.Options{Sysfs: sys, Device: ref.Device, Port: ref.Port, GIDIndex: verbsprobe.AutoGID},
		Key:    key, File: &pingmesh.TargetsFile{Path: o.targets}})
	if err != nil {
		return nil, fmt.Errorf("--collector.pingmesh: %w", err)
	}
	log.Info("pingmesh probing", "device", pm.Device(), "address", pm.Prober.Address().String(), "targets", o.targets,
		"rate", o.rate, "max_rate", o.maxRate, "timestamps", string(pm.Source), "why", pm.SourceWhy)
	return pm, nil
}

// pingmeshPort is the port the pingmesh probes from: the one named, or
// the only ACTIVE one.
func pingmeshPort(sys sysfs.FS, name string) (ib.PortRef, error) {
	if name != "" {
		ref, err := newArgv(nil, "grdma exporter --help").DevPort(name)
		if err != nil {
			return ref, err
		}
		if ref.Port == 0 {
			ref.Port = 1
		}
		return ref, nil
	}
	refs, err := sys.ListPorts("", 0)
	if err != nil {
		return ib.PortRef{}, fmt.Errorf("--collector.pingmesh: %w", err)
	}
	var active []ib.PortRef
	for _, r := range refs {
		if p, err := sys.Port(r.Device, r.Port); err == nil && p.State == ib.PortActive {
			active = append(active, r)
		}
	}
	if len(active) != 1 {
		return ib.PortRef{}, fmt.Errorf("--collector.pingmesh: %d RDMA ports are ACTIVE here: name the one to probe from with --pingmesh.device DEV[/PORT]", len(active))
	}
	return active[0], nil
}
