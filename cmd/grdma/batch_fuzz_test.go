package main

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzSplitBatchLine: splitBatchLine never panics, a line it accepts
// splits into words that, quoted again, split back to the same words, and
// a line without quotes or comments splits like strings.Fields on blanks.
func FuzzSplitBatchLine(f *testing.F) {
	for _, s := range []string{
		"link add rxe0 type rxe netdev veth0", "-j dev show rxe0", `dev set rxe0 name "rxe a"`, "dev # comment",
		`'it''s'`, `"unterminated`, "\t link \t show ", `a"b c"d`, "#", "x#y", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := splitBatchLine(line)
		if err != nil {
			return
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			q := `"`
			if strings.Contains(w, `"`) {
				q = "'"
			}
			if strings.Contains(w, q) {
				return // holds both quote characters: a batch line cannot write it
			}
			quoted[i] = q + w + q
		}
		back, err := splitBatchLine(strings.Join(quoted, " "))
		if err != nil || strings.Join(back, "\x00") != strings.Join(words, "\x00") || len(back) != len(words) {
			t.Errorf("%q splits into %q; quoted again, %q splits into %q, %v", line, words, strings.Join(quoted, " "), back, err)
		}
		if !strings.ContainsAny(line, "'\"#") {
			if fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' }); strings.Join(fields, "\x00") != strings.Join(words, "\x00") {
				t.Errorf("%q splits into %q, want %q", line, words, fields)
			}
		}
	})
}

// FuzzParseNumList: the value of a numeric res filter ("1-3,7", hex
// allowed) parses to ordered ranges, or is rejected; what is accepted,
// written back as ranges, parses to the same ranges.
func FuzzParseNumList(f *testing.F) {
	for _, s := range []string{"1", "1-3,7", ",1,2", "0x1f", "5-3", "1-", "-1", "18446744073709551615", "18446744073709551616", "1,,2", "0X-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ranges, err := parseNumList(s)
		if err != nil {
			return
		}
		var parts []string
		for _, r := range ranges {
			if r.hi < r.lo {
				t.Fatalf("%q: range %d-%d runs backwards", s, r.lo, r.hi)
			}
			parts = append(parts, strconv.FormatUint(r.lo, 10)+"-"+strconv.FormatUint(r.hi, 10))
		}
		back, err := parseNumList(strings.Join(parts, ","))
		if err != nil || len(back) != len(ranges) {
			t.Fatalf("%q parses to %v; written back, %v, %v", s, ranges, back, err)
		}
		for i := range back {
			if back[i] != ranges[i] {
				t.Errorf("%q parses to %v; written back, %v", s, ranges, back)
			}
		}
	})
}
