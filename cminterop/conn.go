package cminterop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/verbsprobe"
)

// kernel is what a run needs of the host: the CM (the kernel's, or in
// tests rdmacmtest's), and the uverbs device of the device port the CM
// bound an ID to.
type kernel struct {
	rdmacm.CM
	// open opens the device port's uverbs device and names it.
	open func(p rdmacm.DevicePort) (*uverbs.Context, string, error)
	// chose fills what the CM chose for a connection on device dev.
	chose func(ci *verbsprobe.CMInfo, addr rdmacm.Addr, route rdmacm.Route, dev string)
}

// openKernel opens the host's: the RDMA CM character device, and sysfs
// to name (by node GUID, locator.CMDevice) and open the devices it
// chooses and read their GID tables (verbsprobe.CMInfo.Fill).
func openKernel(cfg Config) (*kernel, error) {
	if cfg.kernel != nil {
		return cfg.kernel()
	}
	fsys := cfg.Sysfs
	if fsys.Root() == "" {
		var err error
		if fsys, err = sysfs.NewFS("/"); err != nil {
			return nil, err
		}
	}
	open := cfg.Open
	if open == nil {
		open = func() (*rdmacm.Channel, error) { return locator.OpenRDMACM(fsys, nil) }
	}
	ch, err := open()
	if err != nil {
		return nil, err
	}
	return &kernel{CM: ch,
		open: func(p rdmacm.DevicePort) (*uverbs.Context, string, error) {
			name, err := locator.CMDevice(fsys, p)
			if err != nil {
				return nil, "", err
			}
			c, err := locator.OpenSysfs(fsys, name)
			return c, name, err
		},
		chose: func(ci *verbsprobe.CMInfo, addr rdmacm.Addr, route rdmacm.Route, dev string) {
			ci.Fill(addr, route, dev, uint32(addr.Device.Port), fsys)
		}}, nil
}

// endpoint is one side's verbs objects: an RC queue pair on the device
// the CM chose, its completion queue, and one registered buffer.
type endpoint struct {
	c   *uverbs.Context
	pd  uverbs.PD
	cq  *uverbs.RxeCQ
	qp  *uverbs.RxeQP
	buf []byte
	mr  uverbs.MR
	// Handles start at 0: what was made is told by these.
	havePD, haveMR bool
	// done holds completions polled while waiting for another.
	done map[uint64]uverbs.WC
	// names say what a work request is, for the errors of failed ones.
	names map[uint64]string
	// gone is closed when the peer disconnected (nil: not watched).
	gone <-chan struct{}
}

