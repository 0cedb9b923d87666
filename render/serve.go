package render

import (
	"fmt"
	"strings"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// ServedPeer prints a responder's line about a peer it served (grdma
// probe DEV serve): who, the test, the outcome and what it took, as text
// or as one JSON object on a line:
//
//	10.0.0.2:40000 bw write: PASS 200 × 65536 bytes in 1.92s, 0.068 Gb/s, 0.0001 Mmsg/s (2.31s, pinned 135168 bytes)
//	10.0.0.3:40000 traffic: FAIL at reg_mr: cannot allocate memory (likely cause: RLIMIT_MEMLOCK ...) (0.12s, pinned 0 bytes)
//	{"peer":"10.0.0.2:40000","result":"pass","test":{...},"usec":2310000,"pinned_bytes":135168,"results":[...]}
func ServedPeer(p *output.Printer, r *verbsprobe.Result) {
	pr := r.Peer
	test := "(no test)"
	if pr.Test != nil {
		test = pr.Test.String()
	}
	outcome := "pass"
	switch {
	case r.Failed() != nil:
		outcome = "fail"
	case r.Unsupported != "":
		outcome = "unsupported"
	}
	if p.JSON() {
		p.StartPlain()
		p.OpenObject("")
		p.Untrusted(output.JSONOnly, "peer", "", pr.Host)
		p.String(output.JSONOnly, "result", "", outcome)
		servedJSON(p, r)
		p.CloseObject()
		p.EndPlain()
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", esc(pr.Host), test)
	switch s := r.Failed(); {
	case s != nil:
		fmt.Fprintf(&b, "FAIL at %s: %s", s.Name, esc(s.Err.Err.Error()))
		if s.Err.Cause != "" {
			fmt.Fprintf(&b, " (likely cause: %s)", esc(s.Err.Cause))
		}
	case r.Unsupported != "":
		fmt.Fprintf(&b, "NOT SUPPORTED: %s", esc(r.Unsupported))
	default:
		b.WriteString("PASS")
		var parts []string
		for _, m := range pr.Measurements {
			parts = append(parts, measurementText(m))
		}
		if len(parts) > 0 {
			b.WriteString(" " + strings.Join(parts, "; "))
		}
	}
	fmt.Fprintf(&b, " (%s, pinned %d bytes)\n", Duration(r.Duration()), pr.Pinned)
	p.Text(b.String())
}

// servedJSON adds the test, time, memory, failure and results of a served
// peer to its JSON object.
func servedJSON(p *output.Printer, r *verbsprobe.Result) {
	pr := r.Peer
	if t := pr.Test; t != nil {
		testJSON(p, t)
	}
	p.Float(output.JSONOnly, "usec", "", usec(r.Duration()), 1)
	p.Uint(output.JSONOnly, "pinned_bytes", "", uint64(pr.Pinned))
	if s := r.Failed(); s != nil {
		p.Untrusted(output.JSONOnly, "step", "", s.Name)
		p.Untrusted(output.JSONOnly, "error", "", s.Err.Err.Error())
		if s.Err.Cause != "" {
			p.Untrusted(output.JSONOnly, "cause", "", s.Err.Cause)
		}
	}
	if r.Unsupported != "" {
		p.Untrusted(output.JSONOnly, "unsupported", "", r.Unsupported)
	}
	resultsJSON(p, pr.Measurements)
}

// Refused prints a responder's line about a connection it did not serve:
//
//	10.0.0.3:5555: REFUSED the test asks for size 268435456 bytes; ...
//	{"peer":"10.0.0.3:5555","result":"refused","error":"..."}
func Refused(p *output.Printer, r verbsprobe.Refusal) {
	outcome := "refused"
	if r.Busy {
		outcome = "busy"
	}
	if p.JSON() {
		p.StartPlain()
		p.OpenObject("")
		p.Untrusted(output.JSONOnly, "peer", "", r.Peer)
		p.String(output.JSONOnly, "result", "", outcome)
		p.Untrusted(output.JSONOnly, "error", "", r.Reason)
		p.CloseObject()
		p.EndPlain()
		return
	}
	reason := strings.TrimPrefix(r.Reason, "busy: ")
	p.Text(fmt.Sprintf("%s: %s %s\n", esc(r.Peer), strings.ToUpper(outcome), esc(reason)))
}
