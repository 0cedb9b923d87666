// Package rdmacompat compares grdma's output with iproute2 rdma's. grdma
// prints what current rdma prints; an older rdma lacks fields added since,
// so Normalize removes those (and only those) before comparing. JSON is
// compared with key order, since scripts may depend on it.
package rdmacompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is an iproute2 release, e.g. {6, 1}.
type Version struct{ Major, Minor int }

// ParseVersion reads `rdma -V` output ("rdma utility, iproute2-6.1.0").
func ParseVersion(s string) (Version, error) {
	m := regexp.MustCompile(`iproute2-(?:ss)?v?(\d+)\.(\d+)`).FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("no iproute2 version in %q", s)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return Version{major, minor}, nil
}

func (v Version) before(o Version) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

// addedField is output rdma gained in a release: its text form and key.
type addedField struct {
	since Version
	text  *regexp.Regexp
	key   string
}

// addedFields lists what rdma prints today that older releases do not.
var addedFields = []addedField{
	{Version{6, 5}, regexp.MustCompile(`protocol \S+ `), "protocol"},
	{Version{6, 7}, regexp.MustCompile(`privileged-qkey (?:on|off) `), "privileged-qkey"},
	{Version{6, 10}, regexp.MustCompile(`subtype \S+ `), "subtype"},
	{Version{6, 13}, regexp.MustCompile(`monitor (?:on|off) `), "monitor"},
}

// garbledField is output an older rdma printed wrongly: it is compared on
// neither side, for the objects it affects (those with key object).
type garbledField struct {
	fixed  Version
	object string
	text   *regexp.Regexp
	key    string
}

// garbledFields lists what older rdma releases printed from memory they
// no longer owned.
var garbledFields = []garbledField{
	// Before 6.7 (commit 3a882b6b), res printed comm from a buffer out of
	// scope; SRQ lines show what overwrote it (e.g. "comm 18-33").
	{Version{6, 7}, "srqn", regexp.MustCompile(`comm \S* `), "comm"},
}

// dropGarbledText removes garbled fields from the lines they affect.
func dropGarbledText(out string, v Version) string {
	for _, f := range garbledFields {
		if !v.before(f.fixed) {
			continue
		}
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, f.object+" ") || strings.Contains(l, " "+f.object+" ") {
				lines[i] = f.text.ReplaceAllString(l, "")
			}
		}
		out = strings.Join(lines, "\n")
	}
	return out
}

// dropGarbledJSON removes garbled keys from the objects they affect.
func dropGarbledJSON(v any, ver Version) any {
	return dropKeys(v, func(obj []Field, key string) bool {
		for _, f := range garbledFields {
			if ver.before(f.fixed) && f.key == key && hasKey(obj, f.object) {
				return true
			}
		}
		return false
	})
}

func hasKey(obj []Field, key string) bool {
	for _, f := range obj {
		if f.Key == key {
			return true
		}
	}
	return false
}

// NormalizeText removes from grdma's text output the fields rdma v lacks.
func NormalizeText(out string, v Version) string {
	for _, f := range addedFields {
		if v.before(f.since) {
			out = f.text.ReplaceAllString(out, "")
		}
	}
	return out
}

// Field is one key of a JSON object, in order.
type Field struct {
	Key   string
	Value any
}

// Parse decodes JSON keeping object key order: objects become []Field.
func Parse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var obj []Field
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, Field{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// NormalizeJSON removes from parsed grdma output the keys rdma v lacks.
func NormalizeJSON(v any, ver Version) any {
	return dropKeys(v, func(_ []Field, key string) bool { return dropped(key, ver) })
}

// dropKeys copies parsed JSON without the object keys drop selects.
func dropKeys(v any, drop func(obj []Field, key string) bool) any {
	switch x := v.(type) {
	case []Field:
		var out []Field
		for _, f := range x {
			if !drop(x, f.Key) {
				out = append(out, Field{f.Key, dropKeys(f.Value, drop)})
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = dropKeys(x[i], drop)
		}
		return out
	}
	return v
}

func dropped(key string, v Version) bool {
	for _, f := range addedFields {
		if f.key == key && v.before(f.since) {
			return true
		}
	}
	return false
}

// Lines renders parsed JSON one key per line with its path, so two
// outputs can be diffed line by line and a difference is easy to read.
func Lines(v any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case []Field:
			out = append(out, path+" {")
			for _, f := range x {
				walk(path+"."+f.Key, f.Value)
			}
			out = append(out, path+" }")
		case []any:
			out = append(out, path+" [")
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
			out = append(out, path+" ]")
		case string:
			out = append(out, path+" = "+strconv.Quote(x))
		default:
			out = append(out, fmt.Sprintf("%s = %v", path, x))
		}
	}
	walk("", v)
	return out
}

// DiffJSON compares rdma's and grdma's JSON output (grdma's normalized for
// rdma v, garbled fields dropped from both) and returns a readable diff,
// or "" when they agree.
func DiffJSON(rdma, grdma []byte, v Version) (string, error) {
	r, err := Parse(rdma)
	if err != nil {
		return "", fmt.Errorf("rdma output: %w", err)
	}
	g, err := Parse(grdma)
	if err != nil {
		return "", fmt.Errorf("grdma output: %w", err)
	}
	return Diff(Lines(dropGarbledJSON(r, v)), Lines(dropGarbledJSON(NormalizeJSON(g, v), v))), nil
}

// DiffText compares rdma's and grdma's text output line by line (grdma's
// normalized for rdma v, garbled fields dropped from both).
func DiffText(rdma, grdma string, v Version) string {
	return Diff(strings.Split(dropGarbledText(rdma, v), "\n"), strings.Split(dropGarbledText(NormalizeText(grdma, v), v), "\n"))
}

// DiffOutput compares one command's output, JSON (DiffJSON) or text
// (DiffText): the comparison every test against a recording of rdma makes.
func DiffOutput(rdma, grdma []byte, isJSON bool, v Version) (string, error) {
	if isJSON {
		return DiffJSON(rdma, grdma, v)
	}
	return DiffText(string(rdma), string(grdma), v), nil
}

// Diff returns a line diff of a and b ("-" a, "+" b), changed lines paired
// with their replacements, 3 lines of context, "..." where lines are left
// out; "" when they are equal.
func Diff(a, b []string) string {
	// lcs[i][j] = length of the longest common subsequence of a[i:], b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	ops = pairUp(ops)
	const context = 3
	near := make([]bool, len(ops))
	changed := false
	for k, o := range ops {
		if o.kind != ' ' {
			changed = true
			for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
				near[d] = true
			}
		}
	}
	if !changed {
		return ""
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

type diffOp struct {
	kind byte // ' ', '-' or '+'
	text string
}

// pairUp interleaves a block of n removed and n added lines as -/+ pairs,
// so each changed line sits right above its replacement.
func pairUp(ops []diffOp) []diffOp {
	var out []diffOp
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			out = append(out, ops[i])
			i++
			continue
		}
		j := i
		var del, add []diffOp
		for ; j < len(ops) && ops[j].kind != ' '; j++ {
			if ops[j].kind == '-' {
				del = append(del, ops[j])
			} else {
				add = append(add, ops[j])
			}
		}
		if len(del) == len(add) {
			for k := range del {
				out = append(out, del[k], add[k])
			}
		} else {
			out = append(append(out, del...), add...)
		}
		i = j
	}
	return out
}
