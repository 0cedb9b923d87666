package render

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/sweep"
)

// MaxTextMatrix is the largest fleet whose matrices the text report
// prints (wider ones do not fit a terminal: -j or --svg shows them).
const MaxTextMatrix = 32

// maxEvidence bounds the bad tests printed under a verdict.
const maxEvidence = 6

// SweepReport writes a sweep's report as grdma sweep report does: text,
// what ran, the bandwidth and latency matrices (fleets of up to
// MaxTextMatrix nodes), the limits and where they came from, the
// verdicts with their evidence and the retests to run; JSON (o.JSON,
// indented with o.Pretty), the report's own encoding. Names and reasons
// come from the nodes' files: they are printed escaped.
func SweepReport(w io.Writer, rep *sweep.Report, o output.Options) error {
	if o.JSON {
		var b []byte
		var err error
		if o.Pretty {
			b, err = json.MarshalIndent(rep, "", "    ")
		} else {
			b, err = json.Marshal(rep)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var b strings.Builder
	esc := output.Escape
	n := len(rep.Params.Hosts)
	fmt.Fprintf(&b, "sweep %s: %s\n", rep.Sweep, esc(rep.Params.String()))
	judged, bad, retested := 0, 0, 0
	var suspects []sweep.PairReport
	for _, p := range rep.Pairs {
		if !p.Unreachable {
			judged++
			if p.Bad {
				bad++
			}
			if p.Suspect {
				suspects = append(suspects, p)
			}
			if p.Retested {
				retested++
			}
		}
	}
	fmt.Fprintf(&b, "%d nodes, %d pairs judged, %d bad", n, judged, bad)
	if len(suspects) > 0 {
		fmt.Fprintf(&b, ", %d suspect", len(suspects))
	}
	if retested > 0 {
		fmt.Fprintf(&b, " (%d retested: the retest's verdict stands)", retested)
	}
	if rep.Missing > 0 {
		fmt.Fprintf(&b, ", %d planned tests without a record", rep.Missing)
	}
	var noRecords []string
	for _, nr := range rep.Nodes {
		if !nr.Records {
			noRecords = append(noRecords, esc(nr.Name))
		}
	}
	if len(noRecords) > 0 {
		fmt.Fprintf(&b, "; no records of %s (its partners' stand in)", strings.Join(noRecords, ", "))
	}
	b.WriteString("\n")
	if n <= MaxTextMatrix {
		for _, m := range []*sweep.Matrix{rep.BW, rep.Lat} {
			if m != nil {
				b.WriteString("\n")
				matrixText(&b, rep, m)
			}
		}
		if rep.BW != nil || rep.Lat != nil {
			b.WriteString("  * beyond the limit, ! failed, ? no answer, ~ refused or skipped, . no record\n")
		}
	} else {
		fmt.Fprintf(&b, "\n(matrices of more than %d nodes: grdma -j sweep report, or --svg FILE)\n", MaxTextMatrix)
	}
	b.WriteString("\n")
	for _, t := range rep.Thresholds {
		b.WriteString(thresholdText(t, rep.Criteria) + "\n")
	}
	if len(rep.Verdicts) > 0 {
		b.WriteString("\nverdicts:\n")
		for _, v := range rep.Verdicts {
			fmt.Fprintf(&b, "  %-12s %s\n", v.Kind, esc(v.Reason))
			for i, e := range v.Evidence {
				if i == maxEvidence {
					fmt.Fprintf(&b, "  %-12s   ... and %d more\n", "", len(v.Evidence)-maxEvidence)
					break
				}
				fmt.Fprintf(&b, "  %-12s   %s\n", "", esc(e))
			}
		}
	}
	if len(suspects) > 0 {
		b.WriteString("\nsuspect pairs (one test beyond a limit the fleet's spread relaxed, the pair's others within: no verdict unless a retest fails too or the node's other pairs agree):\n")
		for _, p := range suspects {
			fmt.Fprintf(&b, "  %s–%s: %s\n", esc(p.A), esc(p.B), esc(strings.Join(p.Reasons, "; ")))
		}
	}
	cleared := 0
	for _, p := range rep.Pairs {
		if p.Cleared {
			cleared++
		}
	}
	if cleared > 0 {
		fmt.Fprintf(&b, "\n%d flagged pairs passed their retest\n", cleared)
	}
	if c := rep.Confirm; c != nil {
		fmt.Fprintf(&b, "\nto confirm, retest %d pairs in %d rounds (-j: \"confirm\")\n", len(c.Pairs()), len(c.Rounds))
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(&b, "(%d input lines were not records and were skipped)\n", rep.Skipped)
	}
	if rep.OK {
		b.WriteString("\nPASS: no verdict\n")
	} else {
		fmt.Fprintf(&b, "\nFAIL: %d verdict(s)\n", len(rep.Verdicts))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// matrixText prints one matrix, rows by columns.
func matrixText(b *strings.Builder, rep *sweep.Report, m *sweep.Matrix) {
	names := make([]string, len(rep.Params.Hosts))
	width := 7
	for i, h := range rep.Params.Hosts {
		names[i] = output.Escape(h)
		width = max(width, len(names[i]))
	}
	switch m.Metric {
	case "bw_gbps":
		fmt.Fprintf(b, "bandwidth, %s (the row's node sends to the column's)\n", m.Unit)
	default:
		fmt.Fprintf(b, "latency, median %s\n", m.Unit)
	}
	fmt.Fprintf(b, "%-*s", width, "")
	for _, name := range names {
		fmt.Fprintf(b, " %*s", width, name)
	}
	b.WriteString("\n")
	for i, row := range m.Cells {
		fmt.Fprintf(b, "%-*s", width, names[i])
		for j, c := range row {
			s := cellText(c, i == j)
			fmt.Fprintf(b, " %*s", width, s)
		}
		b.WriteString("\n")
	}
}

func cellText(c sweep.Cell, diagonal bool) string {
	if diagonal {
		return "-"
	}
	mark := map[sweep.State]string{sweep.StateBad: "*", sweep.StateFailed: "!", sweep.StateNoAnswer: "?",
		sweep.StateRefused: "~", sweep.StateSkipped: "~"}[c.State]
	if c.Value == nil {
		if mark == "" {
			return "."
		}
		return mark
	}
	return Figure(*c.Value) + mark
}

// Figure prints a measured value with three significant digits: 97.2,
// 0.0432, 1234.
func Figure(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// thresholdText says which limit a metric was judged by and why.
func thresholdText(t sweep.Threshold, c sweep.Criteria) string {
	name, unit, dir, rel := "bw", "Gb/s", "below", fmt.Sprintf("%g%% of the best %s", c.BWFraction*100, Figure(t.Best))
	if t.Metric != "bw_gbps" {
		name, unit, dir, rel = "lat", "µs", "above", fmt.Sprintf("%g× the best %s", c.LatFactor, Figure(t.Best))
	}
	s := fmt.Sprintf("%s limit: %s %s %s (", name, dir, Figure(t.Limit), unit)
	if t.Relaxed {
		// Bandwidth's spread is measured to a high percentile of the
		// pairs (one outlier pair would set the best), latency's to the best.
		anchor := fmt.Sprintf("the best %s", Figure(t.Best))
		if t.Metric == "bw_gbps" && t.Anchor > 0 {
			anchor = fmt.Sprintf("the pairs' %gth percentile %s", sweep.AnchorPercentile*100, Figure(t.Anchor))
		}
		moved := fmt.Sprintf("the fleet's median %s moved %g times its ratio to %s", Figure(t.Median), c.Spread, anchor)
		if t.Metric == "bw_gbps" && t.Anchor > 0 && t.Limit < t.Median*math.Pow(t.Median/t.Anchor, c.Spread)*(1-1e-9) {
			// Capped at sweep.RelaxedBWMax of the median.
			moved = fmt.Sprintf("%g of the fleet's median %s, under %s, %s", sweep.RelaxedBWMax, Figure(t.Median), moved,
				Figure(t.Median*math.Pow(t.Median/t.Anchor, c.Spread)))
		}
		s += fmt.Sprintf("%s: its pairs spread more than %s, %s, allows)", moved, rel, Figure(t.Relative))
	} else {
		s += fmt.Sprintf("%s; median %s)", rel, Figure(t.Median))
	}
	if t.Floor > 0 {
		kind := "floor"
		if t.Metric != "bw_gbps" {
			kind = "ceiling"
		}
		s += fmt.Sprintf(", %s %s %s", kind, Figure(t.Floor), unit)
	}
	return s + fmt.Sprintf(", %d measurements", t.Samples)
}
