package verbsprobe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// tentativeTree copies the captured tree of rxe9, made a moment before on
// a fresh veth whose link-local address (its only GID) was still in
// duplicate address detection, so that a test can finish DAD.
func tentativeTree(t *testing.T) (sysfs.FS, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../sysfs/testdata/rxe-tentative")); err != nil {
		t.Fatal(err)
	}
	fsys, err := sysfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, dir
}

// The probe waits for the GID's address to finish DAD (the kernel could
// not resolve it before: RTR timed out, issue 12) and says it waited.
func TestChooseAddressWaitsForDAD(t *testing.T) {
	fsys, dir := tentativeTree(t)
	after, err := os.ReadFile(filepath.Join(dir, "if_inet6-after.txt"))
	if err != nil {
		t.Fatal(err)
	}
	port := rocePort
	port.GIDTblLen = 8
	for _, gidIndex := range []int{AutoGID, 0} {
		live := filepath.Join(dir, gid.IfInet6Path)
		during, err := os.ReadFile(live)
		if err != nil {
			t.Fatal(err)
		}
		p := newTestTarget(fsys, "rxe9", gidIndex, port)
		p.opts.AddressWait = time.Minute
		// DAD finishes once the probe has read the address tentative (a
		// sleep here raced with a slow probe: emulated arm64, a loaded
		// machine).
		in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.InotifyAddWatch(in, live, unix.IN_CLOSE_NOWRITE); err != nil {
			t.Fatal(err)
		}
		events := os.NewFile(uintptr(in), "inotify")
		done := make(chan struct{})
		go func() {
			defer close(done)
			var buf [4096]byte
			if _, err := events.Read(buf[:]); err == nil {
				os.WriteFile(live, after, 0o644)
			}
		}()
		detail, err := p.chooseAddress(context.Background())
		events.Close()
		<-done
		if err != nil || !strings.HasPrefix(detail, "GID 0 fe80::812:e0ff:fed2:e14e RoCE v2 vt0, usable after ") ||
			!strings.HasSuffix(detail, " of IPv6 duplicate address detection on vt0") {
			t.Errorf("gid-index %d: %q, %v", gidIndex, detail, err)
		}
		os.WriteFile(live, during, 0o644)
	}
}

// A DAD that outlasts the bound fails the address step naming the GID,
// the netdev and what to do; so does a DAD failure, at once.
func TestChooseAddressDADErrors(t *testing.T) {
	fsys, dir := tentativeTree(t)
	port := rocePort
	port.GIDTblLen = 8
	p := newTestTarget(fsys, "rxe9", AutoGID, port)
	p.opts.AddressWait = 3 * addressPoll
	_, err := p.chooseAddress(context.Background())
	var state *AddressStateError
	if !errors.As(err, &state) || err.Error() != "GID 0 fe80::812:e0ff:fed2:e14e of rxe9/1 is still tentative after 150ms: IPv6 duplicate address detection on vt0 has not finished" {
		t.Fatalf("tentative past the bound: %v", err)
	}
	if c := p.likelyCause(StepAddress, err); !strings.Contains(c, "sysctl -w net.ipv6.conf.vt0.accept_dad=0") || !strings.Contains(c, "give vt0 an IPv4 address") {
		t.Errorf("cause %q", c)
	}

	// The same address, DAD failed (flags c8: permanent, tentative,
	// dadfailed): never chosen, and an error when asked for by index.
	live := filepath.Join(dir, gid.IfInet6Path)
	b, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	failed := strings.Replace(string(b), " 0b 40 20 c0      vt0", " 0b 40 20 c8      vt0", 1)
	if failed == string(b) {
		t.Fatal("captured if_inet6 has no tentative vt0 line")
	}
	if err := os.WriteFile(live, []byte(failed), 0o644); err != nil {
		t.Fatal(err)
	}
	var none *NoGIDError
	if _, err := newTestTarget(fsys, "rxe9", AutoGID, port).chooseAddress(context.Background()); !errors.As(err, &none) ||
		!strings.HasSuffix(err.Error(), "0 fe80::812:e0ff:fed2:e14e RoCE v2 vt0 (dadfailed)") {
		t.Errorf("only a DAD-failed GID: %v", err)
	}
	p = newTestTarget(fsys, "rxe9", 0, port)
	_, err = p.chooseAddress(context.Background())
	if !errors.As(err, &state) || !strings.Contains(err.Error(), "IPv6 duplicate address detection on vt0 failed") ||
		!strings.Contains(p.likelyCause(StepAddress, err), "another host on the link has the address") {
		t.Errorf("gid-index of a DAD-failed GID: %v", err)
	}
}

// ETIMEDOUT at RTR on RoCE is the kernel's address resolution of the GID.
func TestRTRTimeoutCause(t *testing.T) {
	p := newTestTarget(fixture(t, "rxe-6.12"), "rxe0", AutoGID, rocePort)
	g, err := gid.Parse("fe80::4c9c:e2ff:fed0:bcea")
	if err != nil {
		t.Fatal(err)
	}
	p.addr.GIDIndex, p.addr.GID = 0, g
	c := p.likelyCause(StepRTR, &uverbs.CommandError{Device: "uverbs0 (rxe0)", Command: "MODIFY_QP", Err: unix.ETIMEDOUT})
	if !strings.HasPrefix(c, "the kernel's address resolution of GID fe80::4c9c:e2ff:fed0:bcea on veth0 timed out") ||
		!strings.Contains(c, "ip neigh show dev veth0") {
		t.Errorf("cause %q", c)
	}
}
