package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// probePeer runs a probe between two hosts: this side listens, or
// connects to its peer.
func (a *app) probePeer(ctx context.Context, req verbsprobe.Request) error {
	var r *verbsprobe.Result
	if req.Listen {
		ln, err := net.Listen("tcp", req.ListenAddr)
		if err != nil {
			return fmt.Errorf("cannot listen on %s: %w (another grdma probe, or ibv_rc_pingpong, on that port?)", req.ListenAddr, unwrapOp(err))
		}
		defer ln.Close()
		fmt.Fprintf(os.Stderr, "grdma: probe %s listening on %s for one peer\n", req.Options.Device, ln.Addr())
		r = verbsprobe.Serve(ctx, req.Options, ln, req.Test, req.Timeout)
	} else {
		r = verbsprobe.Connect(ctx, req.Options, req.PeerAddr, req.Test, req.Timeout)
	}
	series := &verbsprobe.Series{}
	series.Add(r)
	p := a.printer()
	if p.JSON() {
		p.StartPlain()
		renderProbeJSON(p, r, series, 1)
		p.EndPlain()
	} else {
		renderProbeText(p, r, series, 1)
	}
	if err := p.Flush(); err != nil {
		return err
	}
	return verbsprobe.Outcome(r, 1, 1)
}

// unwrapOp drops the "listen tcp :18515:" prefix net errors repeat.
func unwrapOp(err error) error {
	if op, ok := err.(*net.OpError); ok {
		return op.Err
	}
	return err
}

// peerSummary is the text line about the peer: "client of 10.0.0.1:18515
// (rxe0/1, GID 1 ::ffff:10.0.0.1, qpn 17), path MTU 1024".
func peerSummary(r *verbsprobe.Result) string {
	if r.Role == "" {
		return ""
	}
	rel := map[string]string{verbsprobe.RoleClient: "peer", verbsprobe.RoleServer: "serving"}[r.Role]
	pe := r.Peer
	switch {
	case pe == nil:
		return rel + ": none connected"
	case pe.QPN == 0:
		return rel + " " + pe.Host
	}
	var about []string
	if !pe.Pingpong {
		about = append(about, pe.Name())
	} else {
		about = append(about, "ibv_rc_pingpong")
	}
	if pe.GIDIndex >= 0 && !pe.GID.IsZero() {
		if pe.Pingpong {
			about = append(about, "GID "+pe.GID.String())
		} else {
			about = append(about, fmt.Sprintf("GID %d %s", pe.GIDIndex, pe.GID))
		}
	} else {
		about = append(about, fmt.Sprintf("LID %#x", pe.LID))
	}
	about = append(about, fmt.Sprintf("qpn %d", pe.QPN))
	s := fmt.Sprintf("%s %s (%s)", rel, pe.Host, strings.Join(about, ", "))
	if r.PathMTU != 0 {
		s += fmt.Sprintf(", path MTU %d", r.PathMTU.Bytes())
	}
	return s
}

// passLine is the last line of a passing probe between two hosts.
func passLine(r *verbsprobe.Result) string {
	test := verbsprobe.TestConnect
	if r.Test != nil {
		test = r.Test.Kind
	}
	with := "the peer"
	if r.Peer != nil {
		with = r.Peer.Host
	}
	switch test {
	case verbsprobe.TestConnect:
		return fmt.Sprintf("PASS: RC queue pairs in RTS with %s", with)
	case verbsprobe.TestTraffic:
		return fmt.Sprintf("PASS: SEND, RDMA WRITE and RDMA READ with %s verified", with)
	}
	var parts []string
	for _, m := range r.Measurements {
		parts = append(parts, measurementText(m))
	}
	return fmt.Sprintf("PASS: %s with %s: %s", r.Test, with, strings.Join(parts, "; "))
}

