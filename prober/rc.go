package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/pingmesh"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/client_golang/prometheus"
)

// splitTarget splits host or host:port (an IPv6 address alone or in
// brackets with a port: verbsprobe.PeerAddress) into host and port, port
// def when absent.
func splitTarget(target string, def int) (string, int, error) {
	bad := func(why string) error {
		return fmt.Errorf("target %q: %s; give host or host:port (the responder's port, %d when left out)", target, why, def)
	}
	if len(target) > 255 || strings.ContainsAny(target, "/?#@ \t\r\n") {
		return "", 0, bad("not an address")
	}
	hp, err := verbsprobe.PeerAddress(target)
	if err != nil {
		return "", 0, bad(err.Error())
	}
	host, port, _ := net.SplitHostPort(hp)
	n, _ := strconv.Atoi(port)
	if _, _, err := net.SplitHostPort(target); err != nil {
		n = def // no port given
	}
	if strings.Contains(host, ":") {
		if _, err := netip.ParseAddr(host); err != nil {
			return "", 0, bad("not an IPv6 address")
		}
	}
	return host, n, nil
}

// resolve returns an address of host, IPv4 first (RoCE v2's usual GIDs).
func (h *Handler) resolve(ctx context.Context, host string) (netip.Addr, *Failure) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	addrs, err := h.opts.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		if ctx.Err() != nil {
			return netip.Addr{}, fail(ReasonTimeout, "resolve", fmt.Errorf("resolving %s: %w", host, ctx.Err()))
		}
		return netip.Addr{}, fail(ReasonResolve, "", fmt.Errorf("resolving %s: %v", host, err))
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return addrs[0], nil
}

