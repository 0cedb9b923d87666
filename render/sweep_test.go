package render

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/sweeptest"
)

// sweepRecords makes the records of an all-pairs sweep of n nodes whose
// pairs measure bw(c, s) Gb/s and 2 µs.
func sweepRecords(n int, bw func(c, s int) float64) []sweep.Record {
	return sweeptest.Flat(sweeptest.Records(sweeptest.Params(n), func(pl sweep.Planned) sweeptest.Outcome {
		return sweeptest.Outcome{BWGbps: bw(pl.Client, pl.Server), LatUsec: 2}
	}))
}

func slowNode(bad int) func(c, s int) float64 {
	return func(c, s int) float64 {
		if c == bad || s == bad {
			return 4.5
		}
		return 97 + float64((c+s)%3)
	}
}

func TestSweepReportText(t *testing.T) {
	rep, err := sweep.Build(sweepRecords(6, slowNode(2)), sweep.DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := SweepReport(&b, rep, output.Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"sweep " + rep.Sweep + ": all-pairs of 6 hosts: bw write 65536 B 500ms each way, lat write 2 B x1000",
		"6 nodes, 15 pairs judged, 5 bad",
		"bandwidth, Gb/s (the row's node sends to the column's)",
		"node03    4.50*   4.50*       -   4.50*",
		"bw limit: below 92.1 Gb/s (93% of the best 99.0; median 98.0), 30 measurements",
		"lat limit: above 4.20 µs (2.1× the best 2.00; median 2.00)",
		"  node         node03: 5 of its 5 pairs are bad, and 5 of those 5 partners are fine with the other nodes",
		"bw write node03→node01 4.5 Gb/s, below 92.1",
		"... and 4 more",
		"to confirm, retest",
		"FAIL: 1 verdict(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// JSON: the report's encoding.
	b.Reset()
	SweepReport(&b, rep, output.Options{JSON: true})
	var back sweep.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.OK || len(back.Verdicts) != 1 || back.BW.Cells[2][0].State != sweep.StateBad {
		t.Errorf("JSON: %v %+v", err, back.Verdicts)
	}
	// A healthy fleet.
	rep, _ = sweep.Build(sweepRecords(4, func(c, s int) float64 { return 10 }), sweep.DefaultCriteria)
	b.Reset()
	SweepReport(&b, rep, output.Options{})
	if !strings.HasSuffix(b.String(), "\nPASS: no verdict\n") {
		t.Errorf("healthy:\n%s", b.String())
	}
	// A large fleet: no text matrices.
	rep, _ = sweep.Build(sweepRecords(MaxTextMatrix+1, func(c, s int) float64 { return 10 }), sweep.DefaultCriteria)
	b.Reset()
	SweepReport(&b, rep, output.Options{})
	if !strings.Contains(b.String(), "matrices of more than 32 nodes") {
		t.Errorf("large fleet:\n%.300s", b.String())
	}
}

func TestFigure(t *testing.T) {
	for v, want := range map[float64]string{97.23: "97.2", 0.04321: "0.0432", 1234.5: "1235", 4.5: "4.50", 0: "0", 100: "100"} {
		if got := Figure(v); got != want {
			t.Errorf("Figure(%g) = %q, want %q", v, got, want)
		}
	}
}

// The heatmap is valid SVG (a well-formed XML document whose root is an
// svg element in the SVG namespace), labels each node, and shows the
// planted fault: the bad node's label in the verdict colour and every
// cell of its row and column bad.
func TestSweepSVG(t *testing.T) {
	recs := sweepRecords(8, slowNode(5))
	// A node name that must be escaped in XML.
	rep, err := sweep.Build(recs, sweep.DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	rep.Params.Hosts[0] = `a<b&"c"`
	var b bytes.Buffer
	if err := SweepSVG(&b, rep); err != nil {
		t.Fatal(err)
	}
	svg := parseSVG(t, b.Bytes())
	labels := map[string]string{}
	cells := map[string]string{} // "metric i j" → state
	for _, e := range svg.all() {
		if e.name == "text" && e.attr["transform"] == "" && e.attr["text-anchor"] == "end" {
			labels[e.text] = e.attr["class"]
			if fs := e.attr["font-size"]; fs < "7" && len(fs) == 1 {
				t.Errorf("label %q font size %s: too small to read", e.text, fs)
			}
		}
		if e.name == "rect" && e.attr["data-state"] != "" {
			cells[e.parentID+" "+e.title] = e.attr["data-state"]
		}
	}
	if labels["node06"] != "verdict" || labels["node02"] != "" || labels[`a<b&"c"`] != "" {
		t.Errorf("row labels: %v", labels)
	}
	bad, ok := 0, 0
	for k, st := range cells {
		if !strings.HasPrefix(k, "bw_gbps ") {
			continue
		}
		involves := strings.Contains(k, "node06 →") || strings.Contains(k, "→ node06")
		switch {
		case strings.Contains(k, "node06 → node06"):
		case involves && st != "bad":
			t.Errorf("%s: %s, want bad", k, st)
		case !involves && st == "bad":
			t.Errorf("%s: bad", k)
		case involves:
			bad++
		case st == "ok":
			ok++
		}
	}
	if bad != 14 || ok != 8*7-14 {
		t.Errorf("%d bad and %d ok bandwidth cells, want 14 and 42", bad, ok)
	}
	if !strings.Contains(b.String(), "node: node06: 7 of its 7 pairs are bad") {
		t.Error("the verdict is not listed under the grids")
	}
	// A link verdict outlines its cells.
	rep, _ = sweep.Build(sweepRecords(6, func(c, s int) float64 {
		if c+s == 4 && c != s && (c == 1 || c == 3) {
			return 4.5
		}
		return 97
	}), sweep.DefaultCriteria)
	b.Reset()
	SweepSVG(&b, rep)
	parseSVG(t, b.Bytes())
	if n := strings.Count(b.String(), `class="link"`); n != 2+2 { // bw and lat grids, both cells
		t.Errorf("%d outlined cells, want 4 (the style defines the class too)", n)
	}
	// 100 nodes: cells too small for labels; still valid.
	rep, _ = sweep.Build(sweepRecords(100, func(c, s int) float64 { return 10 }), sweep.DefaultCriteria)
	b.Reset()
	SweepSVG(&b, rep)
	parseSVG(t, b.Bytes())
}

type svgElement struct {
	name, text, title, parentID string
	attr                        map[string]string
}

type svgDoc struct{ elems []svgElement }

func (d svgDoc) all() []svgElement { return d.elems }

// parseSVG checks that b is a well-formed SVG document and returns its
// elements.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var doc svgDoc
	var stack []int
	group := ""
	root := true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if root {
				if tk.Name.Local != "svg" || tk.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element %v, want svg in the SVG namespace", tk.Name)
				}
				root = false
			}
			e := svgElement{name: tk.Name.Local, attr: map[string]string{}, parentID: group}
			for _, a := range tk.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			if e.name == "g" {
				group = e.attr["id"]
			}
			doc.elems = append(doc.elems, e)
			stack = append(stack, len(doc.elems)-1)
		case xml.EndElement:
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if doc.elems[i].name == "title" && len(stack) > 0 {
				doc.elems[stack[len(stack)-1]].title = doc.elems[i].text
			}
			if doc.elems[i].name == "g" {
				group = ""
			}
		case xml.CharData:
			if len(stack) > 0 {
				doc.elems[stack[len(stack)-1]].text += string(tk)
			}
		}
	}
	if root {
		t.Fatal("empty document")
	}
	return doc
}

