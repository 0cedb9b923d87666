package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// BuildGrdma runs `make build` (static, CGO_ENABLED=0) and returns bin/grdma.
func (b *Bed) BuildGrdma(ctx context.Context) (string, error) {
	bin := filepath.Join(b.Repo, "bin", "grdma")
	var err error
	if mk := findTool("make"); mk != "" {
		_, err = b.run(ctx, b.Repo, nil, mk, "--no-print-directory", "build")
	} else {
		_, err = b.run(ctx, b.Repo, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", bin, "./cmd/grdma")
	}
	if err != nil {
		return "", fmt.Errorf("e2e: building grdma: %v", err)
	}
	if !isStatic(bin) {
		return "", fmt.Errorf("e2e: %s is not a static executable", bin)
	}
	return bin, nil
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
