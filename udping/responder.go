package udping

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/uverbs"
)

// Responder answers the UD pings of every registered prober on one UD
// queue pair: each probe with an echo at once and a report of how long it
// held the probe, sent right after it (the two-ACK exchange, see the
// package doc), or with one echo that carries that delay when the probe
// asks (FlagEchoDelay). Probers are
// registered by the responder's control channel (Register), which also
// tells them the queue pair's address and its Q_Key; anything else that
// arrives is dropped and counted.
type Responder struct {
	cfg  ResponderConfig
	qkey uint32

	mu    sync.RWMutex
	ep    *endpoint
	peers map[peerKey]*peer
	addr  Address

	// Only Run's goroutine: what each send slot holds.
	inflight []inflight
	bucket   bucket
	active   time.Time // the last completion: Spin polls after it

	stats responderCounters
}

// ResponderConfig is a responder's device port and policy.
type ResponderConfig struct {
	Local Local
	// MaxPeers bounds the probers registered at once (each holds an
	// address handle); 0 means DefaultMaxPeers.
	MaxPeers int
	// PeerTTL is how long a prober stays registered after its last
	// probe (or its registration); 0 means DefaultPeerTTL. A prober
	// whose probes go unanswered asks the control channel again.
	PeerTTL time.Duration
	// MaxRate bounds the probes answered a second, all probers together
	// (more are dropped and counted); 0 means DefaultMaxRate.
	MaxRate float64
	// MaxPeerRate bounds the probes of one prober answered a second, so
	// that one cannot take all of MaxRate; 0 means DefaultMaxPeerRate.
	MaxPeerRate float64
	// Receives is how many receives are posted; 0 means
	// DefaultReceives.
	Receives int
	// Spin, when set, polls the completion queue for this long after each
	// completion before it sleeps on the completion channel (see
	// ProberConfig.Spin).
	Spin time.Duration
}

// Defaults of a responder.
const (
	DefaultMaxPeers    = 4096
	DefaultPeerTTL     = 10 * time.Minute
	DefaultMaxRate     = 10000
	DefaultMaxPeerRate = 1000
	DefaultReceives    = 256
	responderSends     = 128
)

// WithDefaults fills in the zero fields.
func (c ResponderConfig) WithDefaults() ResponderConfig {
	if c.MaxPeers <= 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.PeerTTL <= 0 {
		c.PeerTTL = DefaultPeerTTL
	}
	if c.MaxRate <= 0 {
		c.MaxRate = DefaultMaxRate
	}
	if c.MaxPeerRate <= 0 {
		c.MaxPeerRate = DefaultMaxPeerRate
	}
	if c.Receives <= 0 {
		c.Receives = DefaultReceives
	}
	return c
}

// peerKey names a prober: its GID and queue pair.
type peerKey struct {
	gid gid.GID
	qpn uint32
}

type peer struct {
	addr Address
	ah   uverbs.AH
	// bucket bounds its probes answered (MaxPeerRate); Run's goroutine's.
	bucket bucket
	// seen is when the peer last probed or registered (UnixNano).
	seen atomic.Int64
}

// inflight is what a send slot of the responder carries: an echo or a
// report, to whom (its address handle stays until the send completed).
type inflight struct {
	peer     *peer
	session  uint64
	id       uint64
	received time.Time // T2: when the probe's receive was polled
}

// ResponderStats counts what a responder did.
type ResponderStats struct {
	Probes  uint64 // answered
	Reports uint64 // reports sent
	// Dropped, by why: from a prober not registered, not a UD ping
	// datagram (or a malformed one), over the rate, no send slot free.
	Unregistered, Malformed, Throttled, Busy uint64
	// Failed sends (a send that could not be posted or completed in error).
	SendErrors uint64
	// Restarts of the queue pair after it failed.
	Restarts uint64
	Peers    int // registered now
}

type responderCounters struct {
	probes, reports, unregistered, malformed, throttled, busy, sendErrors, restarts atomic.Uint64
}

// NewResponder makes the responder's queue pair on cfg.Local, with a
// random Q_Key. Run answers probes; Close releases it.
func NewResponder(cfg ResponderConfig) (*Responder, error) {
	cfg = cfg.WithDefaults()
	r := &Responder{cfg: cfg, qkey: NewQKey(), peers: map[peerKey]*peer{}, bucket: newBucket(cfg.MaxRate)}
	ep, err := newEndpoint(cfg.Local, r.qkey, cfg.Receives, responderSends)
	if err != nil {
		return nil, fmt.Errorf("udping: the responder's queue pair: %w", err)
	}
	r.ep, r.addr = ep, responderAddress(ep)
	r.inflight = make([]inflight, responderSends)
	return r, nil
}

