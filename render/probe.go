package render

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// ProbeResult prints what grdma probe prints of r, the last of series
// (verbsprobe.Repeat; a probe between hosts is a series of one), which
// was to run count times: text, the steps as a checklist and with count
// above 1 the timing summary of all runs; JSON, one object on a line.
func ProbeResult(p *output.Printer, r *verbsprobe.Result, series *verbsprobe.Series, count int) {
	if p.JSON() {
		p.StartPlain()
		probeJSON(p, r, series, count)
		p.EndPlain()
		return
	}
	probeText(p, r, series, count)
}

// probeText prints the steps of r as a checklist, and with count the
// timing summary of all runs. Every string passes through output.Escape:
// between hosts, names, details and failure messages come from the peer,
// and a peer's terminal controls must not rewrite a FAIL as a PASS.
func probeText(p *output.Printer, r *verbsprobe.Result, series *verbsprobe.Series, count int) {
	var b strings.Builder
	if r.Device == "" {
		b.WriteString("probe") // over the RDMA CM, before it chose the device
	} else {
		fmt.Fprintf(&b, "probe %s/%d", esc(r.Device), r.Port)
	}
	var about []string
	if r.Driver != "" {
		about = append(about, "driver "+esc(r.Driver))
	}
	if r.VerbsDevice != "" {
		about = append(about, esc(r.VerbsDevice))
	}
	if r.GIDIndex >= 0 {
		about = append(about, fmt.Sprintf("GID %d %s", r.GIDIndex, r.GID))
	} else if r.LID != 0 {
		about = append(about, fmt.Sprintf("LID %#x", r.LID))
	}
	if r.QPN != 0 {
		about = append(about, fmt.Sprintf("qpn %d", r.QPN))
	}
	if len(about) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
	}
	if count > 1 {
		fmt.Fprintf(&b, ", run %d of %d", series.Runs, count)
	}
	if peer := peerSummary(r); peer != "" {
		fmt.Fprintf(&b, "\n  %s", peer)
	}
	if r.Peer != nil && r.Peer.CM != nil && r.Peer.CM.Device != "" {
		fmt.Fprintf(&b, "\n  %s", cmText(r.Peer.CM))
	}
	b.WriteString("\n")
	stepsText(&b, r.Steps, true)
	switch {
	case r.Failed() != nil:
		fmt.Fprintf(&b, "FAIL at %s\n", esc(r.Failed().Name))
	case r.Unsupported != "":
		fmt.Fprintf(&b, "NOT SUPPORTED: %s\n", esc(r.Unsupported))
	case r.Peer != nil:
		fmt.Fprintf(&b, "%s (%s)\n", passLine(r), Duration(r.Duration()))
	case r.Traffic:
		fmt.Fprintf(&b, "PASS: RC queue pair in RTS, SEND, RDMA WRITE and RDMA READ verified (%s)\n", Duration(r.Duration()))
	default:
		fmt.Fprintf(&b, "PASS: RC queue pair in RTS (%s)\n", Duration(r.Duration()))
	}
	if count > 1 {
		steps, total := series.Timings()
		fmt.Fprintf(&b, "\n%d runs of %d, %d passed\n", series.Runs, count, series.Passed)
		fmt.Fprintf(&b, "  %-15s %9s %9s %9s\n", "step", "min", "median", "max")
		for _, t := range append(steps, total) {
			fmt.Fprintf(&b, "  %-15s %9s %9s %9s\n", esc(t.Name), Duration(t.Min), Duration(t.Median), Duration(t.Max))
		}
	}
	p.Text(b.String())
}

// stepsText writes steps as a checklist, a line each: "[ok  ] name
// time detail", or "[FAIL] name time error"; with diagnosis a failed
// step's errno and likely cause follow its error.
func stepsText(b *strings.Builder, steps []verbsprobe.Step, diagnosis bool) {
	for _, s := range steps {
		mark := "ok"
		if !s.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(b, "  [%-4s] %-15s %9s", mark, esc(s.Name), Duration(s.Duration))
		switch {
		case s.Err != nil:
			fmt.Fprintf(b, "  %s", esc(s.Err.Err.Error()))
			if !diagnosis {
				break
			}
			if name := s.Err.ErrnoName(); name != "" {
				fmt.Fprintf(b, " (%s)", name)
			}
			if s.Err.Cause != "" {
				fmt.Fprintf(b, "\n  %-23s likely cause: %s", "", esc(s.Err.Cause))
			}
		case s.Detail != "":
			fmt.Fprintf(b, "  %s", esc(s.Detail))
		}
		b.WriteString("\n")
	}
}

// Duration prints a step's time as grdma probe does: 812µs, 1.25ms or
// 2.50s.
func Duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Round(time.Microsecond)/time.Microsecond)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// usec is a duration in microseconds, to 0.1 µs.
func usec(d time.Duration) float64 { return math.Round(float64(d)/100) / 10 }

