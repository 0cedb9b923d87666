package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/grdma/grdma/udping"
)

// A responder (`grdma probe DEV serve`) answers any number of peers at
// once on one Device: each peer that sends a valid first message (a grdma
// hello within the limits, proving the shared secret when there is one,
// or an ibv_rc_pingpong address) gets its own goroutine, Conn and
// exchange, as a one-shot listener would serve it; clients cannot tell
// the two apart but by the limits. What it serves at once is bounded
// (peers, pinned memory); a peer over those bounds is answered busy and
// tries again, one over a peer's limits is refused.

// ResponderConfig is a responder's policy.
type ResponderConfig struct {
	// ServeConfig is what each peer is served with and allowed: the
	// ibv_rc_pingpong test, the timeout, the per-peer Limits, the
	// allow-list, the shared secret, the log of refused connections.
	ServeConfig
	// MaxPeers is how many peers are served at once; 0 means
	// DefaultMaxPeers.
	MaxPeers int
	// MaxPinnedTotal is the memory the peers served at once may pin
	// together; 0 means DefaultMaxPinnedTotal.
	MaxPinnedTotal int
	// Grace is how long peers still running when the responder stops are
	// given to finish before they are cut off; 0 means DefaultGrace.
	Grace time.Duration
	// OnPeer, when set, is told of each peer served, when it is done.
	OnPeer func(*Result)
	// UDPing, when set, also answers UD pings (package udping) on one UD
	// queue pair of the device, with this policy (its Local is the
	// Device's): probers ask for its address with a TestUDPing hello.
	// The device must be rxe's and have a GID.
	UDPing *udping.ResponderConfig
	// CM, when set, also answers probes over the RDMA CM
	// (ConnectConfig.Via = TransportCM) at its address, on the Device
	// (requests to other devices are rejected), under the same limits:
	// a request over the peers or memory is rejected busy, one over a
	// peer's limits refused, each in the REJ's private data. With Key
	// set, CM requests are refused: their 56 bytes cannot carry the
	// challenge.
	CM *CMListen
	// cmOpen: tests' fake CM.
	cmOpen func() (*cmChannel, error)
	// OnUDPing, when set, is given the UD ping responder once it runs
	// (its Stats).
	OnUDPing func(*udping.Responder)
}

// Defaults of a responder.
const (
	DefaultMaxPeers       = 16
	DefaultMaxPinnedTotal = 256 << 20
	DefaultGrace          = 5 * time.Second
)

// WithDefaults fills in the zero fields.
func (c ResponderConfig) WithDefaults() ResponderConfig {
	if c.MaxPeers <= 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.MaxPinnedTotal <= 0 {
		c.MaxPinnedTotal = DefaultMaxPinnedTotal
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultPeerTimeout
	}
	c.Limits = c.Limits.WithDefaults()
	// A peer's test beyond what all may pin together is refused, not
	// left to wait for room that never comes.
	c.Limits.MaxPinned = min(c.Limits.MaxPinned, c.MaxPinnedTotal)
	return c
}

// capacity is what a responder serves at once.
type capacity struct {
	mu              sync.Mutex
	peers, pinned   int
	maxPeers, limit int
}

// admit reserves a peer's slot and memory, or says why there is none.
func (c *capacity) admit(arr *arrival) error {
	need := arr.test.Pinned()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.peers >= c.maxPeers:
		return fmt.Errorf("%d peers served at once, the responder's limit (its peers)", c.maxPeers)
	case c.pinned+need > c.limit:
		return fmt.Errorf("%d bytes pinned for %d peers; this test's %d bytes would pass the responder's %d (its memory)",
			c.pinned, c.peers, need, c.limit)
	}
	c.peers++
	c.pinned += need
	arr.release = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.peers--
		c.pinned -= need
	}
	return nil
}

