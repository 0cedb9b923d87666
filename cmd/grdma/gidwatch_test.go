package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/grdma/grdma/nldev"
)

// TestGIDWatchWithoutRDMA: on a kernel without RDMA netlink, gid watch
// says so and exits 1 instead of waiting for devices that cannot come.
func TestGIDWatchWithoutRDMA(t *testing.T) {
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	a.dial = func() (*nldev.Client, error) { return nil, nldev.ErrNoRDMANetlink }
	t.Setenv("GRDMA_SYSFS_ROOT", "")
	if code := a.main([]string{"gid", "watch"}); code != exitFailed || !strings.Contains(errOut.String(), "no RDMA netlink support; load ib_core") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}
