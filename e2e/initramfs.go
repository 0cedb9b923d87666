package e2e

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/grdma/grdma/e2e/layout"
)

// bootModules are loaded by /init, in this order (each after its
// dependencies). 9p carries results home; crc32_generic is not a declared
// dependency of rdma_rxe but without it `link add` fails with ENOENT.
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "veth", "crc32_generic", "rdma_rxe", "ib_uverbs"}

// linkModules are loaded by /init when the guest is on a link (Guest.Link):
// virtio_net for the virtio-net-pci NIC, rdma_ucm for the RDMA CM tools
// (/dev/infiniband/rdma_cm). The single guest does not load rdma_ucm at
// boot: its tests unload ib_core, which rdma_ucm would hold.
var linkModules = []string{"virtio_net", "rdma_ucm"}

// extraModules are in the image for scripts and tests to load, not at
// boot (rdma_ucm: connection manager IDs for resource captures; 8021q: a
// VLAN netdev, which rxe must refuse; ib_umad: the umad and issm character
// devices `grdma dev info` lists; the fault helpers' tc and nftables
// modules; e1000e: the PCIe NICs of a guest booted with a PCIe topology,
// BootOptions.QEMUArgs).
var extraModules = append([]string{"rdma_ucm", "8021q", "ib_umad", "e1000e"}, layout.FaultModules...)

// guestTools are host binaries copied to the same guest path, with the
// shared libraries ldd finds for them.
var guestTools = []string{layout.IP, layout.Rdma, layout.IbvDevinfo, layout.IbvRcPingpong, layout.IbvUdPingpong, layout.Strace,
	layout.IbWriteBw, layout.IbWriteLat, layout.IbReadBw, layout.IbReadLat, layout.IbSendBw, layout.IbSendLat,
	layout.Prometheus, layout.NodeExporter,
	layout.Tc, layout.Nft,
	layout.Rping, layout.Ucmatose, layout.RdmaServer, layout.RdmaClient, layout.Udaddy,
	"/usr/bin/rdma_xserver", "/usr/bin/rdma_xclient", "/usr/bin/mckey", "/usr/bin/cmtime",
	"/usr/bin/rstream", "/usr/bin/riostream", "/usr/bin/rcopy", "/usr/bin/udpong",
	layout.FiPingpong, layout.FiInfo}

// guestFiles are host files copied as they are, without their libraries:
// what programs load at run time (pthread_exit's libgcc_s, tc's netem
// distribution tables).
var guestFiles = []string{layout.LibgccS, tcDist}

// tcDist are netem's delay distribution tables, read by tc.
const tcDist = "/usr/lib/x86_64-linux-gnu/tc/*.dist"

// hostsFile is every image's /etc/hosts: the pair's two guests and every
// possible fleet node, so that name lookups (librdmacm's rdma_getaddrinfo,
// libfabric) answer from files, never from a DNS the guests do not have.
func hostsFile() []byte {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	fmt.Fprintf(&b, "%s\t%s\n%s\t%s\n", layout.PeerA, layout.PeerAName, layout.PeerB, layout.PeerBName)
	for i := 1; i <= layout.FleetMax; i++ {
		fmt.Fprintf(&b, "%s\t%s\n", layout.FleetAddr(i), layout.FleetName(i))
	}
	return []byte(b.String())
}

var (
	//go:embed guestfs/init.sh
	initScript []byte
	//go:embed guestfs/loadmod.sh
	loadmodScript []byte
	//go:embed guestfs/netbeat.sh
	netbeatScript []byte
	//go:embed guestfs/grdma-wrong-key.sh
	wrongKeyScript []byte
)

// Guest is what one boot runs.
type Guest struct {
	Kernel *Kernel
	// Grdma is the host path of the grdma to install as layout.Grdma; ""
	// leaves it out.
	Grdma string
	// TestBinary, if set, is installed as layout.GuestTest.
	TestBinary string
	// Run is the shell script init runs after setting the guest up; its
	// exit status is the boot's result.
	Run string
	// Files are extra files: guest path → host path.
	Files map[string]string
	// Verbose copies the script's output to the console as well.
	Verbose bool
	// Link, if set, puts the guest on an Ethernet link to another guest.
	Link *Link
}

