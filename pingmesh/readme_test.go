package pingmesh

import (
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/exporter"
)

// TestREADMEPingmeshTable: the README's pingmesh metrics table is the one
// Families generates (UPDATE_README=1 go test ./pingmesh -run README), and
// its series counts are Series'.
func TestREADMEPingmeshTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, stale, err := exporter.ReplaceTable(string(b), "pingmesh metrics table", Families)
	switch {
	case err != nil:
		t.Fatalf("README.md: %v", err)
	case stale && os.Getenv("UPDATE_README") != "":
		os.WriteFile("../README.md", []byte(readme), 0o644)
	case stale:
		t.Errorf("README.md's pingmesh metrics table is stale: UPDATE_README=1 go test ./... -run README")
	}
	c := Config{}.WithDefaults()
	perTarget := c
	perTarget.MaxTargetSeries = 1000
	for _, n := range []struct {
		text       string
		got, count int
	}{
		{"**14,137** pingmesh series (12 × 1,000 + 53 × 40 + 17)", c.Series(1000, 40, 4), 14137},
		{"with histograms per\ntarget it would be 65,017", perTarget.Series(1000, 0, 4), 65017},
		{"at 100 targets, 6,517", c.Series(100, 0, 4), 6517},
	} {
		if !strings.Contains(readme, n.text) || n.got != n.count {
			t.Errorf("README.md should say %q: %d series (Series says %d)", n.text, n.count, n.got)
		}
	}
}
