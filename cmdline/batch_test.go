package cmdline

import (
	"slices"
	"testing"
)

// TestResolveObjectCompleting: the word being completed stays as typed,
// also after a global option (st must still offer stat, not statistic).
func TestResolveObjectCompleting(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"__complete", "-j", "st"}, []string{"__complete", "-j", "st"}},
		{[]string{"__complete", "st"}, []string{"__complete", "st"}},
		{[]string{"__complete", "-j", "st", "sh"}, []string{"__complete", "-j", "statistic", "sh"}},
		{[]string{"ex", "--web.listen-address=:1"}, []string{"exporter", "--web.listen-address=:1"}},
	} {
		if got := ResolveObject(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}
