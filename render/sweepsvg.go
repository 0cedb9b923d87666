package render

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/sweep"
)

// The heatmap's geometry, in pixels.
const (
	svgMargin    = 16
	svgFont      = 12
	svgMaxGrid   = 640 // a matrix's side at most; cells shrink to fit
	svgMaxCell   = 34
	svgMinCell   = 3
	svgLineSkip  = 17
	svgLabelChar = 7 // the width of a label's character, roughly
)

// Colours: a measured pair between the limit (yellow) and the fleet's
// best (green); beyond the limit red; failed dark red; no answer grey.
const (
	colourBad      = "#d73027"
	colourFailed   = "#7f0000"
	colourNoAnswer = "#9e9e9e"
	colourSkipped  = "#d9d9d9"
	colourNone     = "#ffffff"
	colourDiagonal = "#f0f0f0"
	colourVerdict  = "#b2182b"
)

// SweepSVG writes the report's matrices as an SVG heatmap: a grid per
// metric, rows and columns labelled with the nodes, each cell coloured by
// how far its pair lies from the limit towards the fleet's best (beyond
// it: red), with the value in the cell where it fits and in its tooltip.
// Nodes with a verdict are labelled in red, a link verdict's cells are
// outlined, and the verdicts are listed under the grids.
func SweepSVG(w io.Writer, rep *sweep.Report) error {
	n := len(rep.Params.Hosts)
	names := make([]string, n)
	labelW := 0
	for i, h := range rep.Params.Hosts {
		names[i] = output.Escape(h)
		labelW = max(labelW, len(names[i])*svgLabelChar)
	}
	labelW += 8
	cell := float64(svgMaxCell)
	if n > 0 {
		cell = math.Max(svgMinCell, math.Min(svgMaxCell, float64(svgMaxGrid)/float64(n)))
	}
	labels := cell >= 9 // room for a label per row and column
	if !labels {
		labelW = 0
	}
	grid := cell * float64(n)
	var mats []*sweep.Matrix
	for _, m := range []*sweep.Matrix{rep.BW, rep.Lat} {
		if m != nil {
			mats = append(mats, m)
		}
	}
	verdictNodes := map[int]bool{}
	links := map[[2]int]bool{}
	for _, v := range rep.Verdicts {
		switch v.Kind {
		case sweep.VerdictLink:
			links[[2]int{v.Ranks[0], v.Ranks[1]}], links[[2]int{v.Ranks[1], v.Ranks[0]}] = true, true
		case sweep.VerdictNode, sweep.VerdictUnreachable:
			for _, r := range v.Ranks {
				verdictNodes[r] = true
			}
		}
	}
	top := float64(svgMargin + 2*svgLineSkip + 10) // title and subtitle
	gridTop := top + svgLineSkip + float64(labelW) // matrix title, column labels
	titles := map[string]string{"bw_gbps": "bandwidth, Gb/s (row sends to column)", "lat_usec": "latency, median µs"}
	panelW := float64(labelW) + grid + 3*svgMargin
	for _, t := range titles {
		panelW = math.Max(panelW, float64(len(t))*svgLabelChar+2*svgMargin)
	}
	width := float64(svgMargin) + panelW*float64(max(len(mats), 1))
	var lines []string
	for _, v := range rep.Verdicts {
		lines = append(lines, fmt.Sprintf("%s: %s", v.Kind, output.Escape(v.Reason)))
	}
	if len(lines) == 0 {
		lines = append(lines, "no verdict")
	}
	for _, t := range rep.Thresholds {
		lines = append(lines, thresholdText(t, rep.Criteria))
	}
	legendTop := gridTop + grid + 2*svgMargin
	height := legendTop + 2*svgLineSkip + float64(len(lines)+1)*svgLineSkip + svgMargin
	for _, l := range lines {
		width = math.Max(width, float64(len(l))*6.2+2*svgMargin)
	}
	legend := []struct{ colour, text string }{
		{gradient(1), "the fleet's best"}, {gradient(0), "at the limit"}, {colourBad, "beyond the limit"},
		{colourFailed, "failed"}, {colourNoAnswer, "no answer"}, {colourSkipped, "refused or skipped"}, {colourNone, "no record"},
	}
	legendW := float64(svgMargin)
	for _, l := range legend {
		legendW += 18 + float64(len(l.text))*svgLabelChar + 16
	}
	width = math.Max(width, legendW)

	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="%d">`+"\n",
		width, height, width, height, svgFont)
	p(`<style>.bad{stroke:#000;stroke-width:0.5} .verdict{fill:%s;font-weight:bold} .link{fill:none;stroke:#000;stroke-width:2.5}</style>`+"\n", colourVerdict)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	status := "PASS: no verdict"
	if !rep.OK {
		status = fmt.Sprintf("FAIL: %d verdict(s)", len(rep.Verdicts))
	}
	p(`<text x="%d" y="%d" font-size="16" font-weight="bold">%s</text>`+"\n", svgMargin, svgMargin+svgLineSkip,
		xmlText(fmt.Sprintf("grdma sweep %s — %s", rep.Sweep, status)))
	p(`<text x="%d" y="%d">%s</text>`+"\n", svgMargin, svgMargin+2*svgLineSkip+4, xmlText(output.Escape(rep.Params.String())))
	for k, m := range mats {
		x0 := float64(svgMargin) + panelW*float64(k) + float64(labelW)
		title := titles[m.Metric]
		p(`<g id="%s">`+"\n", m.Metric)
		p(`<text x="%.1f" y="%.1f" font-weight="bold">%s</text>`+"\n", x0, top+12, xmlText(title))
		if labels {
			for i, name := range names {
				cls := ""
				if verdictNodes[i] {
					cls = ` class="verdict"`
				}
				fs := math.Min(svgFont, cell*0.8)
				p(`<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle" font-size="%.1f"%s>%s</text>`+"\n",
					x0-4, gridTop+cell*(float64(i)+0.5), fs, cls, xmlText(name))
				cx, cy := x0+cell*(float64(i)+0.5), gridTop-4
				p(`<text x="%.1f" y="%.1f" transform="rotate(-90 %.1f %.1f)" dominant-baseline="middle" font-size="%.1f"%s>%s</text>`+"\n",
					cx, cy, cx, cy, fs, cls, xmlText(name))
			}
		}
		th := threshold(rep, m.Metric)
		for i, row := range m.Cells {
			for j, c := range row {
				x, y := x0+cell*float64(j), gridTop+cell*float64(i)
				fill, cls, mark := cellColour(c, i == j, th, m.Metric)
				tip := fmt.Sprintf("%s → %s: %s", names[i], names[j], cellTip(c, m.Unit))
				if m.Metric != "bw_gbps" {
					tip = fmt.Sprintf("%s – %s: %s", names[i], names[j], cellTip(c, m.Unit))
				}
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#ffffff" stroke-width="0.5"%s data-state="%s"><title>%s</title></rect>`+"\n",
					x, y, cell, cell, fill, cls, stateName(c, i == j), xmlText(tip))
				text := mark
				if c.Value != nil && cell >= 30 {
					text = Figure(*c.Value)
				}
				if text != "" && cell >= 12 {
					colour := "#000000"
					if fill == colourBad || fill == colourFailed {
						colour = "#ffffff"
					}
					fs := math.Min(10, cell*0.32)
					if text == mark {
						fs = math.Min(svgFont, cell*0.6)
					}
					p(`<text x="%.1f" y="%.1f" text-anchor="middle" dominant-baseline="middle" font-size="%.1f" fill="%s">%s</text>`+"\n",
						x+cell/2, y+cell/2, fs, colour, xmlText(text))
				}
				if links[[2]int{i, j}] {
					p(`<rect class="link" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`+"\n", x+1, y+1, cell-2, cell-2)
				}
			}
		}
		p("</g>\n")
	}
	// Legend and verdicts.
	ly := legendTop
	lx := float64(svgMargin)
	for _, l := range legend {
		p(`<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s" stroke="#888888" stroke-width="0.5"/>`+"\n", lx, ly, l.colour)
		p(`<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+18, ly+7, xmlText(l.text))
		lx += 18 + float64(len(l.text))*svgLabelChar + 16
	}
	ly += 2 * svgLineSkip
	for _, l := range lines {
		p(`<text x="%d" y="%.1f">%s</text>`+"\n", svgMargin, ly, xmlText(l))
		ly += svgLineSkip
	}
	p("</svg>\n")
	return bw.Flush()
}

func threshold(rep *sweep.Report, metric string) *sweep.Threshold {
	for i := range rep.Thresholds {
		if rep.Thresholds[i].Metric == metric {
			return &rep.Thresholds[i]
		}
	}
	return nil
}

// cellColour is a cell's fill, its class and the mark of a cell without
// a value.
func cellColour(c sweep.Cell, diagonal bool, th *sweep.Threshold, metric string) (fill, class, mark string) {
	switch {
	case diagonal:
		return colourDiagonal, "", ""
	case c.State == sweep.StateBad:
		return colourBad, ` class="bad"`, "*"
	case c.State == sweep.StateFailed:
		return colourFailed, ` class="bad"`, "!"
	case c.State == sweep.StateNoAnswer:
		return colourNoAnswer, ` class="bad"`, "?"
	case c.State == sweep.StateRefused || c.State == sweep.StateSkipped:
		return colourSkipped, "", "~"
	case c.Value == nil || th == nil:
		return colourNone, "", ""
	}
	// Where the value lies between the limit (0) and the best (1), on a
	// log scale: a ×4 spread and a 2 % one both use the whole scale.
	v, lim, best := *c.Value, th.Limit, th.Best
	var f float64
	if metric == "bw_gbps" {
		f = math.Log(v/lim) / math.Log(best/lim)
	} else {
		f = math.Log(lim/v) / math.Log(lim/best)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 1
	}
	return gradient(math.Max(0, math.Min(1, f))), "", ""
}

// gradient goes from yellow (0) to green (1).
func gradient(f float64) string {
	from := [3]float64{0xfe, 0xe0, 0x8b}
	to := [3]float64{0x1a, 0x98, 0x50}
	var c [3]int
	for i := range c {
		c[i] = int(math.Round(from[i] + (to[i]-from[i])*f))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

func stateName(c sweep.Cell, diagonal bool) string {
	if diagonal {
		return "self"
	}
	if c.State == sweep.StateNone {
		return "none"
	}
	return string(c.State)
}

func cellTip(c sweep.Cell, unit string) string {
	s := strings.ReplaceAll(string(c.State), "_", " ")
	if c.Value != nil {
		return fmt.Sprintf("%s %s (%s)", Figure(*c.Value), unit, s)
	}
	if s == "" {
		return "no record"
	}
	return s
}

// xmlText escapes text for an SVG element.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