// Address is where probers send: what the control channel tells them.
func (r *Responder) Address() Address {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.addr
}

// Register lets a prober's probes in until it is silent for PeerTTL,
// making its address handle; probing again refreshes it. It refuses a
// malformed address and more peers than MaxPeers (Run drops those silent
// past their time).
func (r *Responder) Register(a Address) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("udping: the prober's address: %w", err)
	}
	key := peerKey{a.GID, a.QPN}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.peers[key]; ok {
		p.seen.Store(now.UnixNano())
		return nil
	}
	if len(r.peers) >= r.cfg.MaxPeers {
		return fmt.Errorf("udping: %d probers registered, the responder's limit", r.cfg.MaxPeers)
	}
	if r.ep == nil {
		return errors.New("udping: the responder is closed")
	}
	ah, err := r.ep.ah(a.GID)
	if err != nil {
		return fmt.Errorf("udping: an address handle to %s: %w", a.GID, err)
	}
	p := &peer{addr: a, ah: ah, bucket: newBucket(r.cfg.MaxPeerRate)}
	p.seen.Store(now.UnixNano())
	r.peers[key] = p
	return nil
}

// expireLocked drops the peers silent for PeerTTL but those a send in
// flight still uses (rxe fails a send whose address handle is gone, and
// the queue pair with it); r.mu is held, by Run's goroutine.
func (r *Responder) expireLocked(now time.Time) {
	for k, p := range r.peers {
		if now.Sub(time.Unix(0, p.seen.Load())) > r.cfg.PeerTTL && !r.busyWith(p) {
			r.ep.l.Context.DestroyAH(p.ah)
			delete(r.peers, k)
		}
	}
}

// busyWith reports whether a send in flight uses p's address handle.
func (r *Responder) busyWith(p *peer) bool {
	for _, f := range r.inflight {
		if f.peer == p {
			return true
		}
	}
	return false
}

// Stats returns the responder's counters.
func (r *Responder) Stats() ResponderStats {
	r.mu.RLock()
	n := len(r.peers)
	r.mu.RUnlock()
	s := &r.stats
	return ResponderStats{Probes: s.probes.Load(), Reports: s.reports.Load(), Unregistered: s.unregistered.Load(),
		Malformed: s.malformed.Load(), Throttled: s.throttled.Load(), Busy: s.busy.Load(), SendErrors: s.sendErrors.Load(),
		Restarts: s.restarts.Load(), Peers: n}
}

// Run answers probes until ctx ends. When the queue pair fails (a
// completion in error: the kernel moved it to the error state), it is
// made again (a new queue pair number: probers ask the control channel
// again when theirs go unanswered); when that fails too, Run returns the
// error.
func (r *Responder) Run(ctx context.Context) error {
	every := min(max(r.cfg.PeerTTL/2, 10*time.Millisecond), time.Minute)
	expiry := time.Now().Add(every)
	// One AfterFunc for the whole Run, not a context per wait: it ends
	// the wait of the queue pair current then (the loop checks ctx
	// after a restart made another).
	defer context.AfterFunc(ctx, func() {
		r.mu.RLock()
		if r.ep != nil {
			r.ep.interrupt()
		}
		r.mu.RUnlock()
	})()
	for ctx.Err() == nil {
		var spin time.Time
		if r.cfg.Spin > 0 {
			spin = r.active.Add(r.cfg.Spin)
		}
		wcs, err := r.ep.wait(expiry, spin)
		if len(wcs) > 0 {
			r.active = time.Now()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = r.handle(wcs)
		}
		if err != nil {
			if rerr := r.restart(); rerr != nil {
				return fmt.Errorf("udping: the responder's queue pair failed (%v) and could not be made again: %w", err, rerr)
			}
		}
		if now := time.Now(); now.After(expiry) {
			r.mu.Lock()
			r.expireLocked(now)
			r.mu.Unlock()
			expiry = now.Add(every)
		}
	}
	return nil
}

// handle takes a batch of completions.
func (r *Responder) handle(wcs []uverbs.WC) error {
	var failed error
	for _, wc := range wcs {
		if wc.WRID&sendFlag != 0 {
			slot := int(wc.WRID &^ sendFlag)
			r.sentSlot(slot)
			if wc.Status != uverbs.WCSuccess {
				r.stats.sendErrors.Add(1)
				failed = &completionError{wc}
			}
			continue
		}
		if wc.Status != uverbs.WCSuccess {
			failed = &completionError{wc}
			continue
		}
		received := time.Now()
		slot := int(wc.WRID)
		b, ok := r.ep.received(slot, wc.ByteLen)
		if ok {
			r.answer(b, wc.SrcQP, received)
		} else {
			r.stats.malformed.Add(1)
		}
		if err := r.ep.postRecv(slot); err != nil {
			failed = err
		}
	}
	return failed
}

