package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Labels are the kernels every scenario runs on, as tests and guestrun's
// -kernel name them.
var Labels = []string{"6.1", "6.12"}

// Kernel is one Debian kernel package unpacked (never installed) in the cache.
type Kernel struct {
	Label   string // "6.1" or "6.12"
	Package string // e.g. linux-image-6.1.0-56-amd64
	Version string // the package's Debian version
	Release string // uname -r, the lib/modules directory name
	Root    string // the dpkg -x tree, with depmod run on it
}

// Vmlinuz is the kernel image to boot.
func (k *Kernel) Vmlinuz() string { return filepath.Join(k.Root, "boot", "vmlinuz-"+k.Release) }

// ModulesDir is lib/modules/RELEASE inside the unpacked tree.
func (k *Kernel) ModulesDir() string { return filepath.Join(k.Root, "lib", "modules", k.Release) }

func (k *Kernel) String() string { return k.Package + " " + k.Version }

// Kernel fetches (or finds in the cache) the kernel for a label: 6.1 is the
// one linux-image-amd64 depends on, 6.12 the newest
// linux-image-6.12.*+deb12-amd64-unsigned.
func (b *Bed) Kernel(ctx context.Context, label string) (*Kernel, error) {
	unlock, err := b.lock("kernel-" + label)
	if err != nil {
		return nil, err
	}
	defer unlock()
	pkg, ver, err := b.resolveKernel(ctx, label)
	if err != nil {
		// Offline, or the package lists are broken: use a cached kernel.
		if k := b.cachedKernel(label); k != nil {
			b.logf("e2e: %v; using cached %s", err, k)
			return k, nil
		}
		return nil, err
	}
	k := &Kernel{Label: label, Package: pkg, Version: ver,
		Root: filepath.Join(b.Cache, "kernels", pkg+"_"+fileSafe(ver))}
	if rel, err := os.ReadFile(filepath.Join(k.Root, ".e2e-ready")); err == nil {
		k.Release = strings.TrimSpace(string(rel))
		return k, nil
	}
	deb, err := b.download(ctx, pkg, ver)
	if err != nil {
		return nil, err
	}
	b.logf("e2e: unpacking %s", filepath.Base(deb))
	if err := b.unpack(ctx, deb, k.Root); err != nil {
		return nil, err
	}
	if err := k.findRelease(); err != nil {
		return nil, err
	}
	if _, err := b.run(ctx, "", nil, findTool("depmod"), "-b", k.Root, k.Release); err != nil {
		return nil, err
	}
	if _, err := os.Stat(k.Vmlinuz()); err != nil {
		return nil, fmt.Errorf("e2e: %s has no kernel image: %v", pkg, err)
	}
	if err := os.WriteFile(filepath.Join(k.Root, ".e2e-ready"), []byte(k.Release+"\n"), 0o644); err != nil {
		return nil, err
	}
	b.prune(label, k)
	return k, nil
}

// prune drops older versions of a label's kernel from the cache, which
// would otherwise grow by ~350 MB with every Debian kernel update.
func (b *Bed) prune(label string, keep *Kernel) {
	old, _ := filepath.Glob(filepath.Join(b.Cache, "kernels", "linux-image-"+label+".*"))
	debs, _ := filepath.Glob(filepath.Join(b.Cache, "debs", "linux-image-"+label+".*.deb"))
	for _, p := range append(old, debs...) {
		if p != keep.Root && !strings.HasPrefix(filepath.Base(p), keep.Package+"_"+fileSafe(keep.Version)) {
			b.logf("e2e: removing old %s", filepath.Base(p))
			os.RemoveAll(p)
		}
	}
}