// stepsJSON prints steps as the array "steps": name, ok, usec, detail
// and error; with diagnosis a failed step also has its errno and likely
// cause (what verbsprobe's own steps know).
func stepsJSON(p *output.Printer, steps []verbsprobe.Step, diagnosis bool) {
	p.OpenArray(output.JSONOnly, "steps", "")
	for _, s := range steps {
		p.OpenObject("")
		p.Untrusted(output.JSONOnly, "name", "", s.Name)
		p.OnOff(output.JSONOnly, "ok", "", s.OK)
		p.Float(output.JSONOnly, "usec", "", usec(s.Duration), 1)
		p.Untrusted(output.JSONOnly, "detail", "", s.Detail)
		errText := ""
		if s.Err != nil {
			errText = s.Err.Err.Error()
		}
		p.Untrusted(output.JSONOnly, "error", "", errText)
		if s.Err != nil && diagnosis {
			p.Untrusted(output.JSONOnly, "errno", "", s.Err.ErrnoName())
			p.Untrusted(output.JSONOnly, "cause", "", s.Err.Cause)
		}
		p.CloseObject()
	}
	p.CloseArray(output.JSONOnly, "")
}

// probeJSON prints r as one object: ifname, port, gid_index, ok and
// steps, what the probe found, and with count the timing summary of all
// runs. Strings are printed with Untrusted, escaped as in text (they may
// come from the peer).
func probeJSON(p *output.Printer, r *verbsprobe.Result, series *verbsprobe.Series, count int) {
	p.OpenObject("")
	p.Untrusted(output.JSONOnly, "ifname", "", r.Device)
	p.Uint(output.JSONOnly, "port", "", uint64(r.Port))
	p.Untrusted(output.JSONOnly, "driver", "", r.Driver)
	p.Untrusted(output.JSONOnly, "uverbs", "", r.VerbsDevice)
	p.Int(output.JSONOnly, "gid_index", "", int64(r.GIDIndex))
	if r.GIDIndex >= 0 {
		p.Untrusted(output.JSONOnly, "gid", "", r.GID.String())
	}
	if r.LID != 0 {
		p.Uint(output.JSONOnly, "lid", "", uint64(r.LID))
	}
	if r.QPN != 0 {
		p.Uint(output.JSONOnly, "qpn", "", uint64(r.QPN))
	}
	p.OnOff(output.JSONOnly, "traffic", "", r.Traffic)
	// Not ok either when interrupted before count runs.
	p.OnOff(output.JSONOnly, "ok", "", r.OK() && series.Runs == count)
	if r.Unsupported != "" {
		p.Untrusted(output.JSONOnly, "unsupported", "", r.Unsupported)
	}
	p.Float(output.JSONOnly, "usec", "", usec(r.Duration()), 1)
	stepsJSON(p, r.Steps, true)
	peerJSON(p, r)
	if count > 1 {
		p.Uint(output.JSONOnly, "count", "", uint64(count))
		p.Uint(output.JSONOnly, "runs", "", uint64(series.Runs))
		p.Uint(output.JSONOnly, "passed", "", uint64(series.Passed))
		steps, total := series.Timings()
		p.OpenObject("timing")
		p.OpenObject("total")
		timingJSON(p, total)
		p.CloseObject()
		p.OpenArray(output.JSONOnly, "steps", "")
		for _, t := range steps {
			p.OpenObject("")
			p.Untrusted(output.JSONOnly, "name", "", t.Name)
			timingJSON(p, t)
			p.CloseObject()
		}
		p.CloseArray(output.JSONOnly, "")
		p.CloseObject()
	}
	p.CloseObject()
}

// timingJSON prints the fields of a timing: runs, min_usec,
// median_usec, max_usec.
func timingJSON(p *output.Printer, t verbsprobe.Timing) {
	p.Uint(output.JSONOnly, "runs", "", uint64(t.Runs))
	p.Float(output.JSONOnly, "min_usec", "", usec(t.Min), 1)
	p.Float(output.JSONOnly, "median_usec", "", usec(t.Median), 1)
	p.Float(output.JSONOnly, "max_usec", "", usec(t.Max), 1)
}

// shownPeer is the peer as the output shows it: a client's always (at
// least its address), a server's once the peer's endpoint arrived; its
// endpoint is empty until then.
func shownPeer(r *verbsprobe.Result) (verbsprobe.Endpoint, bool) {
	pr := r.Peer
	switch {
	case pr.Remote != nil:
		return *pr.Remote, true
	case pr.Role == verbsprobe.RoleClient:
		return verbsprobe.Endpoint{}, true
	}
	return verbsprobe.Endpoint{}, false
}

