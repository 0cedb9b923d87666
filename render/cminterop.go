package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/cminterop"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// CMInteropResult prints a run against (or for) a peer tool over the
// RDMA CM (rping, ucmatose, perftest, fi_pingpong) as grdma prints its own probes: a head line,
// what the CM chose, the steps as a checklist, and PASS or FAIL. The
// peer's text (the sample of its data, errors quoting it) is escaped.
func CMInteropResult(p *output.Printer, r *cminterop.Result) {
	if p.JSON() {
		p.StartPlain()
		cmInteropJSON(p, r)
		p.EndPlain()
		return
	}
	var b strings.Builder
	if r.Device == "" {
		fmt.Fprintf(&b, "probe cm %s%s %s", r.Mode, cmInteropTest(r), r.Role)
	} else {
		fmt.Fprintf(&b, "probe %s/%d cm %s%s %s", esc(r.Device), r.Port, r.Mode, cmInteropTest(r), r.Role)
	}
	if r.CM.Device != "" {
		fmt.Fprintf(&b, "\n  %s", cmText(&r.CM))
	}
	b.WriteString("\n")
	stepsText(&b, r.Steps, false)
	if r.Sample != "" {
		fmt.Fprintf(&b, "  peer's data: %s\n", esc(r.Sample))
	}
	if rep := r.PeerReport; rep != nil {
		fmt.Fprintf(&b, "  perftest client's report: %d × %d bytes, %.2f MB/s, %.4f Mmsg/s\n", rep.Iters, rep.Size, rep.BWAvg, rep.MsgRate)
	}
	if r.Err != nil {
		failed := ""
		if n := len(r.Steps); n > 0 && !r.Steps[n-1].OK {
			failed = " at " + esc(r.Steps[n-1].Name)
		} else {
			failed = ": " + esc(r.Err.Error())
		}
		fmt.Fprintf(&b, "FAIL%s\n", failed)
	} else if r.Mode == cminterop.Perftest && r.Measurement == nil {
		fmt.Fprintf(&b, "PASS: %s %s with perftest %s: the client read this side's memory (%s)\n", r.Test, r.Op, esc(r.PeerVersion), Duration(r.Elapsed))
	} else if r.Measurement != nil {
		fmt.Fprintf(&b, "PASS: %s %s with perftest %s: %s\n", r.Measurement.Test, r.Measurement.Op, esc(r.PeerVersion), measurementText(*r.Measurement))
	} else {
		fmt.Fprintf(&b, "PASS: %s, %s (%s)\n", cmInteropWhat(r), cmInteropRate(r), Duration(r.Elapsed))
	}
	p.Text(b.String())
}

// cmInteropTest is perftest's test after the mode: " bw write".
func cmInteropTest(r *cminterop.Result) string {
	if r.Test == "" {
		return ""
	}
	return fmt.Sprintf(" %s %s", r.Test, r.Op)
}

// cmInteropWhat is what was exchanged: "5 pings of 64 bytes",
// "10 messages of 100 bytes each way".
func cmInteropWhat(r *cminterop.Result) string {
	if r.Mode == cminterop.Fabtests {
		return fmt.Sprintf("%d messages of %d bytes each way, answered one by one", r.Count, r.Size)
	}
	if r.Mode == cminterop.Rping {
		return fmt.Sprintf("%d pings of %d bytes (RDMA READ, RDMA WRITE, validated)", r.Count, r.Size)
	}
	return fmt.Sprintf("%d messages of %d bytes each way", r.Count, r.Size)
}

// cmInteropRate is the exchange's time per round.
func cmInteropRate(r *cminterop.Result) string {
	if r.Count == 0 {
		return "no exchange"
	}
	each := r.Elapsed / time.Duration(r.Count)
	if r.Mode == cminterop.Fabtests {
		// fi_pingpong's usec/xfer counts each direction.
		return fmt.Sprintf("%s a round trip, %s a transfer as fi_pingpong counts", Duration(each), Duration(each/2))
	}
	return fmt.Sprintf("%s each", Duration(each))
}

func cmInteropJSON(p *output.Printer, r *cminterop.Result) {
	p.OpenObject("")
	p.String(output.JSONOnly, "mode", "", string(r.Mode))
	p.String(output.JSONOnly, "role", "", string(r.Role))
	p.Untrusted(output.JSONOnly, "ifname", "", r.Device)
	p.Uint(output.JSONOnly, "port", "", uint64(r.Port))
	p.OnOff(output.JSONOnly, "ok", "", r.OK())
	errText := ""
	if r.Err != nil {
		errText = r.Err.Error()
	}
	p.Untrusted(output.JSONOnly, "error", "", errText)
	p.Uint(output.JSONOnly, "count", "", uint64(r.Count))
	p.Uint(output.JSONOnly, "size", "", uint64(r.Size))
	p.Uint(output.JSONOnly, "bytes", "", r.Bytes)
	p.Float(output.JSONOnly, "usec", "", usec(r.Elapsed), 1)
	p.Untrusted(output.JSONOnly, "sample", "", r.Sample)
	if r.Test != "" {
		p.String(output.JSONOnly, "test", "", string(r.Test))
		p.String(output.JSONOnly, "op", "", string(r.Op))
		p.Untrusted(output.JSONOnly, "peer_version", "", r.PeerVersion)
	}
	if r.Measurement != nil {
		resultsJSON(p, []verbsprobe.Measurement{*r.Measurement})
	}
	if rep := r.PeerReport; rep != nil {
		p.OpenObject("peer_report")
		p.Uint(output.JSONOnly, "size", "", rep.Size)
		p.Uint(output.JSONOnly, "iters", "", rep.Iters)
		p.Float(output.JSONOnly, "bw_peak_mbs", "", rep.BWPeak, 2)
		p.Float(output.JSONOnly, "bw_avg_mbs", "", rep.BWAvg, 2)
		p.Float(output.JSONOnly, "msg_rate_mpps", "", rep.MsgRate, 6)
		p.CloseObject()
	}
	stepsJSON(p, r.Steps, false)
	if r.CM.Device != "" {
		cmJSON(p, &r.CM)
	}
	p.CloseObject()
}
