//go:build e2eguest

package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/internal/rdmacompat"
)

// compareOutputs runs `rdma ARGS` and `GRDMA ARGS` on the same state and
// returns "" when grdma printed what rdma printed, else a readable report
// with a line diff (- rdma, + grdma). JSON (-j) is compared parsed, then
// with key order, then as compact bytes: scripts that swap rdma -j for
// grdma -j may depend on any of these.
//
// grdma prints what current iproute2 prints; the guest's rdma is Debian
// 12's (iproute2 6.1), which lacks a few later fields (e.g. protocol), so
// those, and only those, are removed from grdma's output first
// (internal/rdmacompat, as in the unit tests).
func compareOutputs(grdmaPath string, args ...string) string {
	want := run(layout.Rdma, args...)
	got := run(grdmaPath, args...)
	what := "grdma " + strings.Join(args, " ")
	ver, err := rdmaVersion()
	if err != nil {
		return fmt.Sprintf("%s: cannot tell the reference rdma's version: %v", what, err)
	}
	note := fmt.Sprintf("(rdma is iproute2-%d.%d: fields it lacks are dropped from grdma's output first)\n", ver.Major, ver.Minor)
	if want.code != 0 {
		return fmt.Sprintf("%s: the reference failed, nothing to compare:\n%s", what, want)
	}
	if got.code != 0 {
		return fmt.Sprintf("%s: exit %d, rdma exits 0:\n%s", what, got.code, got)
	}
	if !isJSON(args) {
		g := rdmacompat.NormalizeText(got.stdout, ver)
		if want.stdout == g {
			return ""
		}
		msg := fmt.Sprintf("%s differs from rdma (- rdma, + grdma):\n%s%s", what, lineDiff(want.stdout, g), note)
		if trimLines(want.stdout) == trimLines(g) {
			msg += "(only trailing whitespace differs: rdma ends every field with a space)\n"
		}
		return msg
	}
	wp, err := rdmacompat.Parse([]byte(want.stdout))
	if err != nil {
		return fmt.Sprintf("%s: rdma printed invalid JSON (%v):\n%s", what, err, want)
	}
	raw, err := rdmacompat.Parse([]byte(got.stdout))
	if err != nil {
		return fmt.Sprintf("%s: invalid JSON (%v):\n%s", what, err, got)
	}
	gp := rdmacompat.NormalizeJSON(raw, ver)
	wc, gc := encodeJSON(wp), encodeJSON(gp)
	switch {
	case !reflect.DeepEqual(unordered(wp), unordered(gp)):
		return fmt.Sprintf("%s: JSON differs from rdma (- rdma, + grdma):\n%s%s", what, lineDiff(indentJSON(wc), indentJSON(gc)), note)
	case wc != gc:
		return fmt.Sprintf("%s: same JSON values, different key order (- rdma, + grdma):\n%s%s", what, lineDiff(indentJSON(wc), indentJSON(gc)), note)
	case encodeJSON(raw) == gc && compact(want.stdout) != compact(got.stdout):
		// Nothing was dropped, so the bytes must match too (whitespace aside).
		return fmt.Sprintf("%s: same JSON, different bytes (compacted, quoted; - rdma, + grdma):\n- %q\n+ %q\n", what,
			compact(want.stdout), compact(got.stdout))
	}
	return ""
}

// rdmaVersion is the reference rdma's iproute2 release, from `rdma -V`.
var rdmaVersion = sync.OnceValues(func() (rdmacompat.Version, error) {
	r := run(layout.Rdma, "-V")
	if r.code != 0 {
		return rdmacompat.Version{}, fmt.Errorf("%s", r)
	}
	return rdmacompat.ParseVersion(r.stdout)
})

// encodeJSON writes parsed JSON (rdmacompat.Parse: objects as ordered
// fields, numbers as written) back as compact JSON, keeping key order.
func encodeJSON(v any) string {
	switch x := v.(type) {
	case []rdmacompat.Field:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = encodeJSON(f.Key) + ":" + encodeJSON(f.Value)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = encodeJSON(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case json.Number:
		return string(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// unordered turns ordered objects into maps, for comparing values only.
func unordered(v any) any {
	switch x := v.(type) {
	case []rdmacompat.Field:
		m := make(map[string]any, len(x))
		for _, f := range x {
			m[f.Key] = unordered(f.Value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = unordered(x[i])
		}
		return out
	}
	return v
}

// compact drops insignificant whitespace: raw output must match apart from
// that (rdma before 6.10 put no newline between JSON records).
func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return strings.TrimSpace(s)
	}
	return b.String()
}

func isJSON(args []string) bool {
	for _, a := range args {
		if a == "-j" || a == "--json" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "j")) {
			return true
		}
	}
	return false
}

// indentJSON pretty-prints JSON keeping its key order (one value a line),
// which makes a diff point at the key that is wrong.
func indentJSON(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(strings.TrimSpace(s)), "", "  "); err != nil {
		return s
	}
	return b.String() + "\n"
}

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

// lineDiff is a line diff of two texts (rdmacompat.Diff), or a note that
// there is none.
func lineDiff(a, b string) string {
	d := rdmacompat.Diff(strings.Split(strings.TrimSuffix(a, "\n"), "\n"), strings.Split(strings.TrimSuffix(b, "\n"), "\n"))
	if d == "" {
		return "(no differences)\n"
	}
	return d
}