// peerSummary is the text line about the peer: "client of 10.0.0.1:18515
// (rxe0/1, GID 1 ::ffff:10.0.0.1, qpn 17), path MTU 1024".
func peerSummary(r *verbsprobe.Result) string {
	if r.Peer == nil {
		return ""
	}
	pr := r.Peer
	rel := map[string]string{verbsprobe.RoleClient: "peer", verbsprobe.RoleServer: "serving"}[pr.Role]
	pe, shown := shownPeer(r)
	switch {
	case !shown:
		return rel + ": none connected"
	case pe.QPN == 0:
		return rel + " " + esc(pr.Host)
	}
	var about []string
	if !pr.Pingpong {
		about = append(about, esc(pe.Name()))
	} else {
		about = append(about, pe.Ifname) // the tool: ibv_rc_pingpong, ibv_ud_pingpong
	}
	if pe.GIDIndex >= 0 && !pe.GID.IsZero() {
		if pr.Pingpong {
			about = append(about, "GID "+pe.GID.String())
		} else {
			about = append(about, fmt.Sprintf("GID %d %s", pe.GIDIndex, pe.GID))
		}
	} else {
		about = append(about, fmt.Sprintf("LID %#x", pe.LID))
	}
	about = append(about, fmt.Sprintf("qpn %d", pe.QPN))
	s := fmt.Sprintf("%s %s (%s)", rel, esc(pr.Host), strings.Join(about, ", "))
	if pr.PathMTU != 0 {
		s += fmt.Sprintf(", path MTU %d", pr.PathMTU.Bytes())
	}
	return s
}

// passLine is the last line of a passing probe between two hosts.
func passLine(r *verbsprobe.Result) string {
	pr := r.Peer
	test := verbsprobe.TestConnect
	if pr.Test != nil {
		test = pr.Test.Kind
	}
	with := esc(pr.Host)
	switch test {
	case verbsprobe.TestConnect:
		return fmt.Sprintf("PASS: RC queue pairs in RTS with %s", with)
	case verbsprobe.TestTraffic:
		return fmt.Sprintf("PASS: SEND, RDMA WRITE and RDMA READ with %s verified", with)
	}
	var parts []string
	for _, m := range pr.Measurements {
		parts = append(parts, measurementText(m))
	}
	return fmt.Sprintf("PASS: %s with %s: %s", esc(pr.Test.String()), with, strings.Join(parts, "; "))
}

func measurementText(m verbsprobe.Measurement) string {
	if m.Latency != nil && m.Test != verbsprobe.TestBandwidth {
		l := m.Latency
		return fmt.Sprintf("%d × %d bytes, latency µs min %.2f median %.2f avg %.2f p99 %.2f max %.2f",
			m.Iters, m.Size, us(l.Min), us(l.Median), us(l.Avg), us(l.P99), us(l.Max))
	}
	return fmt.Sprintf("%d × %d bytes in %s, %.3f Gb/s, %.4f Mmsg/s", m.Iters, m.Size, Duration(m.Elapsed), m.BWGbps(), m.MsgRateMpps())
}

// esc is output.Escape, for text put together here.
var esc = output.Escape

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// peerJSON adds role, test, path MTU, peer and results to a probe's JSON
// object.
func peerJSON(p *output.Printer, r *verbsprobe.Result) {
	pr := r.Peer
	if pr == nil {
		return
	}
	p.Untrusted(output.JSONOnly, "role", "", pr.Role)
	if t := pr.Test; t != nil {
		testJSON(p, t)
	}
	if pr.PathMTU != 0 {
		p.Uint(output.JSONOnly, "path_mtu", "", uint64(pr.PathMTU.Bytes()))
	}
	p.Uint(output.JSONOnly, "pinned_bytes", "", uint64(pr.Pinned))
	if pe, shown := shownPeer(r); shown {
		p.OpenObject("peer")
		p.Untrusted(output.JSONOnly, "host", "", pr.Host)
		if pr.Pingpong {
			p.String(output.JSONOnly, "tool", "", pe.Ifname)
		} else {
			p.Untrusted(output.JSONOnly, "ifname", "", pe.Ifname)
			p.Uint(output.JSONOnly, "port", "", uint64(pe.Port))
			p.Untrusted(output.JSONOnly, "driver", "", pe.Driver)
			linkLayer := "" // a client whose peer never answered knows none
			if pr.Remote != nil {
				linkLayer = pe.LinkLayer.String()
			}
			p.Untrusted(output.JSONOnly, "link_layer", "", linkLayer)
			p.Int(output.JSONOnly, "gid_index", "", int64(pe.GIDIndex))
		}
		if !pe.GID.IsZero() {
			p.Untrusted(output.JSONOnly, "gid", "", pe.GID.String())
		}
		if pe.GIDType != "" {
			p.Untrusted(output.JSONOnly, "gid_type", "", pe.GIDType)
		}
		p.Uint(output.JSONOnly, "lid", "", uint64(pe.LID))
		p.Uint(output.JSONOnly, "qpn", "", uint64(pe.QPN))
		p.Uint(output.JSONOnly, "psn", "", uint64(pe.PSN))
		if pe.ActiveMTU != 0 {
			p.Uint(output.JSONOnly, "active_mtu", "", uint64(pe.ActiveMTU))
		}
		p.CloseObject()
	}
	resultsJSON(p, pr.Measurements)
	if pr.CM != nil {
		cmJSON(p, pr.CM)
	}
}

