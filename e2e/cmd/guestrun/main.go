// Command guestrun boots the e2e QEMU guest on a Debian kernel, runs a
// shell script in it and copies what the script wrote under /out back to
// the host: the way to record real kernel data for unit-test fixtures.
//
//	go run ./e2e/cmd/guestrun -kernel 6.1 -script capture.sh -out testdata/6.1
//
// The guest has rdma_rxe loaded, veth0/veth1 up, /bin/grdma (freshly built),
// iproute2 ip and rdma, ibv_devinfo, ibv_rc_pingpong and strace. -qemu-arg
// adds QEMU arguments and -append kernel parameters; -topology boots one of
// the PCIe layouts of e2e.Topologies.
// See e2e/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/grdma/grdma/e2e"
)

type fileFlags map[string]string

func (f fileFlags) String() string { return fmt.Sprint(map[string]string(f)) }

func (f fileFlags) Set(v string) error {
	host, guest, ok := strings.Cut(v, ":")
	if !ok || host == "" || !strings.HasPrefix(guest, "/") {
		return fmt.Errorf("want HOSTPATH:/GUESTPATH, got %q", v)
	}
	f[guest] = host
	return nil
}

func main() {
	kernels := flag.String("kernel", "6.1", "kernel: 6.1, 6.12, or a comma list / all (then -out gets one subdirectory per kernel)")
	script := flag.String("script", "", "shell script to run in the guest (busybox sh)")
	out := flag.String("out", "", "host directory receiving what the script wrote under /out")
	files := fileFlags{}
	flag.Var(files, "file", "HOSTPATH:GUESTPATH: copy a host file into the guest (repeatable)")
	verbose := flag.Bool("v", false, "print the guest console to stderr as it runs")
	timeout := flag.Duration("timeout", 5*time.Minute, "kill the guest after this long")
	grdmaPath := flag.String("grdma", "", "grdma binary to install as /bin/grdma (default: `make build`'s bin/grdma)")
	var qemuArgs []string
	flag.Func("qemu-arg", "one more QEMU argument, e.g. -qemu-arg=-device -qemu-arg=pcie-root-port,id=rp1 (repeatable)", func(v string) error {
		qemuArgs = append(qemuArgs, v)
		return nil
	})
	kernelArgs := flag.String("append", "", "more kernel command-line parameters")
	topology := flag.String("topology", "", "boot with a named PCIe layout (e2e.Topologies: switch, switch-iommu, gpu-only, nic-only)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("guestrun: ")
	if *script == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *topology != "" {
		t, err := e2e.TopologyNamed(*topology)
		if err != nil {
			log.Fatal(err)
		}
		qemuArgs = append(t.QEMUArgs, qemuArgs...)
		*kernelArgs = strings.TrimSpace(t.KernelArgs + " " + *kernelArgs)
	}
	labels := strings.Split(*kernels, ",")
	if *kernels == "all" {
		labels = e2e.Labels
	}
	body, err := os.ReadFile(*script)
	if err != nil {
		log.Fatal(err)
	}
	for guest, host := range files {
		abs, err := filepath.Abs(host)
		if err != nil {
			log.Fatal(err)
		}
		files[guest] = abs
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logf := func(format string, args ...any) {}
	if *verbose {
		logf = log.Printf
	}
	bed, err := e2e.NewBed(logf)
	if err != nil {
		log.Fatal(err)
	}
	if err := bed.EnsureTools(ctx); err != nil {
		log.Fatal(err)
	}
	grdma := *grdmaPath
	if grdma == "" {
		if grdma, err = bed.BuildGrdma(ctx); err != nil {
			log.Printf("%v\n(continuing without /bin/grdma)", err)
		}
	}

	consoles := e2e.NewConsoles(os.Stderr)
	results := make([]*e2e.Result, len(labels))
	errs := make([]error, len(labels))
	var wg sync.WaitGroup
	for i, label := range labels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := bed.Kernel(ctx, label)
			if err != nil {
				errs[i] = err
				return
			}
			g := &e2e.Guest{Kernel: k, Grdma: grdma, Run: string(body), Files: files, Verbose: *verbose}
			opt := e2e.BootOptions{Timeout: *timeout, QEMUArgs: qemuArgs, KernelArgs: *kernelArgs}
			if *verbose {
				prefix := ""
				if len(labels) > 1 {
					prefix = "[" + label + "] "
				}
				opt.Console = consoles.Prefixed(prefix)
			}
			results[i], errs[i] = bed.Boot(ctx, g, opt)
		}()
	}
	wg.Wait()

	status := 0
	for i, label := range labels {
		r := results[i]
		if errs[i] != nil {
			log.Printf("%s: %v", label, errs[i])
			status = 1
		}
		if r == nil {
			continue
		}
		if !*verbose && r.Log != "" {
			// The script's own output (with -v it was on the console).
			fmt.Fprintf(os.Stderr, "--- %s: script output\n%s", label, r.Log)
		}
		dst := *out
		if len(labels) > 1 {
			dst = filepath.Join(*out, label)
		}
		err := copyTree(dst, r.Out())
		r.Cleanup()
		if err != nil {
			log.Printf("%s: copying /out: %v", label, err)
			status = 1
		}
		if err := r.Err(); err != nil {
			log.Printf("%v", err)
			status = 1
		}
		log.Printf("%s (%s): script exit %d; boot %v, script %v; /out copied to %s",
			label, r.Kernel, r.RC, r.Boot.Round(100*time.Millisecond), r.Run.Round(100*time.Millisecond), dst)
	}
	os.Exit(status)
}

// copyTree copies the files under src into dst, replacing existing ones,
// so that a capture can be re-run into the same directory.
func copyTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