// Link is a guest's NIC on a wire to other guests (and nothing else): a
// TCP socket between the pair's two QEMUs, or a port of the fleet's switch.
type Link struct {
	// Backend is QEMU's -netdev backend with its options, without the id:
	// "socket,fd=3" for a pair's guest (its end of the bed's TCP
	// connection, BootOptions.Files), "vde,sock=DIR" for a port of a VDE
	// switch.
	Backend string
	MAC     string
	// Address is layout.PairNetdev's IPv4 address with prefix, set by /init.
	Address string
	// Name is the guest's host name (one of layout.Hosts').
	Name string
}

// config is the link's line for /init (layout.LinkConfig).
func (l *Link) config() []byte {
	return []byte(fmt.Sprintf("%s %s %s\n", layout.PairNetdev, l.Address, l.Name))
}

// buildInitramfs writes the guest's initramfs (an uncompressed cpio: the
// emulated CPU is slow at decompressing) to file.
func (b *Bed) buildInitramfs(ctx context.Context, g *Guest, file string) error {
	t := newCpioTree()
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "mnt/host", "out", "etc/e2e"} {
		t.dir(d)
	}
	t.chardev("dev/console", 0o600, 5, 1)
	t.chardev("dev/null", 0o666, 1, 3)
	t.file("init", 0o755, initScript)
	t.file(layout.LoadMod, 0o755, loadmodScript)
	t.file(layout.NetBeat, 0o755, netbeatScript)
	t.file(layout.FakeGrdmaWrongKey, 0o755, wrongKeyScript)
	t.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	t.file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	t.file(strings.TrimPrefix(layout.Hosts, "/"), 0o644, hostsFile())
	// Name lookups from files only: without nsswitch.conf glibc asks DNS
	// first, and its failure (EAI_AGAIN) ends the lookup.
	t.file("etc/nsswitch.conf", 0o644, []byte("hosts: files\nnetworks: files\n"))
	t.file("etc/e2e/boot-modules", 0o644, []byte(strings.Join(bootModules, " ")+"\n"))
	t.file("etc/e2e/link-modules", 0o644, []byte(strings.Join(linkModules, " ")+"\n"))
	t.file("etc/e2e/run", 0o755, []byte(g.Run))
	if g.Verbose {
		t.file("etc/e2e/verbose", 0o644, nil)
	}
	if g.Link != nil {
		t.file(strings.TrimPrefix(layout.LinkConfig, "/"), 0o644, g.Link.config())
	}

	if err := b.addModules(ctx, t, g.Kernel); err != nil {
		return err
	}
	libs := map[string]bool{}
	for _, tool := range guestTools {
		if err := t.copy(tool, tool); err != nil {
			return err
		}
		if err := b.addLibs(ctx, t, tool, libs); err != nil {
			return err
		}
	}
	for _, pattern := range guestFiles {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			return fmt.Errorf("e2e: nothing matches %s", pattern)
		}
		for _, f := range files {
			if err := t.copy(f, f); err != nil {
				return err
			}
		}
	}
	// The rxe provider is dlopen()ed by libibverbs, so ldd of the tools
	// does not see it.
	if err := t.copy(rxeDriver, rxeDriver); err != nil {
		return err
	}
	provs, _ := filepath.Glob(rxeProvider)
	if len(provs) == 0 {
		return fmt.Errorf("e2e: no rxe provider matches %s", rxeProvider)
	}
	for _, p := range provs {
		if err := t.copy(p, p); err != nil {
			return err
		}
		if err := b.addLibs(ctx, t, p, libs); err != nil {
			return err
		}
	}
	if g.Grdma != "" {
		if err := t.copy(layout.Grdma, g.Grdma); err != nil {
			return err
		}
		// A grdma from before the split, or the complete build alone, has
		// no companion.
		if _, err := os.Stat(CompanionOf(g.Grdma)); err == nil {
			if err := t.copy(layout.GrdmaPrometheus, CompanionOf(g.Grdma)); err != nil {
				return err
			}
		}
	}
	if g.TestBinary != "" {
		if err := t.copy(layout.GuestTest, g.TestBinary); err != nil {
			return err
		}
	}
	guests := make([]string, 0, len(g.Files))
	for guest := range g.Files {
		guests = append(guests, guest)
	}
	sort.Strings(guests)
	for _, guest := range guests {
		if err := t.copy(guest, g.Files[guest]); err != nil {
			return err
		}
	}
	if err := b.addBusybox(ctx, t); err != nil {
		return err
	}

	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := t.writeTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// addBusybox installs static busybox with its applets as /bin symlinks,