// cmText is what the RDMA CM chose, and its steps' times: "rdma_cm:
// 10.0.0.1:18515 from 10.0.0.2:41234 via rxe0/1 GID 1 ::ffff:10.0.0.2
// (RoCE v2), path MTU 1024, ToS 0, hop limit 64; resolve address 310µs,
// ...".
func cmText(ci *verbsprobe.CMInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdma_cm: %s from %s via %s/%d", ci.Dst, ci.Src, esc(ci.Device), ci.Port)
	if ci.GIDIndex >= 0 {
		fmt.Fprintf(&b, " GID %d", ci.GIDIndex)
	}
	if !ci.GID.IsZero() {
		fmt.Fprintf(&b, " %s", ci.GID)
	}
	if ci.RoCE != "" {
		fmt.Fprintf(&b, " (%s)", ci.RoCE)
	}
	if ci.PathMTU != 0 {
		fmt.Fprintf(&b, ", path MTU %d", ci.PathMTU.Bytes())
	}
	fmt.Fprintf(&b, ", ToS %d, hop limit %d", ci.TrafficClass, ci.HopLimit)
	if ci.ControlPort != 0 {
		fmt.Fprintf(&b, ", control TCP %d", ci.ControlPort)
	}
	for i, st := range ci.Steps {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %s", sep, st.Name, Duration(st.Duration))
	}
	return b.String()
}

// cmJSON is the "cm" object of a probe over the RDMA CM.
func cmJSON(p *output.Printer, ci *verbsprobe.CMInfo) {
	p.OpenObject("cm")
	addr := func(a netip.AddrPort) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	p.Untrusted(output.JSONOnly, "src", "", addr(ci.Src))
	p.Untrusted(output.JSONOnly, "dst", "", addr(ci.Dst))
	p.Untrusted(output.JSONOnly, "ifname", "", ci.Device)
	p.Uint(output.JSONOnly, "port", "", uint64(ci.Port))
	p.Int(output.JSONOnly, "gid_index", "", int64(ci.GIDIndex))
	p.Untrusted(output.JSONOnly, "gid", "", ci.GID.String())
	p.Untrusted(output.JSONOnly, "dgid", "", ci.DGID.String())
	p.Untrusted(output.JSONOnly, "roce", "", ci.RoCE)
	p.Uint(output.JSONOnly, "path_mtu", "", uint64(ci.PathMTU.Bytes()))
	p.Uint(output.JSONOnly, "tos", "", uint64(ci.TrafficClass))
	p.Uint(output.JSONOnly, "hop_limit", "", uint64(ci.HopLimit))
	if ci.ControlPort != 0 {
		p.Uint(output.JSONOnly, "control_port", "", uint64(ci.ControlPort))
	}
	p.OpenArray(output.JSONOnly, "steps", "")
	for _, st := range ci.Steps {
		p.OpenObject("")
		p.String(output.JSONOnly, "name", "", st.Name)
		p.Float(output.JSONOnly, "usec", "", usec(st.Duration), 1)
		p.CloseObject()
	}
	p.CloseArray(output.JSONOnly, "")
	p.CloseObject()
}

// testJSON prints a test as the "test" object.
func testJSON(p *output.Printer, t *verbsprobe.Test) {
	p.OpenObject("test")
	p.Untrusted(output.JSONOnly, "kind", "", string(t.Kind))
	if t.Op != "" {
		p.Untrusted(output.JSONOnly, "op", "", string(t.Op))
	}
	p.Uint(output.JSONOnly, "size", "", uint64(t.Size))
	if t.Iters != 0 && t.Duration == 0 {
		p.Uint(output.JSONOnly, "iters", "", uint64(t.Iters))
	}
	if t.Duration != 0 {
		p.Float(output.JSONOnly, "duration_sec", "", t.Duration.Seconds(), 3)
	}
	p.CloseObject()
}

// resultsJSON prints measurements as the "results" array.
func resultsJSON(p *output.Printer, ms []verbsprobe.Measurement) {
	p.OpenArray(output.JSONOnly, "results", "")
	for _, m := range ms {
		p.OpenObject("")
		p.Untrusted(output.JSONOnly, "test", "", string(m.Test))
		if m.Op != "" {
			p.Untrusted(output.JSONOnly, "op", "", string(m.Op))
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