// A fleet whose pairs spread little above the median but enough to relax
// the limit: the limit is a quarter of the median, and says so.
func TestSweepReportRelaxedCap(t *testing.T) {
	rep, err := sweep.Build(sweepRecords(8, func(c, s int) float64 {
		return 0.04 * (1 + float64((c*7+s*3)%10)/50)
	}), sweep.DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	th := rep.Thresholds[0]
	if !th.Relaxed || th.Limit != sweep.RelaxedBWMax*th.Median {
		t.Fatalf("want the limit relaxed to a quarter of the median: %+v", th)
	}
	var b strings.Builder
	if err := SweepReport(&b, rep, output.Options{}); err != nil {
		t.Fatal(err)
	}
	want := "bw limit: below " + Figure(th.Limit) + " Gb/s (0.25 of the fleet's median " + Figure(th.Median) + ", under the fleet's median " + Figure(th.Median) + " moved 2.5 times its ratio to the pairs' 90th percentile " + Figure(th.Anchor) + ", "
	if !strings.Contains(b.String(), want) {
		t.Errorf("want %q in:\n%s", want, b.String())
	}
}

// A suspect pair (one test beyond the relaxed limit of a fleet that
// spreads) is counted and listed, without a verdict.
func TestSweepReportSuspect(t *testing.T) {
	rep, err := sweep.Build(sweepRecords(8, func(c, s int) float64 {
		if c == 1 && s == 4 {
			return 0.002
		}
		return 0.03 * (1 + float64((c*7+s*3)%10)/5)
	}), sweep.DefaultCriteria)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := SweepReport(&b, rep, output.Options{}); err != nil {
		t.Fatal(err)
	}
	name := func(r int) string { return rep.Params.Hosts[r] }
	th := rep.Thresholds[0]
	// The relaxed limit names what the spread is measured to.
	relaxed := "the fleet's median " + Figure(th.Median) + " moved 2.5 times its ratio to the pairs' 90th percentile " + Figure(th.Anchor)
	for _, want := range []string{"0 bad, 1 suspect", "suspect pairs (", name(1) + "–" + name(4) + ": bw write", "PASS: no verdict", "retest 1 pairs", relaxed} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("want %q in:\n%s", want, b.String())
		}
	}
}
