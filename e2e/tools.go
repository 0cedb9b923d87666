package e2e

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/grdma/grdma/e2e/layout"
)

// Host paths of what goes into the guest, or runs on the host.
const (
	hostBusybox = "/bin/busybox"
	hostQemu    = "qemu-system-x86_64"
	// hostVdeSwitch is the fleet's Ethernet switch (Debian's vde-switch,
	// part of vde2; QEMU is built with VDE).
	hostVdeSwitch = "/usr/bin/vde_switch"
	rxeDriver     = "/etc/libibverbs.d/rxe.driver"
	rxeProvider   = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so"
)

// need is one host file the bed uses and the Debian package shipping it.
// A pattern with * is a glob; a bare name is looked up in PATH and sbin.
type need struct{ what, pkg string }

var needs = []need{
	{hostQemu, "qemu-system-x86"},
	{hostBusybox, "busybox-static"},
	{"/usr/sbin/ip", "iproute2"},
	{"/usr/bin/rdma", "iproute2"},
	{"/usr/bin/ibv_devinfo", "ibverbs-utils"},
	{"/usr/bin/ibv_rc_pingpong", "ibverbs-utils"},
	{layout.IbvUdPingpong, "ibverbs-utils"},
	{rxeDriver, "ibverbs-providers"},
	{rxeProvider, "ibverbs-providers"},
	{layout.IbWriteBw, "perftest"},
	{layout.IbWriteLat, "perftest"},
	{layout.IbReadBw, "perftest"},
	{layout.IbReadLat, "perftest"},
	{layout.IbSendBw, "perftest"},
	{layout.IbSendLat, "perftest"},
	{layout.Tc, "iproute2"},
	{tcDist, "iproute2"},
	{layout.Nft, "nftables"},
	{layout.Rping, "rdmacm-utils"},
	{layout.Ucmatose, "rdmacm-utils"},
	{layout.RdmaServer, "rdmacm-utils"},
	{layout.RdmaClient, "rdmacm-utils"},
	{layout.Udaddy, "rdmacm-utils"},
	{"/usr/bin/rdma_xserver", "rdmacm-utils"},
	{"/usr/bin/rdma_xclient", "rdmacm-utils"},
	{"/usr/bin/mckey", "rdmacm-utils"},
	{"/usr/bin/cmtime", "rdmacm-utils"},
	{"/usr/bin/rstream", "rdmacm-utils"},
	{"/usr/bin/riostream", "rdmacm-utils"},
	{"/usr/bin/rcopy", "rdmacm-utils"},
	{"/usr/bin/udpong", "rdmacm-utils"},
	{layout.FiPingpong, "libfabric-bin"},
	{layout.FiInfo, "libfabric-bin"},
	{layout.LibgccS, "libgcc-s1"},
	{hostVdeSwitch, "vde-switch"},
	{"depmod", "kmod"},
	{"modprobe", "kmod"},
	{"xz", "xz-utils"},
	{"strace", "strace"},
	{layout.Prometheus, "prometheus"},
	{layout.Promtool, "prometheus"},
	{layout.NodeExporter, "prometheus-node-exporter"},
	{"ldd", "libc-bin"},
	{"dpkg", "dpkg"},
}

var toolsOnce struct {
	sync.Mutex
	done bool
}

// EnsureTools installs, with apt-get, the packages of whatever is missing,
// so that a fresh machine works from nothing. It runs apt-get only when
// something is missing.
func (b *Bed) EnsureTools(ctx context.Context) error {
	toolsOnce.Lock()
	defer toolsOnce.Unlock()
	if toolsOnce.done {
		return nil
	}
	var pkgs []string
	seen := map[string]bool{}
	for _, n := range needs {
		if findTool(n.what) != "" || seen[n.pkg] {
			continue
		}
		if n.what == hostBusybox {
			if _, err := os.Stat(hostBusybox); err == nil {
				// A dynamic busybox is installed: leave it alone and
				// unpack busybox-static into the cache (see busybox()).
				continue
			}
		}
		seen[n.pkg] = true
		pkgs = append(pkgs, n.pkg)
	}
	if len(pkgs) > 0 {
		b.logf("e2e: installing %v", pkgs)
		if err := b.aptInstall(ctx, pkgs); err != nil {
			return err
		}
		for _, n := range needs {
			if findTool(n.what) == "" && n.what != hostBusybox {
				return fmt.Errorf("e2e: %s still missing after installing %s", n.what, n.pkg)
			}
		}
	}
	toolsOnce.done = true
	return nil
}

// aptEnv keeps apt-get from asking questions and waits for a busy dpkg lock.
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive"}

const aptLockWait = "DPkg::Lock::Timeout=600"

func (b *Bed) aptInstall(ctx context.Context, pkgs []string) error {
	args := append([]string{"install", "-y", "--no-install-recommends", "-o", aptLockWait}, pkgs...)
	if _, err := b.run(ctx, "", aptEnv, "apt-get", args...); err != nil {
		// Package lists may be absent (fresh machine) or stale.
		if uerr := b.aptUpdate(ctx); uerr != nil {
			return fmt.Errorf("%v\n(apt-get update: %v)", err, uerr)
		}
		_, err = b.run(ctx, "", aptEnv, "apt-get", args...)
		return err
	}
	return nil
}

var aptUpdated sync.Once

// aptUpdate runs apt-get update at most once per process.
func (b *Bed) aptUpdate(ctx context.Context) (err error) {
	aptUpdated.Do(func() {
		b.logf("e2e: apt-get update")
		_, err = b.run(ctx, "", aptEnv, "apt-get", "update", "-o", aptLockWait)
	})
	return err
}

// findTool returns the path of a needed file, or "".
func findTool(what string) string {
	if filepath.IsAbs(what) {
		m, _ := filepath.Glob(what)
		if len(m) > 0 {
			if what == hostBusybox && !isStatic(m[0]) {
				return ""
			}
			return m[len(m)-1]
		}
		return ""
	}
	if p, err := exec.LookPath(what); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, what)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// isStatic reports whether an ELF file has no program interpreter.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// busybox returns a static busybox: the installed one, or one unpacked
// from busybox-static into the cache when the machine has a dynamic one.
func (b *Bed) busybox(ctx context.Context) (string, error) {
	if findTool(hostBusybox) != "" {
		return hostBusybox, nil
	}
	unlock, err := b.lock("busybox")
	if err != nil {
		return "", err
	}
	defer unlock()
	root := filepath.Join(b.Cache, "busybox-static")
	bin := filepath.Join(root, "bin", "busybox")
	if isStatic(bin) {
		return bin, nil
	}
	deb, err := b.download(ctx, "busybox-static", "")
	if err != nil {
		return "", err
	}
	if err := b.unpack(ctx, deb, root); err != nil {
		return "", err
	}
	if !isStatic(bin) {
		return "", fmt.Errorf("e2e: %s is not a static busybox", bin)
	}
	return bin, nil
}