// sentSlot frees a send slot whose send completed.
func (r *Responder) sentSlot(slot int) {
	if slot >= 0 && slot < len(r.inflight) {
		r.inflight[slot] = inflight{}
	}
	r.ep.sent(slot)
}

// answer echoes a probe from a registered prober: b is the receive, the
// GRH then the datagram.
func (r *Responder) answer(b []byte, srcQP uint32, received time.Time) {
	g, err := uverbs.ParseGRH(b)
	if err != nil {
		r.stats.malformed.Add(1)
		return
	}
	dg := b[uverbs.GRHSize:]
	h, err := ParseHeader(dg)
	if err != nil || h.Kind != KindProbe {
		r.stats.malformed.Add(1)
		return
	}
	r.mu.RLock()
	p := r.peers[peerKey{gid.GID(g.SGID), srcQP}]
	r.mu.RUnlock()
	if p == nil {
		r.stats.unregistered.Add(1)
		return
	}
	p.seen.Store(received.UnixNano())
	if !p.bucket.take(received) || !r.bucket.take(received) {
		r.stats.throttled.Add(1)
		return
	}
	slot, out, ok := r.ep.sendBuf(len(dg))
	if !ok {
		r.stats.busy.Add(1)
		return
	}
	clear(out[HeaderSize:])
	f := inflight{peer: p, session: h.Session, id: h.ID, received: received}
	r.inflight[slot] = f
	sent := time.Now() // T3: before the echo's send (see the package doc)
	echo := Header{Kind: KindEcho, Session: h.Session, ID: h.ID}
	one := h.Flags&FlagEchoDelay != 0 // the prober asks for one reply
	if one {
		echo.Delay, echo.Flags = min(sent.Sub(received), MaxDelay), FlagEchoDelay
	}
	PutHeader(out, echo)
	if err := r.ep.send(slot, len(dg), &p.ah, p.addr); err != nil {
		r.inflight[slot] = inflight{}
		r.stats.sendErrors.Add(1)
		return
	}
	if !one {
		r.report(f, sent)
	}
	r.stats.probes.Add(1)
}

// report sends the second reply of an echo sent at sent: the responder's
// delay, from the probe's receive to the echo's send.
func (r *Responder) report(f inflight, sent time.Time) {
	slot, out, ok := r.ep.sendBuf(HeaderSize)
	if !ok {
		r.stats.busy.Add(1)
		return
	}
	PutHeader(out, Header{Kind: KindReport, Session: f.session, ID: f.id, Delay: min(sent.Sub(f.received), MaxDelay)})
	r.inflight[slot] = inflight{peer: f.peer}
	if err := r.ep.send(slot, HeaderSize, &f.peer.ah, f.peer.addr); err != nil {
		r.inflight[slot] = inflight{}
		r.stats.sendErrors.Add(1)
		return
	}
	r.stats.reports.Add(1)
}

// restart makes the queue pair again; the registrations stay (their
// address handles belong to the protection domain).
func (r *Responder) restart() error {
	r.stats.restarts.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.ep
	r.ep = nil
	old.close()
	clear(r.inflight)
	ep, err := newEndpoint(r.cfg.Local, r.qkey, r.cfg.Receives, responderSends)
	if err != nil {
		return err
	}
	r.ep, r.addr = ep, responderAddress(ep)
	return nil
}

// responderAddress is the responder's address on ep: it takes
// FlagEchoDelay.
func responderAddress(ep *endpoint) Address {
	a := ep.address()
	a.EchoDelay = true
	return a
}

// Close destroys the queue pair and the peers' address handles. Run must
// have returned.
func (r *Responder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.ep != nil {
		errs = append(errs, r.ep.close())
		r.ep = nil
	}
	for k, p := range r.peers {
		errs = append(errs, r.cfg.Local.Context.DestroyAH(p.ah))
		delete(r.peers, k)
	}
	return errors.Join(errs...)
}

// bucket is a token bucket: rate tokens a second, at most a second's
// worth saved up.
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64) bucket { return bucket{rate: rate, tokens: max(rate, 1)} }

// take takes a token at now, or reports there is none.
func (b *bucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(max(b.rate, 1), b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// until is how long until a token is there.
func (b *bucket) until(now time.Time) time.Duration {
	tokens := b.tokens
	if !b.last.IsZero() {
		tokens = min(max(b.rate, 1), tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / b.rate * float64(time.Second))
}
