package completion

import (
	"slices"
	"testing"

	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/verbsprobe"
)

// TestProbeWordsAreTheParsers: completion offers exactly the keywords
// verbsprobe.ParseArgs accepts.
func TestProbeWordsAreTheParsers(t *testing.T) {
	var names []string
	for _, k := range grammars["probe"].kws {
		names = append(names, k.name)
	}
	if !slices.Equal(names, verbsprobe.Keywords) {
		t.Errorf("probe completes %q, verbsprobe.ParseArgs takes %q", names, verbsprobe.Keywords)
	}
}

// TestCheckWordsAreTheParsers: completion offers exactly the words
// health.ParseArgs accepts, in its order.
func TestCheckWordsAreTheParsers(t *testing.T) {
	var names []string
	for _, k := range grammars["check"].kws {
		names = append(names, k.name)
	}
	if want := slices.Concat(health.Checks, health.ExpectKeywords); !slices.Equal(names, want) {
		t.Errorf("check completes %q, health.ParseArgs takes %q", names, want)
	}
}
