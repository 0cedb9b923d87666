package pingmesh

import (
	"context"
	"fmt"

	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
)

// Pingmesh is a running pingmesh: the device port, its UD prober and the
// collector over the targets file (Start).
type Pingmesh struct {
	*Mesh
	// Prober is the UD prober, shared with /probe's ud_ping.
	Prober *udping.Prober
	// Source says where the times come from, and why.
	Source    udping.TimestampSource
	SourceWhy string

	dev *verbsprobe.Device
}

// StartOptions are what Start needs beyond the collector's Config.
type StartOptions struct {
	// Device is the port probed from (verbsprobe.Options: Sysfs, Device,
	// Port, GIDIndex; Open for a fake kernel).
	Device verbsprobe.Options
	// Key is the responders' shared secret, for those started with auth.
	Key []byte
	// File is the targets file.
	File *TargetsFile
}

// Start opens the device port, makes a UD prober on it
// (verbsprobe.NewUDProber: a target's address is asked of its responder,
// a refused connection failing at once: Dial) and the collector over the
// targets file. Run probes; Close releases the queue pair and the device.
func Start(ctx context.Context, cfg Config, o StartOptions) (*Pingmesh, error) {
	cfg = cfg.WithDefaults()
	dev, res := verbsprobe.OpenDevice(ctx, o.Device)
	if dev == nil {
		return nil, fmt.Errorf("%s/%d: %w", o.Device.Device, max(o.Device.Port, 1), res.Err())
	}
	local, err := dev.UDLocal()
	if err != nil {
		dev.Close()
		return nil, err
	}
	p, err := verbsprobe.NewUDProber(dev, udping.ProberConfig{MaxRate: cfg.MaxRate, Timeout: cfg.Timeout},
		verbsprobe.ConnectConfig{Key: o.Key, Timeout: udping.DefaultResolveTimeout, Dial: Dial(nil)})
	if err != nil {
		dev.Close()
		return nil, err
	}
	src, why := local.TimestampSource()
	return &Pingmesh{Mesh: New(cfg, p, o.File), Prober: p, Source: src, SourceWhy: why, dev: dev}, nil
}

// Device is the port probed from: "rxe0/1".
func (pm *Pingmesh) Device() string { return pm.dev.Name() }

// Run probes until ctx ends. It returns an error if the prober's queue
// pair failed and could not be made again.
func (pm *Pingmesh) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { pm.Mesh.Run(ctx); close(done) }()
	err := pm.Prober.Run(ctx)
	<-done
	return err
}

// Close releases the prober and the device; after Run returned.
func (pm *Pingmesh) Close() error {
	err := pm.Prober.Close()
	if cerr := pm.dev.Close(); err == nil {
		err = cerr
	}
	return err
}