// newEndpoint makes the queue pair (sendWR and recvWR deep) and
// registers size bytes, open to the peer's RDMA READ and WRITE.
func newEndpoint(c *uverbs.Context, sendWR, recvWR uint32, size int) (e *endpoint, err error) {
	e = &endpoint{c: c, done: map[uint64]uverbs.WC{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	if e.pd, err = c.AllocPD(); err != nil {
		return e, err
	}
	e.havePD = true
	if e.cq, err = c.CreateRxeCQ(sendWR + recvWR); err != nil {
		return e, err
	}
	init := uverbs.QPInit{PD: e.pd, SendCQ: e.cq.CQ(), RecvCQ: e.cq.CQ(), Type: ib.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if e.qp, err = c.CreateRxeQP(init); err != nil {
		return e, err
	}
	if e.buf, err = uverbs.AllocBuffer(size); err != nil {
		return e, err
	}
	e.mr, err = c.RegMR(e.pd, e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	e.haveMR = err == nil
	return e, err
}

// close releases the verbs objects (the context with them) in the
// kernel's order; each only if made.
func (e *endpoint) close() error {
	var errs []error
	if e.haveMR {
		errs = append(errs, e.c.DeregMR(e.mr))
	}
	if e.qp != nil {
		errs = append(errs, e.qp.Destroy())
	}
	if e.cq != nil {
		errs = append(errs, e.cq.Destroy())
	}
	if e.havePD {
		errs = append(errs, e.c.DeallocPD(e.pd))
	}
	if e.buf != nil {
		errs = append(errs, uverbs.FreeBuffer(e.buf))
	}
	errs = append(errs, e.c.Close())
	return errors.Join(errs...)
}

// move takes the queue pair to state with the CM's attributes; adjust,
// when set, changes them first (the passive side's resources).
func (e *endpoint) move(id rdmacm.Conn, state ib.QPState, adjust func(*uverbs.QPAttr)) error {
	attr, mask, err := id.InitQPAttr(state)
	if err != nil {
		return fmt.Errorf("INIT_QP_ATTR %v: %w", state, err)
	}
	if adjust != nil {
		adjust(&attr)
	}
	if err := e.c.ModifyQP(e.qp.QP(), &attr, mask); err != nil {
		return fmt.Errorf("MODIFY_QP to %v with the CM's attributes: %w", state, err)
	}
	return nil
}

// rtrRTS moves the queue pair through INIT (again: the access flags the
// connection allows), RTR and RTS; resources and depth, when not nil,
// are the passive side's own (librdmacm does the same).
func (e *endpoint) rtrRTS(id rdmacm.Conn, resources, depth *uint8) error {
	if err := e.move(id, ib.QPStateInit, nil); err != nil {
		return err
	}
	if err := e.move(id, ib.QPStateRTR, func(a *uverbs.QPAttr) {
		if resources != nil {
			a.MaxDestRdAtomic = *resources
		}
	}); err != nil {
		return err
	}
	return e.move(id, ib.QPStateRTS, func(a *uverbs.QPAttr) {
		if depth != nil {
			a.MaxRdAtomic = *depth
		}
	})
}

// outReads is how many RDMA READs a connection keeps outstanding each
// way, as perftest's out_reads (its 16 where the device allows): what
// this package's READ client asks, and the most its servers grant (ib_read_bw
// -R asks 16; granting one would cut its bandwidth and tell nothing of
// the device).
const outReads = 16

// rdAtomicLimit is outReads within the device's limits.
func (e *endpoint) rdAtomicLimit() (uint8, error) {
	a, err := e.c.QueryDevice()
	if err != nil {
		return 0, fmt.Errorf("QUERY_DEVICE for its READ limits: %w", err)
	}
	return uint8(max(min(outReads, a.MaxQPRdAtom, a.MaxQPInitRdAtom), 1)), nil
}

// toErr moves the queue pair to ERR, as librdmacm does before it
// disconnects, so that its work requests flush.
func (e *endpoint) toErr() error {
	return e.c.ModifyQP(e.qp.QP(), &uverbs.QPAttr{State: ib.QPStateErr}, uverbs.QPAttrState)
}

func (e *endpoint) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr + uint64(off), Length: uint32(n), LKey: e.mr.LKey}
}

func (e *endpoint) postRecv(wrID uint64, off, n int) error {
	return e.qp.PostRecv(uverbs.RecvWR{ID: wrID, SGL: []uverbs.SGE{e.sge(off, n)}})
}

func (e *endpoint) post(wr uverbs.SendWR) error {
	wr.Flags |= uverbs.SendSignaled
	return e.qp.PostSend(wr)
}

// ErrPeerGone is the wait for a completion ended by the peer's
// disconnection.
var ErrPeerGone = errors.New("the peer disconnected")

// completion waits for the completion of work request wrID, keeping the
// others polled meanwhile; a failed completion is an error naming what
// the work request was (what).
func (e *endpoint) completion(ctx context.Context, wrID uint64, what string) (uverbs.WC, error) {
	var wcs [16]uverbs.WC
	var goneAt time.Time
	gone := e.gone
	for {
		for _, wc := range wcs[:e.cq.Poll(wcs[:])] {
			if wc.Status != uverbs.WCSuccess {
				if name := e.names[wc.WRID]; name != "" && wc.WRID != wrID {
					return wc, fmt.Errorf("%s: %s completed with %v", what, name, wc.Status)
				} else if name != "" {
					return wc, fmt.Errorf("%s (%s) completed with %v", what, name, wc.Status)
				}
				return wc, fmt.Errorf("%s: work request %d completed with %v", what, wc.WRID, wc.Status)
			}
			e.done[wc.WRID] = wc
		}
		if wc, ok := e.done[wrID]; ok {
			delete(e.done, wrID)
			return wc, nil
		}
		if !goneAt.IsZero() && time.Since(goneAt) > goneGrace {
			return uverbs.WC{}, fmt.Errorf("%s: %w", what, ErrPeerGone)
		}
		select {
		case <-ctx.Done():
			return uverbs.WC{}, fmt.Errorf("%s: %w", what, ctx.Err())
		case <-gone:
			// What the peer acknowledged before it went still completes:
			// poll a while longer.
			goneAt, gone = time.Now(), nil
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// goneGrace is how long completions are still polled for once the peer
// disconnected.
const goneGrace = 200 * time.Millisecond

// session is one run's connection: the kernel, the ID, the endpoint, and
// the result being filled. Close releases it all.
type session struct {
	k   *kernel
	id  rdmacm.Conn
	ep  *endpoint
	res *Result
	// watch ends when the peer disconnected (the passive side's wait).
	watching  bool
	gone      chan struct{}
	watchDone chan error
	listener  rdmacm.Listener
	// pending is a request taken from listener before accept (by a
	// protocol that waits for it itself), for accept to connect.
	pending *rdmacm.ConnRequest
}

// step runs f as the named step of the result, timed.
func (s *session) step(name string, f func() (string, error)) error {
	start := time.Now()
	detail, err := f()
	st := verbsprobe.Step{Name: name, OK: err == nil, Duration: time.Since(start), Detail: detail}
	if err != nil {
		st.Err = &verbsprobe.StepError{Step: name, Err: err}
	}
	s.res.Steps = append(s.res.Steps, st)
	if err != nil {
		return st.Err
	}
	return nil
}

// cmStep records a CM step's duration in what the CM chose.
func (s *session) cmStep(name string, start time.Time) {
	s.res.CM.Steps = append(s.res.CM.Steps, verbsprobe.CMStep{Name: name, Duration: time.Since(start)})
}

// chose records the CM's choice: the addresses, the device port, the
// path (GID, ToS, hop limit, MTU) and the GID's index and RoCE version.
func (s *session) chose(addr rdmacm.Addr, route rdmacm.Route, dev string) {
	s.k.chose(&s.res.CM, addr, route, dev)
	s.res.Device, s.res.Port = dev, s.res.CM.Port
}

// endpointOn opens the device the CM bound the ID to (addr.Device),
// records the CM's choice, and makes the endpoint there, its queue pair
// in INIT; it returns the device's name.
func (s *session) endpointOn(cfg Config, addr rdmacm.Addr, route rdmacm.Route, sendWR, recvWR uint32, size int) (string, error) {
	c, name, err := s.k.open(addr.Device)
	if err != nil {
		return "", err
	}
	s.chose(addr, route, name)
	if err := cfg.onDevice(c, name); err != nil {
		return "", err
	}
	if s.ep, err = newEndpoint(c, sendWR, recvWR, size); err != nil {
		return "", err
	}
	return name, s.ep.move(s.id, ib.QPStateInit, nil)
}

// dial connects to the peer as a librdmacm client does: resolve the
// address and the route, open the device the CM chose, make the queue
// pair (prepare posts the receives the protocol needs before the
// connection), CONNECT, RTR/RTS from the CM's attributes, RTU.
func (s *session) dial(ctx context.Context, cfg Config, sendWR, recvWR uint32, size int, param rdmacm.ConnParam, prepare func(*endpoint) error) error {
	var err error
	if err := s.step("open", func() (string, error) {
		if s.k, err = openKernel(cfg); err != nil {
			return "", err
		}
		s.id, err = s.k.CreateConn(rdmacm.PortSpaceTCP)
		return "", err
	}); err != nil {
		return err
	}
	var addr rdmacm.Addr
	if err := s.step(verbsprobe.CMStepResolveAddr, func() (string, error) {
		start := time.Now()
		if err := s.id.ResolveAddr(ctx, netip.AddrPort{}, cfg.Addr, verbsprobe.DefaultCMResolveTimeout); err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepResolveAddr, start)
		addr, err = s.id.QueryAddr()
		return fmt.Sprintf("%s from %s", addr.Dst, addr.Src), err
	}); err != nil {
		return err
	}
	if err := s.step(verbsprobe.CMStepResolveRoute, func() (string, error) {
		start := time.Now()
		if cfg.ToS != nil {
			// Before the route: RoCE reads the ToS when it builds the path.
			if err := s.id.SetTOS(*cfg.ToS); err != nil {
				return "", err
			}
		}
		if err := s.id.ResolveRoute(ctx, verbsprobe.DefaultCMResolveTimeout); err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepResolveRoute, start)
		route, err := s.id.QueryRoute()
		if err != nil {
			return "", err
		}
		name, err := s.endpointOn(cfg, addr, route, sendWR, recvWR, size)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s/%d, qpn %d", name, s.res.CM.Port, s.ep.qp.QP().QPN), prepare(s.ep)
	}); err != nil {
		return err
	}
	if err := s.step(verbsprobe.CMStepConnect, func() (string, error) {
		start := time.Now()
		param.QPNum = s.ep.qp.QP().QPN
		peer, err := s.id.Connect(ctx, param)
		if err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepConnect, start)
		return fmt.Sprintf("peer qpn %d", peer.QPNum), nil
	}); err != nil {
		return err
	}
	return s.step(verbsprobe.CMStepEstablish, func() (string, error) {
		start := time.Now()
		if err := s.ep.rtrRTS(s.id, nil, nil); err != nil {
			return "", err
		}
		if err := s.id.Establish(); err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepEstablish, start)
		return "", nil
	})
}

// listen opens the CM and listens on cfg.Addr (the "listen" step); a
// protocol that must listen before it tells its peer to connect (perftest
// -R's data connection) calls it before accept, which then takes the
// request.
func (s *session) listen(cfg Config) error {
	var err error
	return s.step("listen", func() (string, error) {
		if s.k, err = openKernel(cfg); err != nil {
			return "", err
		}
		if s.listener, err = s.k.CreateListener(rdmacm.PortSpaceTCP); err != nil {
			return "", err
		}
		if err := s.listener.Bind(cfg.Addr); err != nil {
			return "", err
		}
		if err := s.listener.Listen(1); err != nil {
			return "", err
		}
		if cfg.OnListen != nil {
			cfg.OnListen(cfg.Addr)
		}
		return cfg.Addr.String(), nil
	})
}

// accept listens on cfg.Addr, takes one request and connects it as a
// librdmacm server does: the queue pair (prepare posts receives), RTR
// and RTS with the READs the peer asks to have outstanding each way (up
// to rdAtomicLimit), ACCEPT, and ESTABLISHED. The listener is destroyed once
// the request is taken: one peer a run.
func (s *session) accept(ctx context.Context, cfg Config, sendWR, recvWR uint32, size int, prepare func(*endpoint) error) error {
	var err error
	if s.listener == nil {
		if err := s.listen(cfg); err != nil {
			return err
		}
	}
	var req rdmacm.ConnRequest
	if err := s.step(verbsprobe.CMStepRequest, func() (string, error) {
		if s.pending != nil {
			req, s.pending = *s.pending, nil
		} else if req, err = s.listener.NextRequest(ctx); err != nil {
			return "", err
		}
		s.id = req.Conn
		lerr := s.listener.Destroy()
		s.listener = nil
		if lerr != nil {
			return "", lerr
		}
		if !req.Addr.HasDevice() {
			return "", fmt.Errorf("the request's ID has no device: %+v", req.Addr)
		}
		return fmt.Sprintf("from %s, peer qpn %d", req.Addr.Dst, req.Peer.QPNum), nil
	}); err != nil {
		return err
	}
	return s.step(verbsprobe.CMStepEstablish, func() (string, error) {
		start := time.Now()
		route, err := s.id.QueryRoute()
		if err != nil {
			return "", err
		}
		name, err := s.endpointOn(cfg, req.Addr, route, sendWR, recvWR, size)
		if err != nil {
			return "", err
		}
		if err := prepare(s.ep); err != nil {
			return "", err
		}
		rd, err := s.ep.rdAtomicLimit()
		if err != nil {
			return "", err
		}
		resources, depth := min(req.Peer.ResponderResources, rd), min(req.Peer.InitiatorDepth, rd)
		if err := s.ep.rtrRTS(s.id, &resources, &depth); err != nil {
			return "", err
		}
		if err := s.id.Accept(rdmacm.ConnParam{QPNum: s.ep.qp.QP().QPN, ResponderResources: resources, InitiatorDepth: depth, RetryCount: 7, RNRRetryCount: 7}); err != nil {
			return "", err
		}
		if err := s.id.WaitEstablished(ctx); err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepEstablish, start)
		return fmt.Sprintf("%s/%d, qpn %d", name, s.res.CM.Port, s.ep.qp.QP().QPN), nil
	})
}

