package grammar

import (
	"slices"
	"testing"
)

// TestNext: verbs and keywords are walked abbreviated, values named by
// their kind, and a keyword group ends a one-keyword line.
func TestNext(t *testing.T) {
	values := func(v Value, done []string) []string {
		switch v.Kind {
		case Words:
			return v.Words
		case Device:
			return []string{"rxe0"}
		case AutoOnOff:
			if len(done) == 1 && done[0] == "off" {
				return nil
			}
			return onOff.Words
		}
		return nil
	}
	for _, c := range []struct {
		object string
		words  []string
		want   []string
	}{
		{"dev", nil, []string{"add", "delete", "show", "list", "set", "info"}},
		{"dev", []string{"se"}, []string{"rxe0"}},
		{"dev", []string{"set", "rxe0"}, []string{"name", "netns", "adaptive-moderation"}},
		{"dev", []string{"set", "rxe0", "ad"}, []string{"on", "off"}},
		{"dev", []string{"set", "rxe0", "name", "x"}, nil},
		{"stat", []string{"qp", "set", "auto", "off"}, nil},
		{"stat", []string{"qp", "set", "auto", "type"}, []string{"on", "off"}},
		{"res", []string{"show"}, append(slices.Clone(ResTypeNames()), "frmr_pools", "rxe0")},
		{"res", []string{"show", "qp", "state"}, []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}},
		{"probe", []string{"rxe0"}, ProbeKeywords},
		{"probe", []string{"rxe0", "bw"}, []string{"write", "send", "read"}},
	} {
		if got := Object(c.object).Next(c.words, values); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.object, c.words, got, c.want)
		}
	}
}

// TestParsersUseTheTables: what the parsers accept is what the tables
// (hence completion) offer.
func TestParsersUseTheTables(t *testing.T) {
	if got := Check.KeywordNames(); !slices.Equal(got[:len(CheckNames)], CheckNames) {
		t.Errorf("check's table starts %q, want the checks %q", got, CheckNames)
	}
	for _, kw := range ProbeKeywords {
		if Probe.Keyword(kw) == nil {
			t.Errorf("probe keyword %s is not in the table", kw)
		}
	}
	if lit := Object("gid").Literals(); !slices.Contains(lit, "watch") || !slices.Contains(lit, "v2") {
		t.Errorf("gid's literals %q", lit)
	}
}
