package prober

import (
	"os"
	"strings"
	"testing"

	"github.com/grdma/grdma/exporter"
)

// TestREADMEProbeTable: the README's /probe metrics table is the one
// Families generates (UPDATE_README=1 go test ./prober -run README).
func TestREADMEProbeTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, stale, err := exporter.ReplaceTable(string(b), "probe metrics table", Families)
	switch {
	case err != nil:
		t.Fatalf("README.md: %v", err)
	case stale && os.Getenv("UPDATE_README") != "":
		os.WriteFile("../README.md", []byte(readme), 0o644)
	case stale:
		t.Errorf("README.md's probe metrics table is stale: UPDATE_README=1 go test ./... -run README")
	}
	for _, r := range Reasons {
		if !strings.Contains(readme, "`"+r+"`") {
			t.Errorf("README.md does not name the reason %s", r)
		}
	}
}
