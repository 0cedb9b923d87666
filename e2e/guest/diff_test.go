//go:build e2eguest

package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/grdma/grdma/e2e/layout"
)

// compareOutputs runs `rdma ARGS` and `GRDMA ARGS` on the same state and
// returns "" when grdma printed exactly what rdma printed, else a readable
// report with a line diff (- rdma, + grdma). JSON (-j) is compared parsed,
// then with key order (indented), then byte for byte: scripts that swap
// rdma -j for grdma -j may depend on any of these.
func compareOutputs(grdmaPath string, args ...string) string {
	want := run(layout.Rdma, args...)
	got := run(grdmaPath, args...)
	what := "grdma " + strings.Join(args, " ")
	if want.code != 0 {
		return fmt.Sprintf("%s: the reference failed, nothing to compare:\n%s", what, want)
	}
	if got.code != 0 {
		return fmt.Sprintf("%s: exit %d, rdma exits 0:\n%s", what, got.code, got)
	}
	if !isJSON(args) {
		if want.stdout == got.stdout {
			return ""
		}
		msg := fmt.Sprintf("%s differs from rdma (- rdma, + grdma):\n%s", what, lineDiff(want.stdout, got.stdout))
		if trimLines(want.stdout) == trimLines(got.stdout) {
			msg += "(only trailing whitespace differs: rdma ends every field with a space)\n"
		}
		return msg
	}
	var w, g any
	if err := json.Unmarshal([]byte(want.stdout), &w); err != nil {
		return fmt.Sprintf("%s: rdma printed invalid JSON (%v):\n%s", what, err, want)
	}
	if err := json.Unmarshal([]byte(got.stdout), &g); err != nil {
		return fmt.Sprintf("%s: invalid JSON (%v):\n%s", what, err, got)
	}
	wi, gi := indentJSON(want.stdout), indentJSON(got.stdout)
	switch {
	case !reflect.DeepEqual(w, g):
		return fmt.Sprintf("%s: JSON differs from rdma (- rdma, + grdma):\n%s", what, lineDiff(wi, gi))
	case wi != gi:
		return fmt.Sprintf("%s: same JSON values, different key order (- rdma, + grdma):\n%s", what, lineDiff(wi, gi))
	case strings.TrimSpace(want.stdout) != strings.TrimSpace(got.stdout):
		return fmt.Sprintf("%s: same JSON, different bytes (quoted; - rdma, + grdma):\n- %q\n+ %q\n", what,
			strings.TrimSpace(want.stdout), strings.TrimSpace(got.stdout))
	}
	return ""
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

// lineDiff is a unified-style diff of two texts, with 3 lines of context.
func lineDiff(a, b string) string {
	x := strings.Split(strings.TrimSuffix(a, "\n"), "\n")
	y := strings.Split(strings.TrimSuffix(b, "\n"), "\n")
	// lcs[i][j] = length of the longest common subsequence of x[i:], y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte
		text string
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	const context = 3
	near := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind != ' ' {
			for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
				near[d] = true
			}
		}
	}
	var out strings.Builder
	skipped := false
	for k, o := range ops {
		if !near[k] {
			skipped = true
			continue
		}
		if skipped {
			out.WriteString("  ...\n")
			skipped = false
		}
		fmt.Fprintf(&out, "%c %s\n", o.kind, o.text)
	}
	if skipped {
		out.WriteString("  ...\n")
	}
	return out.String()
}
