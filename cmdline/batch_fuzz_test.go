package cmdline

import (
	"strings"
	"testing"
)

// FuzzSplitBatchLine: SplitBatchLine never panics, a line it accepts
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
		words, err := SplitBatchLine(line)
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
		back, err := SplitBatchLine(strings.Join(quoted, " "))
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