// target resolves the probe's target into the responder's address.
func (p *probe) address(ctx context.Context, defPort int) (netip.AddrPort, *Failure) {
	host, port, err := splitTarget(p.target, defPort)
	if err != nil {
		return netip.AddrPort{}, fail(ReasonBadTarget, "", err)
	}
	addr, f := p.h.resolve(ctx, host)
	if f != nil {
		return netip.AddrPort{}, f
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// source is the verbsprobe Options of the local port a probe to addr
// leaves from.
func (p *probe) source(ctx context.Context, addr netip.Addr) (verbsprobe.Options, *Failure) {
	if p.h.opts.Source != nil {
		o, err := p.h.opts.Source(ctx, p.module, net.IP(addr.AsSlice()))
		if err != nil {
			return o, fail(ReasonNoDevice, "", err)
		}
		return o, nil
	}
	o, err := SourceFor(p.h.opts.Sysfs, p.module.Source, addr)
	if err != nil {
		return o, fail(ReasonNoDevice, "", err)
	}
	return o, nil
}

// SourceFor chooses the local RDMA port a probe to dst leaves from: the
// one src names; else the port with a RoCE GID (v2 first) equal to the
// address the kernel's route to dst leaves from; else the only ACTIVE
// port (InfiniBand, where GIDs are not IP addresses).
func SourceFor(fsys sysfs.FS, src Source, dst netip.Addr) (verbsprobe.Options, error) {
	o := verbsprobe.Options{Sysfs: fsys, Device: src.Device, Port: src.Port, GIDIndex: verbsprobe.AutoGID}
	if src.GIDIndex != nil {
		o.GIDIndex = *src.GIDIndex
	}
	if src.Device != "" {
		return o, nil
	}
	from, err := routeSource(dst)
	if err != nil {
		return o, err
	}
	tables, err := gid.ReadTables(fsys, "", 0)
	if err != nil {
		return o, fmt.Errorf("reading the GID tables: %w", err)
	}
	var v1 *gid.Entry
	var v1Table gid.Table
	for _, t := range tables {
		for i, e := range t.Entries {
			if e.GID.Addr().Unmap() != from || (src.Port != 0 && t.Port != src.Port) {
				continue
			}
			if e.Type == gid.TypeRoCEv2 {
				o.Device, o.Port = t.Device, t.Port
				if src.GIDIndex == nil {
					o.GIDIndex = e.Index
				}
				return o, nil
			}
			if e.Type == gid.TypeRoCEv1 && v1 == nil {
				v1, v1Table = &t.Entries[i], t
			}
		}
	}
	if v1 != nil {
		o.Device, o.Port = v1Table.Device, v1Table.Port
		if src.GIDIndex == nil {
			o.GIDIndex = v1.Index
		}
		return o, nil
	}
	refs, err := fsys.ListPorts("", 0)
	if err != nil {
		return o, err
	}
	var active []ib.PortRef
	for _, r := range refs {
		if p, err := fsys.Port(r.Device, r.Port); err == nil && p.State == ib.PortActive {
			active = append(active, r)
		}
	}
	if len(active) == 1 {
		o.Device, o.Port = active[0].Device, active[0].Port
		return o, nil
	}
	return o, fmt.Errorf("no RDMA port has the address %s that the route to %s leaves from as a RoCE GID, and %d ports are ACTIVE: name the port in the module's source (device, port)", from, dst, len(active))
}

// routeSource is the address the kernel would send from to dst: a UDP
// socket connected to it (no packet leaves).
func routeSource(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 4791)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %s: %w", dst, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// probeRC runs the module's test against the target's responder.
func probeRC(ctx context.Context, p *probe) *Failure {
	rc := p.module.RC
	test := rc.test(p.params)
	port := rc.TargetPort
	if port == 0 {
		port = verbsprobe.DefaultPeerPort
	}
	addr, f := p.address(ctx, port)
	if f != nil {
		return f
	}
	opts, f := p.source(ctx, addr.Addr())
	if f != nil {
		return f
	}
	// A refused connection fails the probe at once (pingmesh.Dial), not
	// after verbsprobe's retries.
	dial := pingmesh.Dial(p.h.opts.Dial)
	var dialed atomic.Bool
	noRetry := func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := dial(ctx, network, a)
		if err == nil {
			dialed.Store(true)
		}
		return c, err
	}
	remaining := DefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		remaining = time.Until(dl)
	}
	cfg := verbsprobe.ConnectConfig{Test: test, Timeout: remaining, Key: rc.key, Dial: noRetry}
	if rc.Via == ViaCM {
		// The CM resolves the route and chooses the local port (unless
		// the module's source names one); it takes no host names.
		cfg.Via = verbsprobe.TransportCM
		if p.module.Source.Device == "" {
			opts.Device, opts.Port = "", 0
		}
		cfg.CMOpen = func() (*rdmacm.Channel, error) { return locator.OpenRDMACM(opts.Sysfs, nil) }
	}
	p.log.Info("connecting", "address", addr.String(), "device", opts.Device, "port", opts.Port, "test", test.String(), "via", rc.via())
	res := verbsprobe.ConnectWith(ctx, opts, addr.String(), cfg)
	exportRC(p, res, test)
	// Over the CM nothing is dialled for a connect: its errors say what
	// happened (classifyCM).
	return classify(ctx, res, dialed.Load() || rc.Via == ViaCM)
}

// via names the module's way to its responder.
func (r RCModule) via() string {
	if r.Via == "" {
		return ViaTCP
	}
	return r.Via
}

// checkRC refuses a test the module or the probe's time do not allow,
// before it waits for a slot.
func checkRC(p *probe, timeout time.Duration) *Failure {
	rc := p.module.RC
	test := rc.test(p.params)
	if test.Size > rc.maxSize() {
		return fail(ReasonBadParameter, "", fmt.Errorf("size %d: module allows at most %d (its max_size)", test.Size, rc.maxSize()))
	}
	if err := test.Validate(); err != nil {
		return fail(ReasonBadParameter, "", err)
	}
	if test.Duration > 0 && timeout < test.Duration+time.Second {
		return fail(ReasonBadParameter, "", fmt.Errorf("the test runs %v, the probe has %v and needs a second more: raise the scrape timeout or shorten the test", test.Duration, timeout))
	}
	return nil
}