func measurementText(m verbsprobe.Measurement) string {
	if m.Latency != nil && m.Test != verbsprobe.TestBandwidth {
		l := m.Latency
		return fmt.Sprintf("%d × %d bytes, latency µs min %.2f median %.2f avg %.2f p99 %.2f max %.2f",
			m.Iters, m.Size, us(l.Min), us(l.Median), us(l.Avg), us(l.P99), us(l.Max))
	}
	return fmt.Sprintf("%d × %d bytes in %s, %.3f Gb/s, %.4f Mmsg/s", m.Iters, m.Size, formatDuration(m.Elapsed), m.BWGbps(), m.MsgRateMpps())
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// renderPeerJSON adds role, test, path MTU, peer and results to a probe's
// JSON object.
func renderPeerJSON(p *output.Printer, r *verbsprobe.Result) {
	if r.Role == "" {
		return
	}
	p.String(output.JSONOnly, "role", "", r.Role)
	if r.Test != nil {
		p.OpenObject("test")
		p.String(output.JSONOnly, "kind", "", string(r.Test.Kind))
		if r.Test.Op != "" {
			p.String(output.JSONOnly, "op", "", string(r.Test.Op))
		}
		p.Uint(output.JSONOnly, "size", "", uint64(r.Test.Size))
		if r.Test.Iters != 0 && r.Test.Duration == 0 {
			p.Uint(output.JSONOnly, "iters", "", uint64(r.Test.Iters))
		}
		if r.Test.Duration != 0 {
			p.Float(output.JSONOnly, "duration_sec", "", r.Test.Duration.Seconds(), 3)
		}
		p.CloseObject()
	}
	if r.PathMTU != 0 {
		p.Uint(output.JSONOnly, "path_mtu", "", uint64(r.PathMTU.Bytes()))
	}
	if pe := r.Peer; pe != nil {
		p.OpenObject("peer")
		p.String(output.JSONOnly, "host", "", pe.Host)
		if pe.Pingpong {
			p.String(output.JSONOnly, "tool", "", "ibv_rc_pingpong")
		} else {
			p.String(output.JSONOnly, "ifname", "", pe.Ifname)
			p.Uint(output.JSONOnly, "port", "", uint64(pe.Port))
			p.String(output.JSONOnly, "driver", "", pe.Driver)
			p.String(output.JSONOnly, "link_layer", "", pe.LinkLayer)
			p.Int(output.JSONOnly, "gid_index", "", int64(pe.GIDIndex))
		}
		if !pe.GID.IsZero() {
			p.String(output.JSONOnly, "gid", "", pe.GID.String())
		}
		if pe.GIDType != "" {
			p.String(output.JSONOnly, "gid_type", "", pe.GIDType)
		}
		p.Uint(output.JSONOnly, "lid", "", uint64(pe.LID))
		p.Uint(output.JSONOnly, "qpn", "", uint64(pe.QPN))
		p.Uint(output.JSONOnly, "psn", "", uint64(pe.PSN))
		if pe.ActiveMTU != 0 {
			p.Uint(output.JSONOnly, "active_mtu", "", uint64(pe.ActiveMTU))
		}
		p.CloseObject()
	}
	p.OpenArray(output.JSONOnly, "results", "")
	for _, m := range r.Measurements {
		p.OpenObject("")
		p.String(output.JSONOnly, "test", "", string(m.Test))
		if m.Op != "" {
			p.String(output.JSONOnly, "op", "", string(m.Op))
		}
		p.Uint(output.JSONOnly, "size", "", uint64(m.Size))
		p.Uint(output.JSONOnly, "iters", "", uint64(m.Iters))
		p.Uint(output.JSONOnly, "bytes", "", m.Bytes)
		p.Float(output.JSONOnly, "seconds", "", m.Elapsed.Seconds(), 6)
		p.Float(output.JSONOnly, "bw_gbps", "", m.BWGbps(), 6)
		p.Float(output.JSONOnly, "msg_rate_mpps", "", m.MsgRateMpps(), 6)
		if l := m.Latency; l != nil {
			p.OpenObject("lat_usec")
			p.Float(output.JSONOnly, "min", "", usec(l.Min), 1)
			p.Float(output.JSONOnly, "median", "", usec(l.Median), 1)
			p.Float(output.JSONOnly, "avg", "", usec(l.Avg), 1)
			p.Float(output.JSONOnly, "p99", "", usec(l.P99), 1)
			p.Float(output.JSONOnly, "max", "", usec(l.Max), 1)
			p.CloseObject()
		}
		p.CloseObject()
	}
	p.CloseArray(output.JSONOnly, "")
}
