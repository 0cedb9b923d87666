package render

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/output"
)

// CheckSummary writes the results of health checks as grdma check does:
// text, a table STATUS CHECK SUBJECT MESSAGE; JSON (o.JSON, indented with
// o.Pretty), the summary's own encoding.
func CheckSummary(w io.Writer, rep health.Summary, o output.Options) error {
	if o.JSON {
		return writeJSON(w, rep, o.Pretty)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tSUBJECT\tMESSAGE")
	for _, r := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Status, r.Name, r.Subject, r.Message)
	}
	return tw.Flush()
}

// writeJSON writes v as one JSON document and a newline, indented by four
// spaces when pretty (grdma's own objects: check, topo).
func writeJSON(w io.Writer, v any, pretty bool) error {
	var b []byte
	var err error
	if pretty {
		b, err = json.MarshalIndent(v, "", "    ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
