//go:build e2eguest

package guest

import "testing"

// TestLineDiff checks the diff the other scenarios report with (pure: it
// also runs on the host with `go test -tags e2eguest -run LineDiff`).
func TestLineDiff(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"x\ny\n", "x\ny\n", "(no differences)\n"},
		{"a\nb\nc\n", "a\nB\nc\n", "  a\n- b\n+ B\n  c\n"},
		{"1\n2\n", "1\n2\n3\n", "  1\n  2\n+ 3\n"},
		{"p\nq\n", "P\nQ\n", "- p\n+ P\n- q\n+ Q\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\n5\n6\n7\n8\nX\n", "  ...\n  6\n  7\n  8\n- 9\n+ X\n"},
	} {
		if got := lineDiff(c.a, c.b); got != c.want {
			t.Errorf("lineDiff(%q, %q) =\n%s\nwant\n%s", c.a, c.b, got, c.want)
		}
	}
	if !isJSON([]string{"-j", "dev"}) || !isJSON([]string{"-dj", "dev"}) || isJSON([]string{"-d", "dev"}) {
		t.Error("isJSON")
	}
}