// Respond serves peers on ln with dev until ctx ends or ln fails. Then it
// stops accepting, gives the peers still running cfg.Grace to finish,
// cuts off the rest (they are told they were interrupted), and returns
// once every peer's Conn is torn down. ln is closed; dev stays open (the
// caller's to close). The error is ln's, nil when ctx ended it.
func Respond(ctx context.Context, dev *Device, ln net.Listener, cfg ResponderConfig) error {
	cfg = cfg.WithDefaults()
	if dev.driver == nil {
		ln.Close()
		return &UnsupportedError{Device: dev.opts.Device, Reason: dev.unsupportedDriver()}
	}
	if cfg.UDPing != nil {
		stop, err := startUDPing(ctx, dev, &cfg)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	capa := &capacity{maxPeers: cfg.MaxPeers, limit: cfg.MaxPinnedTotal}
	a := &acceptor{ln: ln, cfg: cfg.ServeConfig, timeout: cfg.Timeout, pending: max(maxPending, 4*cfg.MaxPeers), admit: capa.admit}
	// Peers run under hard: it ends Grace after ctx does.
	hard, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(cfg.Grace, cut)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stop()
	var wg sync.WaitGroup
	serve := func(arr *arrival) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer arr.release()
			var res *Result
			if arr.test.Kind == TestUDPing {
				res = serveUDLookup(hard, dev, arr, cfg.ServeConfig)
			} else {
				res = servePeer(hard, dev, arr, cfg.ServeConfig)
			}
			if cfg.OnPeer != nil {
				cfg.OnPeer(res)
			}
		}()
	}
	var cmDone chan struct{}
	cmStopAll, cmClose := func() {}, func() {}
	if cfg.CM != nil {
		cma, err := openCMArrivals(dev, cfg)
		if err != nil {
			ln.Close()
			return err
		}
		cmClose = func() { cma.ch.Close() } // after the peers, whose IDs are on it
		cmDone = make(chan struct{})
		cmCtx, cmStop := context.WithCancel(ctx)
		cmStopAll = cmStop // also when ln fails first
		go func() {
			defer close(cmDone)
			defer cma.close()
			for {
				arr, err := cma.next(cmCtx)
				if err != nil {
					return // ctx ended (or the channel failed: the TCP side goes on)
				}
				if err := capa.admit(arr); err != nil {
					arr.cm.reject(true, err)
					cma.refuse(arr.from(), true, err)
					continue
				}
				serve(arr)
			}
		}()
	}
	err := a.loop(ctx, func(arr *arrival) bool {
		serve(arr)
		return true
	})
	if cmDone != nil {
		cmStopAll()
		<-cmDone
	}
	wg.Wait()
	cmClose()
	return err
}

// openCMArrivals opens the CM and listens where cfg.CM says.
func openCMArrivals(dev *Device, cfg ResponderConfig) (*cmArrivals, error) {
	open := cfg.cmOpen
	if open == nil {
		open = func() (*cmChannel, error) { return openCM(cfg.CM.Open, dev.opts.Sysfs) }
	}
	ch, err := open()
	if err != nil {
		return nil, err
	}
	a, err := listenCM(ch, *cfg.CM, cfg.ServeConfig)
	if err != nil {
		ch.Close()
		return nil, err
	}
	return a, nil
}

// servePeer serves one peer whose first message arrived, on dev.
func servePeer(ctx context.Context, dev *Device, arr *arrival, cfg ServeConfig) *Result {
	res := &Result{}
	dev.describe(res)
	res.Peer = &PeerResult{Role: RoleServer, Host: arr.from()}
	x := serverFor(arr, cfg, res.Peer)
	rec := newRecorder(ctx, res, &dev.target)
	rec.failed = x.Failed
	defer x.Close()
	run(rec, dev, x)
	return res
}

// IsBusy reports whether err is a responder's answer that it is serving
// all it may at once.
func IsBusy(err error) bool {
	var b *busyError
	return errors.As(err, &b)
}

// startUDPing starts the UD ping responder of cfg on dev, its lookups
// served through cfg's ServeConfig.UD; stop ends it and releases it.
func startUDPing(ctx context.Context, dev *Device, cfg *ResponderConfig) (stop func(), err error) {
	local, err := dev.UDLocal()
	if err != nil {
		return nil, fmt.Errorf("UD ping: %w", err)
	}
	ucfg := *cfg.UDPing
	ucfg.Local = local
	if dev.opts.Poll && ucfg.Spin == 0 {
		ucfg.Spin = time.Hour // the busy-polling baseline (GRDMA_PROBE_POLL=1): once active, always
	}
	r, err := udping.NewResponder(ucfg)
	if err != nil {
		return nil, err
	}
	cfg.UD = r
	if cfg.OnUDPing != nil {
		cfg.OnUDPing(r)
	}
	uctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(uctx) }()
	return func() {
		cancel()
		<-done
		r.Close()
	}, nil
}
