package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/verbsprobe"
)

// probePeer runs a probe between two hosts: this side listens (or
// serves), or connects to its peer.
func (a *app) probePeer(ctx context.Context, req grammar.ProbeRequest) error {
	if req.CM != nil {
		return a.probeCM(ctx, req)
	}
	var key []byte
	if req.Auth != "" {
		var err error
		if key, err = verbsprobe.LoadKey(req.Auth); err != nil {
			return err
		}
	}
	if req.Serve {
		return a.probeServe(ctx, req, key)
	}
	if req.Ping {
		return a.probePing(ctx, req, key)
	}
	var r *verbsprobe.Result
	if req.Listen {
		ln, allow, err := listenFor(ctx, req)
		if err != nil {
			return err
		}
		defer ln.Close()
		fmt.Fprintf(os.Stderr, "grdma: probe %s listening on %s for one peer\n", req.Options.Device, ln.Addr())
		r = verbsprobe.Serve(ctx, req.Options, ln, verbsprobe.ServeConfig{
			Pingpong: req.Test,
			Timeout:  req.Timeout,
			// The listener's size bounds what a peer may ask for.
			Limits: verbsprobe.Limits{MaxSize: req.Test.Size},
			Allow:  allow,
			Key:    key,
			OnRefused: func(r verbsprobe.Refusal) {
				fmt.Fprintf(os.Stderr, "grdma: probe %s: refused %s: %s\n", req.Options.Device, r.Peer, r.Reason)
			},
		})
	} else {
		r = verbsprobe.ConnectWith(ctx, req.Options, req.PeerAddr, verbsprobe.ConnectConfig{Test: req.Test, Timeout: req.Timeout, Key: key})
	}
	series := &verbsprobe.Series{}
	series.Add(r)
	p := a.printer()
	render.ProbeResult(p, r, series, 1)
	if err := p.Flush(); err != nil {
		return err
	}
	return verbsprobe.Outcome(r, 1, 1)
}

// listenFor opens the listener of a listen or serve request and resolves
// its allow-list.
func listenFor(ctx context.Context, req grammar.ProbeRequest) (net.Listener, []netip.Prefix, error) {
	allow, err := verbsprobe.ResolveAllow(ctx, req.From)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", req.ListenAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot listen on %s: %w (another grdma probe, or ibv_rc_pingpong, on that port?)", req.ListenAddr, unwrapOp(err))
	}
	return ln, allow, nil
}

// probeServe runs a responder until SIGINT or SIGTERM: one line per peer
// on stdout (JSON with -j), the device's steps when it cannot open.
func (a *app) probeServe(ctx context.Context, req grammar.ProbeRequest, key []byte) error {
	if req.CM != nil && req.Options.Device == "" {
		// serve cm ADDR: the device the CM binds ADDR's connections to.
		name, port, err := verbsprobe.CMDevice(ctx, a.cmOpener(req), req.Options.Sysfs, req.CM.Addr.Addr())
		if err != nil {
			return fmt.Errorf("probe serve cm %s: which device: %w", req.CM.Addr.Addr(), err)
		}
		req.Options.Device, req.Options.Port = name, port
	}
	dev, err := a.openProbeDevice(ctx, req)
	if dev == nil {
		return err
	}
	defer dev.Close()
	ln, allow, err := listenFor(ctx, req)
	if err != nil {
		return err
	}
	cfg := req.Responder
	cfg.Pingpong, cfg.Timeout, cfg.Allow, cfg.Key = req.Test, req.Timeout, allow, key
	if req.CM != nil {
		cfg.CM = &verbsprobe.CMListen{Addr: req.CM.Addr, Open: a.cmOpener(req)}
		fmt.Fprintf(os.Stderr, "grdma: probe %s also serving over RDMA CM on %s\n", dev.Name(), req.CM.Addr)
	}
	cfg = cfg.WithDefaults()
	fmt.Fprintf(os.Stderr, "grdma: probe %s serving on %s: peers %d, memory %d, peer-memory %d, size %d, duration %v, timeout %v%s\n",
		dev.Name(), ln.Addr(), cfg.MaxPeers, cfg.MaxPinnedTotal, cfg.Limits.MaxPinned, cfg.Limits.MaxSize, cfg.Limits.MaxDuration, cfg.Timeout,
		map[bool]string{true: ", auth", false: ""}[key != nil])
	var mu sync.Mutex // one line at a time
	line := func(print func(p *output.Printer)) {
		mu.Lock()
		defer mu.Unlock()
		p := a.printer()
		print(p)
		p.Flush()
	}
	cfg.OnPeer = func(r *verbsprobe.Result) { line(func(p *output.Printer) { render.ServedPeer(p, r) }) }
	cfg.OnRefused = func(r verbsprobe.Refusal) { line(func(p *output.Printer) { render.Refused(p, r) }) }
	// UD pings are answered where grdma has the data path (rxe) and the
	// port a GID.
	var ud *udping.Responder
	if _, err := dev.UDLocal(); err == nil {
		cfg.UDPing = &udping.ResponderConfig{}
		cfg.OnUDPing = func(r *udping.Responder) {
			ud = r
			a := r.Address()
			fmt.Fprintf(os.Stderr, "grdma: probe %s answering UD pings on %s\n", dev.Name(), a)
		}
	} else {
		fmt.Fprintf(os.Stderr, "grdma: probe %s: no UD ping: %v\n", dev.Name(), err)
	}
	if err := verbsprobe.Respond(ctx, dev, ln, cfg); err != nil {
		return fmt.Errorf("probe %s serve: %w", dev.Name(), err)
	}
	if ud != nil {
		s := ud.Stats()
		fmt.Fprintf(os.Stderr, "grdma: probe %s: UD ping: %d probes answered, %d reports; dropped: %d unregistered, %d malformed, %d throttled, %d busy\n",
			dev.Name(), s.Probes, s.Reports, s.Unregistered, s.Malformed, s.Throttled, s.Busy)
	}
	fmt.Fprintf(os.Stderr, "grdma: probe %s: stopped serving\n", dev.Name())
	return nil
}

// openProbeDevice opens the device of a long-lived probe (serve, ping);
// when it cannot, or the driver is not supported, it prints the steps
// that ran and returns a nil Device with the error to exit 1 with.
func (a *app) openProbeDevice(ctx context.Context, req grammar.ProbeRequest) (*verbsprobe.Device, error) {
	dev, res := verbsprobe.OpenDevice(ctx, req.Options)
	if dev != nil && res.Unsupported == "" {
		return dev, nil
	}
	if dev != nil {
		dev.Close()
	}
	p := a.printer()
	render.ProbeResult(p, res, &verbsprobe.Series{Runs: 1}, 1)
	if err := p.Flush(); err != nil {
		return nil, err
	}
	return nil, verbsprobe.Outcome(res, 1, 1)
}

// unwrapOp drops the "listen tcp :18515:" prefix net errors repeat.
func unwrapOp(err error) error {
	if op, ok := err.(*net.OpError); ok {
		return op.Err
	}
	return err
}