// watch waits, in a goroutine of its own, for the peer's disconnection:
// completions waited for after it end with ErrPeerGone.
func (s *session) watch(ctx context.Context) {
	s.gone, s.watchDone, s.watching = make(chan struct{}), make(chan error, 1), true
	s.ep.gone = s.gone
	go func() {
		err := s.id.WaitDisconnected(ctx)
		close(s.gone)
		s.watchDone <- err
	}()
}

// hangUp ends the connection from this side, or answers the peer's end
// (the DREP): ERR, DISCONNECT, and DISCONNECTED.
func (s *session) hangUp(ctx context.Context) error {
	return s.step(verbsprobe.CMStepDisconnect, func() (string, error) {
		start := time.Now()
		if err := s.ep.toErr(); err != nil {
			return "", err
		}
		peerFirst := false
		if s.watching {
			select {
			case <-s.gone:
				peerFirst = true
			default:
			}
		}
		// After the peer's DREQ, DISCONNECT sends the DREP; an ID whose
		// DREP went already says EINVAL, which is not a failure.
		derr := s.id.Disconnect()
		var err error
		if s.watching {
			select {
			case err = <-s.watchDone:
			case <-ctx.Done():
				err = ctx.Err()
			}
			s.watching = false
		} else {
			err = s.id.WaitDisconnected(ctx)
		}
		if derr != nil && !peerFirst {
			return "", derr
		}
		if err != nil {
			return "", err
		}
		s.cmStep(verbsprobe.CMStepDisconnect, start)
		if peerFirst {
			return "the peer's", nil
		}
		return "", nil
	})
}

// close releases everything the session made, whatever step it reached;
// a release that fails is joined to the result's error.
func (s *session) close() {
	var errs []error
	if s.listener != nil {
		errs = append(errs, s.listener.Destroy())
	}
	if s.ep != nil {
		errs = append(errs, s.ep.close())
	}
	if s.id != nil {
		errs = append(errs, s.id.Destroy())
	}
	if s.watching {
		<-s.watchDone // the ID's destruction ends the wait
	}
	if s.k != nil {
		errs = append(errs, s.k.Close())
	}
	if err := errors.Join(errs...); err != nil && s.res.Err == nil {
		s.res.Err = fmt.Errorf("release: %w", err)
	}
}

// onDevice checks that the CM chose the device the caller named (if
// any); where not, it closes c.
func (cfg Config) onDevice(c *uverbs.Context, name string) error {
	if cfg.Device == "" || cfg.Device == name {
		return nil
	}
	return errors.Join(fmt.Errorf("the CM chose %s for %s, not %s: the address is on %s's netdev (omit the device, or give an address of %s's)",
		name, cfg.Addr, cfg.Device, name, cfg.Device), c.Close())
}
