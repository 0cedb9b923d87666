package main

import (
	"strings"
	"testing"
)

// TestMonitorUnsupported: 6.1's SYS_GET has no monitor mode, so grdma
// monitor says why and exits 2 before subscribing.
func TestMonitorUnsupported(t *testing.T) {
	_, stderr, code := runGrdma(t, standardKernel("6.1"), "monitor")
	if code != exitUsage || !strings.Contains(stderr, "monitor needs Linux 6.13 or newer") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
