package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grdma/grdma/e2e/layout"
)

// BuildGrdma runs `make build` (static, CGO_ENABLED=0) and returns
// bin/grdma; bin/grdma-prometheus, the complete build it execs for the
// Prometheus commands, is next to it (CompanionOf).
func (b *Bed) BuildGrdma(ctx context.Context) (string, error) {
	bin := filepath.Join(b.Repo, "bin", "grdma")
	var err error
	if mk := findTool("make"); mk != "" {
		_, err = b.run(ctx, b.Repo, nil, mk, "--no-print-directory", "build")
	} else {
		_, err = b.run(ctx, b.Repo, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-tags", "grdma_noprometheus", "-o", bin, "./cmd/grdma")
		if err == nil {
			_, err = b.run(ctx, b.Repo, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", CompanionOf(bin), "./cmd/grdma")
		}
	}
	if err != nil {
		return "", fmt.Errorf("e2e: building grdma: %v", err)
	}
	for _, f := range []string{bin, CompanionOf(bin)} {
		if !isStatic(f) {
			return "", fmt.Errorf("e2e: %s is not a static executable", f)
		}
	}
	return bin, nil
}

// CompanionOf is where grdma-prometheus is for the grdma at bin.
func CompanionOf(bin string) string {
	return filepath.Join(filepath.Dir(bin), filepath.Base(layout.GrdmaPrometheus))
}

// BuildGuestTests compiles e2e/guest (build tag e2eguest) into a static
// test binary for the guest.
func (b *Bed) BuildGuestTests(ctx context.Context, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	_, err := b.run(ctx, b.Repo, []string{"CGO_ENABLED=0"}, "go", "test", "-c", "-tags", "e2eguest", "-o", out, "./e2e/guest")
	if err != nil {
		return fmt.Errorf("e2e: building the guest tests: %v", err)
	}
	return nil
}