// findRelease finds lib/modules/RELEASE, linking lib to usr/lib for
// packages that ship modules under /usr (depmod -b wants ROOT/lib/modules).
func (k *Kernel) findRelease() error {
	for _, dir := range []string{"lib/modules", "usr/lib/modules"} {
		ents, _ := os.ReadDir(filepath.Join(k.Root, dir))
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			k.Release = e.Name()
			if dir == "usr/lib/modules" {
				if _, err := os.Lstat(filepath.Join(k.Root, "lib")); os.IsNotExist(err) {
					if err := os.Symlink("usr/lib", filepath.Join(k.Root, "lib")); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	return fmt.Errorf("e2e: no lib/modules in %s", k.Root)
}

// cachedKernel returns the newest ready kernel for label in the cache.
func (b *Bed) cachedKernel(label string) *Kernel {
	dirs, _ := filepath.Glob(filepath.Join(b.Cache, "kernels", "linux-image-"+label+".*"))
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		rel, err := os.ReadFile(filepath.Join(dirs[i], ".e2e-ready"))
		if err != nil {
			continue
		}
		pkg, ver, _ := strings.Cut(filepath.Base(dirs[i]), "_")
		return &Kernel{Label: label, Package: pkg, Version: ver,
			Release: strings.TrimSpace(string(rel)), Root: dirs[i]}
	}
	return nil
}

// resolveKernel asks apt which package and version a label means today,
// running apt-get update once if the package lists do not know it.
func (b *Bed) resolveKernel(ctx context.Context, label string) (pkg, ver string, err error) {
	for try := 0; try < 2; try++ {
		if try == 1 {
			if err := b.aptUpdate(ctx); err != nil {
				return "", "", err
			}
		}
		pkg, err = b.kernelPackage(ctx, label)
		if err != nil {
			continue
		}
		ver, err = b.candidate(ctx, pkg)
		if err == nil {
			return pkg, ver, nil
		}
	}
	return "", "", err
}

func (b *Bed) kernelPackage(ctx context.Context, label string) (string, error) {
	switch label {
	case "6.1":
		out, err := b.run(ctx, "", nil, "apt-cache", "depends", "linux-image-amd64")
		if err != nil {
			return "", err
		}
		for _, f := range strings.Fields(out) {
			if strings.HasPrefix(f, "linux-image-6.1.") && strings.HasSuffix(f, "-amd64") {
				return f, nil
			}
		}
		return "", fmt.Errorf("e2e: linux-image-amd64 does not depend on a 6.1 kernel:\n%s", out)
	case "6.12":
		out, err := b.run(ctx, "", nil, "apt-cache", "search", "--names-only",
			`^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$`)
		if err != nil {
			return "", err
		}
		best, bestPatch := "", -1
		for _, line := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(line, " ")
			patch, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "linux-image-6.12."), "+deb12-amd64-unsigned"))
			if err == nil && patch > bestPatch {
				best, bestPatch = name, patch
			}
		}
		if best == "" {
			return "", fmt.Errorf("e2e: apt-cache finds no linux-image-6.12.*+deb12-amd64-unsigned")
		}
		return best, nil
	}
	return "", fmt.Errorf("e2e: unknown kernel %q (want one of %v)", label, Labels)
}

// candidate returns the version apt would download for pkg.
func (b *Bed) candidate(ctx context.Context, pkg string) (string, error) {
	out, err := b.run(ctx, "", nil, "apt-cache", "policy", pkg)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			v = strings.TrimSpace(v)
			if v != "" && v != "(none)" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("e2e: apt has no candidate for %s", pkg)
}

// download fetches pkg=ver with apt-get download into the cache (once) and
// returns the .deb's path. An empty ver means the candidate version.
func (b *Bed) download(ctx context.Context, pkg, ver string) (string, error) {
	dir := filepath.Join(b.Cache, "debs")
	if ver == "" {
		v, err := b.candidate(ctx, pkg)
		if err != nil {
			if err := b.aptUpdate(ctx); err != nil {
				return "", err
			}
			if v, err = b.candidate(ctx, pkg); err != nil {
				return "", err
			}
		}
		ver = v
	}
	deb := filepath.Join(dir, pkg+"_"+fileSafe(ver)+".deb")
	if _, err := os.Stat(deb); err == nil {
		return deb, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "dl-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	b.logf("e2e: apt-get download %s=%s", pkg, ver)
	if _, err := b.run(ctx, tmp, aptEnv, "apt-get", "download", pkg+"="+ver); err != nil {
		// The mirror may have moved on: refresh the lists once and retry.
		if uerr := b.aptUpdate(ctx); uerr != nil {
			return "", err
		}
		if _, err := b.run(ctx, tmp, aptEnv, "apt-get", "download", pkg+"="+ver); err != nil {
			return "", err
		}
	}
	got, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(got) != 1 {
		return "", fmt.Errorf("e2e: apt-get download %s left %d .deb files", pkg, len(got))
	}
	return deb, os.Rename(got[0], deb)
}

// unpack runs dpkg -x into a fresh directory, replacing dir atomically.
func (b *Bed) unpack(ctx context.Context, deb, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := b.run(ctx, "", nil, "dpkg", "-x", deb, tmp); err != nil {
		return err
	}
	os.RemoveAll(dir)
	return os.Rename(tmp, dir)
}

// fileSafe turns a Debian version into a file name part (epochs have ':').
func fileSafe(v string) string { return strings.ReplaceAll(v, ":", "%3a") }
