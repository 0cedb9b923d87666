package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/cminterop"
	"github.com/grdma/grdma/output"
)

// CMInteropResult prints a run against (or for) a peer tool over the
// RDMA CM (rping, ucmatose) as grdma prints its own probes: a head line,
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
		fmt.Fprintf(&b, "probe cm %s %s", r.Mode, r.Role)
	} else {
		fmt.Fprintf(&b, "probe %s/%d cm %s %s", esc(r.Device), r.Port, r.Mode, r.Role)
	}
	if r.CM.Device != "" {
		fmt.Fprintf(&b, "\n  %s", cmText(&r.CM))
	}
	b.WriteString("\n")
	stepsText(&b, r.Steps, false)
	if r.Sample != "" {
		fmt.Fprintf(&b, "  peer's data: %s\n", esc(r.Sample))
	}
	if r.Err != nil {
		failed := ""
		if n := len(r.Steps); n > 0 && !r.Steps[n-1].OK {
			failed = " at " + esc(r.Steps[n-1].Name)
		} else {
			failed = ": " + esc(r.Err.Error())
		}
		fmt.Fprintf(&b, "FAIL%s\n", failed)
	} else {
		fmt.Fprintf(&b, "PASS: %s, %s (%s)\n", cmInteropWhat(r), cmInteropRate(r), Duration(r.Elapsed))
	}
	p.Text(b.String())
}

// cmInteropWhat is what was exchanged: "5 pings of 64 bytes",
// "10 messages of 100 bytes each way".
func cmInteropWhat(r *cminterop.Result) string {
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
	return fmt.Sprintf("%s each", Duration(r.Elapsed/time.Duration(r.Count)))
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
	stepsJSON(p, r.Steps, false)
	if r.CM.Device != "" {
		cmJSON(p, &r.CM)
	}
	p.CloseObject()
}