// classify turns a probe's result into a reason.
func classify(ctx context.Context, res *verbsprobe.Result, dialed bool) *Failure {
	s := res.Failed()
	if s == nil {
		if res.Unsupported != "" {
			return fail(ReasonUnsupported, "", res.Err())
		}
		return nil
	}
	err := error(s.Err)
	var remote *verbsprobe.RemoteFailure
	var de *pingmesh.DialError
	var cm *rdmacm.Error
	switch {
	case verbsprobe.IsBusy(err):
		return fail(ReasonBusy, s.Name, err)
	case errors.As(err, &remote) && remote.Step == verbsprobe.StepAccept && strings.HasPrefix(remote.Message, "refused"),
		strings.Contains(err.Error(), "shared secret"):
		return fail(ReasonRefused, s.Name, err)
	case errors.As(err, &cm) && cm.Err == nil:
		return classifyCM(s.Name, cm, err)
	case errors.As(err, &de), s.Name == verbsprobe.StepConnect && !dialed && !errors.As(err, &cm):
		return fail(ReasonNoResponder, s.Name, err)
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		return fail(ReasonTimeout, s.Name, err)
	}
	return fail(ReasonFailed, s.Name, err)
}

// classifyCM is the reason of an RDMA CM event that ended a step: a
// REJECT is a responder's refusal when it says so (its reason in the
// private data: "refused: ..."), else nothing listens there; no route or
// no local RDMA port for the address is this node's (no_device); a
// request never answered (UNREACHABLE, after the CM's retries) a timeout.
func classifyCM(step string, cm *rdmacm.Error, err error) *Failure {
	switch cm.Event {
	case rdmacm.EventRejected:
		if strings.Contains(err.Error(), "refused: ") {
			return fail(ReasonRefused, step, err)
		}
		return fail(ReasonNoResponder, step, err)
	case rdmacm.EventAddrError, rdmacm.EventRouteError:
		return fail(ReasonNoDevice, step, err)
	case rdmacm.EventUnreachable:
		return fail(ReasonTimeout, step, err)
	}
	return fail(ReasonFailed, step, err)
}

// exportRC adds the result's metrics to the probe's answer.
func exportRC(p *probe, res *verbsprobe.Result, test verbsprobe.Test) {
	m := p.metrics
	for _, s := range res.Steps {
		m.add(famStep, s.Duration.Seconds(), s.Name)
	}
	remote := ""
	if res.Peer != nil && res.Peer.Remote != nil {
		remote = res.Peer.Remote.GID.String()
	}
	gidText := ""
	if res.GIDIndex >= 0 && !res.GID.IsZero() {
		gidText = res.GID.String()
	}
	if res.Device != "" {
		m.add(famInfo, 1, res.Device, strconv.FormatUint(uint64(res.Port), 10), gidText, remote, test.String())
	}
	if res.Peer == nil {
		return
	}
	if b := res.Peer.PathMTU.Bytes(); b > 0 {
		m.add(famPathMTU, float64(b))
	}
	for _, ms := range res.Peer.Measurements {
		m.add(famMessages, float64(ms.Iters))
		m.add(famBytes, float64(ms.Bytes))
		m.add(famTestTime, ms.Elapsed.Seconds())
		switch ms.Test {
		case verbsprobe.TestBandwidth:
			if ms.Elapsed > 0 {
				m.add(famBandwidth, float64(ms.Bytes)/ms.Elapsed.Seconds())
			}
		case verbsprobe.TestLatency:
			if l := ms.Latency; l != nil {
				m.addMetric(prometheus.MustNewConstSummary(famLatency.Desc(), uint64(l.Samples), l.Avg.Seconds()*float64(l.Samples),
					map[float64]float64{0: l.Min.Seconds(), 0.5: l.Median.Seconds(), 0.99: l.P99.Seconds(), 1: l.Max.Seconds()}))
			}
		}
	}
}