// leaving alone paths already taken by real tools.
func (b *Bed) addBusybox(ctx context.Context, t *cpioTree) error {
	bb, err := b.busybox(ctx)
	if err != nil {
		return err
	}
	if err := t.copy(layout.Busybox, bb); err != nil {
		return err
	}
	out, err := b.run(ctx, "", nil, bb, "--list")
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(out) {
		if p := "/bin/" + name; !t.has(p) {
			t.symlink(p, "busybox")
		}
	}
	if !t.has(layout.Sh) {
		return fmt.Errorf("e2e: busybox has no sh applet")
	}
	return nil
}

// addModules puts every module of bootModules, linkModules and extraModules, with its
// dependencies, into lib/modules (decompressed: busybox insmod cannot read
// .ko.xz), and one ordered insmod list per name into layout.ModulesDir.
func (b *Bed) addModules(ctx context.Context, t *cpioTree, k *Kernel) error {
	modprobe := findTool("modprobe")
	required := append(append([]string{}, bootModules...), linkModules...)
	for i, name := range append(required, extraModules...) {
		out, err := b.run(ctx, "", nil, modprobe, "-d", k.Root, "-S", k.Release, "--show-depends", name)
		if err != nil {
			if i >= len(required) {
				b.logf("e2e: %s: optional module %s left out: %v", k.Label, name, err)
				continue
			}
			return err
		}
		var list []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "insmod" {
				continue // "builtin NAME", or blank
			}
			host := f[1]
			rel, err := filepath.Rel(k.Root, host)
			if err != nil || strings.HasPrefix(rel, "..") {
				return fmt.Errorf("e2e: module %s outside %s", host, k.Root)
			}
			guest := "/" + strings.TrimSuffix(filepath.ToSlash(rel), ".xz")
			guest = path.Clean(strings.Replace(guest, "/usr/lib/modules/", "/lib/modules/", 1))
			if !t.has(guest) {
				if strings.HasSuffix(host, ".xz") {
					ko, err := b.run(ctx, "", nil, findTool("xz"), "-dc", host)
					if err != nil {
						return err
					}
					t.file(guest, 0o644, []byte(ko))
				} else if err := t.copy(guest, host); err != nil {
					return err
				}
			}
			list = append(list, guest)
		}
		t.file(path.Join(layout.ModulesDir, name), 0o644, []byte(strings.Join(list, "\n")+"\n"))
	}
	return nil
}

// addLibs adds the shared libraries ldd lists for bin, at the paths the
// dynamic loader will look for them.
func (b *Bed) addLibs(ctx context.Context, t *cpioTree, bin string, seen map[string]bool) error {
	out, err := b.run(ctx, "", nil, findTool("ldd"), bin)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		var lib string
		if _, after, ok := strings.Cut(line, "=>"); ok {
			if strings.Contains(after, "not found") {
				return fmt.Errorf("e2e: %s: %s", bin, line)
			}
			lib = strings.Fields(after + " ")[0]
		} else if strings.HasPrefix(line, "/") {
			lib = strings.Fields(line)[0]
		}
		if lib == "" || !strings.HasPrefix(lib, "/") || seen[lib] {
			continue
		}
		seen[lib] = true
		if err := t.copy(lib, lib); err != nil {
			return err
		}
	}
	return nil
}
