// Command bench is `make bench`: it boots the e2e QEMU guest on each
// kernel, one after the other (a second guest would steal the first one's
// CPU), runs bench/guest there to time grdma against iproute2 rdma and
// ibv_devinfo with 1, 16 and 64 rxe devices and the probe's benchmark
// against ibv_rc_pingpong (TestProbeBenchmark), runs the Go benchmarks of
// the decoders and readers, and writes the tables into BENCHMARKS.md
// between its generated-section markers.
//
//	go run ./bench -update BENCHMARKS.md
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/grdma/grdma/bench/result"
	"github.com/grdma/grdma/e2e"
	"github.com/grdma/grdma/e2e/layout"
)

// goBenchPackages hold the Go benchmarks BENCHMARKS.md reports.
var goBenchPackages = []string{"./nldev", "./sysfs", "./gid", "./exporter", "./topo", "./pingmesh"}

func main() {
	kernels := flag.String("kernels", strings.Join(e2e.Labels, ","), "comma list of kernels to boot, one after the other")
	devices := flag.String("devices", "1,16,64", "rxe device counts")
	reps := flag.Int("reps", 40, "timed runs of each command and side")
	budget := flag.Duration("budget", 30*time.Second, "per comparison: stop once it has 5 runs and took this long")
	goBench := flag.Bool("go", true, "also run the Go benchmarks ("+strings.Join(goBenchPackages, " ")+")")
	update := flag.String("update", "", "rewrite the generated sections of this Markdown file (BENCHMARKS.md)")
	timeout := flag.Duration("timeout", 20*time.Minute, "per guest")
	only := flag.String("only", "", `run only this part: "guest" (grdma against rdma and ibv_devinfo in one guest per kernel, without the probe and exporter reports), "pair" (the probe between two hosts against perftest, and the responder's CPU and concurrent peers), "devinfo" (dev info, port show, gid show against ibv_devinfo -v, with system call counts)`)
	before := flag.String("before", "", "with -only devinfo: an older grdma binary whose port show and gid show system calls are counted as \"before\"")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench: ")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bed, err := e2e.NewBed(log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	if err := bed.EnsureTools(ctx); err != nil {
		log.Fatal(err)
	}
	grdma, err := bed.BuildGrdma(ctx)
	if err != nil {
		log.Fatal(err)
	}
	work := filepath.Join(bed.Cache, "bench")
	if err := os.MkdirAll(work, 0o755); err != nil {
		log.Fatal(err)
	}
	driver := filepath.Join(work, "guestbench")
	if err := goCommand(ctx, bed.Repo, "build", "-o", driver, "./bench/guest").Run(); err != nil {
		log.Fatalf("building bench/guest: %v", err)
	}
	// The guest tests hold the probe's benchmark (TestProbeBenchmark).
	guestTests := filepath.Join(work, "guest.test")
	if err := bed.BuildGuestTests(ctx, guestTests); err != nil {
		log.Fatal(err)
	}

	sections := map[string]string{}
	if *only == "devinfo" {
		guestArgs := fmt.Sprintf("-devices %s -reps %d -budget %s -only devinfo", *devices, *reps, *budget)
		files := map[string]string{"/bin/guestbench": driver}
		if *before != "" {
			files["/bin/grdma-before"] = *before
			guestArgs += " -before /bin/grdma-before"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Host: %s, `nproc` %d; guest: QEMU %s, software emulation (TCG, no KVM), 1 vCPU, 1 GiB. "+
			"Ratio = grdma's time / ibv_devinfo -v's: below 1.00 grdma is faster. Reproduce: `make bench BENCHFLAGS='-only devinfo -before OLD_GRDMA'`.\n",
			hostCPU(), runtime.NumCPU(), qemuVersion(ctx))
		for _, label := range strings.Split(*kernels, ",") {
			run, _, _, err := runGuest(ctx, bed, label, &e2e.Guest{Grdma: grdma, TestBinary: guestTests, Files: files}, guestArgs, *timeout, false)
			if err != nil {
				log.Fatalf("%s: %v", label, err)
			}
			raw, _ := json.MarshalIndent(run, "", " ")
			os.WriteFile(filepath.Join(work, label+"-devinfo.json"), raw, 0o644)
			fmt.Fprintf(&b, "\n#### Kernel %s (Debian)\n%s", run.Kernel, run.Markdown())
		}
		fmt.Print(b.String())
		sections["devinfo"] = b.String()
		if *update != "" {
			if err := replaceSections(*update, sections); err != nil {
				log.Fatal(err)
			}
			log.Printf("updated %s", *update)
		}
		return
	}
	if *only != "guest" {
		pair, serve, err := runPairBench(ctx, bed, grdma, guestTests, strings.Split(*kernels, ","), *timeout)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(pair, serve)
		sections["pair"], sections["serve"] = pair, serve
	}
	if *only == "pair" {
		if *update != "" {
			if err := replaceSections(*update, sections); err != nil {
				log.Fatal(err)
			}
			log.Printf("updated %s", *update)
		}
		return
	}

	var guest, probes, exporters strings.Builder
	fmt.Fprintf(&guest, "Host: %s, `nproc` %d; guest: QEMU %s, software emulation (TCG, no KVM), 1 vCPU, 1 GiB.\n",
		hostCPU(), runtime.NumCPU(), qemuVersion(ctx))
	guest.WriteString("Ratio = grdma's time / the reference's: below 1.00 grdma is faster.\n")
	for _, label := range strings.Split(*kernels, ",") {
		guestArgs := fmt.Sprintf("-devices %s -reps %d -budget %s", *devices, *reps, *budget)
		run, probe, exp, err := runGuest(ctx, bed, label, &e2e.Guest{Grdma: grdma, TestBinary: guestTests,
			Files: map[string]string{"/bin/guestbench": driver}}, guestArgs, *timeout, *only != "guest")
		if err != nil {
			log.Fatalf("%s: %v", label, err)
		}
		raw, _ := json.MarshalIndent(run, "", " ")
		os.WriteFile(filepath.Join(work, label+".json"), raw, 0o644)
		fmt.Fprintf(&guest, "\n#### Kernel %s (Debian), reference %s\n%s", run.Kernel, run.Rdma, run.Markdown())
		fmt.Fprintf(&probes, "\nKernel %s:\n\n```\n%s```\n", run.Kernel, probe)
		fmt.Fprintf(&exporters, "\nKernel %s:\n\n```\n%s```\n", run.Kernel, exp)
	}
	fmt.Print(guest.String(), probes.String(), exporters.String())
	sections["guest"] = guest.String()
	if *only != "guest" {
		sections["probe"], sections["exporter"] = probes.String(), exporters.String()
	}

	if *goBench && *only != "guest" {
		table, err := runGoBenchmarks(ctx, bed.Repo)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(table)
		sections["go"] = table
	}
	if *update != "" {
		if err := replaceSections(*update, sections); err != nil {
			log.Fatal(err)
		}
		log.Printf("updated %s", *update)
	}
}

// runGuest boots one kernel with g (grdma, the driver, the guest tests)
// and returns what the driver measured and, with extras, the reports of
// the probe benchmark and of the exporter's scrape latency.
func runGuest(ctx context.Context, bed *e2e.Bed, label string, g *e2e.Guest, guestArgs string, timeout time.Duration, extras bool) (run result.Run, probe, exporter string, err error) {
	k, err := bed.Kernel(ctx, label)
	if err != nil {
		return run, "", "", err
	}
	g.Kernel = k
	g.Run = fmt.Sprintf("/bin/guestbench %s -out /out/bench.json\n", guestArgs)
	if extras {
		g.Run += fmt.Sprintf("PROBE_BENCH_OUT=/out/probe.txt %s -test.run '^TestProbeBenchmark$' -test.timeout 5m >/out/probe.log 2>&1 || cat /out/probe.log\n", layout.GuestTest) +
			fmt.Sprintf("EXPORTER_BENCH_OUT=/out/exporter.txt %s -test.run '^TestExporterScrapeLatency$' -test.timeout 5m >/out/exporter.log 2>&1 || cat /out/exporter.log\n", layout.GuestTest)
	}
	start := time.Now()
	r, err := bed.Boot(ctx, g, e2e.BootOptions{Timeout: timeout})
	if err != nil {
		return run, "", "", err
	}
	defer r.Cleanup()
	if err := r.Err(); err != nil {
		return run, "", "", fmt.Errorf("%v\nscript output:\n%s", err, e2e.Tail(r.Log, 30))
	}
	log.Printf("%s: guest ran %v", label, time.Since(start).Round(time.Second))
	b, err := os.ReadFile(filepath.Join(r.Out(), "bench.json"))
	if err != nil {
		return run, "", "", err
	}
	if !extras {
		return run, "", "", json.Unmarshal(b, &run)
	}
	p, err := os.ReadFile(filepath.Join(r.Out(), "probe.txt"))
	if err != nil {
		p = []byte("the probe benchmark did not run: " + e2e.Tail(r.Log, 10))
	}
	x, err := os.ReadFile(filepath.Join(r.Out(), "exporter.txt"))
	if err != nil {
		x = []byte("the exporter benchmark did not run: " + e2e.Tail(r.Log, 10))
	}
	return run, string(p), string(x), json.Unmarshal(b, &run)
}

// runPairBench boots the two-host pair of each kernel and runs
// TestPairProbeBenchmark (grdma's probe between hosts against perftest,
// interleaved) and TestPairProbeServeBenchmark (the responder's CPU and
// concurrent peers) in it; it returns their tables.
func runPairBench(ctx context.Context, bed *e2e.Bed, grdma, guestTests string, kernels []string, timeout time.Duration) (pair, serve string, err error) {
	var b, sb strings.Builder
	fmt.Fprintf(&b, "Two QEMU guests (TCG, 1 vCPU each) joined by one virtio-net link (a TCP connection on 127.0.0.1 that the bed makes with Nagle off), rxe0 on eth0, "+
		"server on A and client on B for both tools, IPv4 GID; %d runs of each tool for bw, %d for lat, interleaved; medians, "+
		"and the median of the run-by-run ratios (each grdma run over the perftest run after it). "+
		"bw: message rate (Mmsg/s: at one size, the bandwidth ratio; perftest's MsgRate[Mpps]); lat: median latency "+
		"(perftest's t_typical; one way for write and send, the whole READ for read, in both). "+
		"Reproduce: `make bench BENCHFLAGS='-only pair'`.\n", 5, 11)
	fmt.Fprintf(&sb, "The same pair of guests, right after the table above: `grdma -j probe rxe0 serve peers 8` on A, "+
		"clients on B; CPU time of the responder's process (utime+stime, 10 ms ticks); \"polling\" is GRDMA_PROBE_POLL=1, "+
		"every wait for a completion polled (the busy-polling baseline). Reproduce: `make bench BENCHFLAGS='-only pair'`.\n")
	for _, label := range kernels {
		k, err := bed.Kernel(ctx, label)
		if err != nil {
			return "", "", err
		}
		start := time.Now()
		// A guest kernel that fails (6.12's rdma_rxe under load) ends a
		// pair without its report: that kernel's pair runs once more.
		var report, served []byte
		for try := 1; ; try++ {
			report, served, err = pairReports(ctx, bed, k, grdma, guestTests, timeout)
			if err == nil {
				break
			}
			if try == 2 {
				return "", "", fmt.Errorf("%s pair: %v", label, err)
			}
			log.Printf("%s pair: %v\nbench: %s pair: once more", label, err, label)
		}
		log.Printf("%s: pair benchmarks ran %v:\n%s\n%s", label, time.Since(start).Round(time.Second), report, served)
		kernel, table, _ := strings.Cut(string(report), "\n")
		fmt.Fprintf(&b, "\n#### Kernel %s (Debian)\n\n%s", strings.TrimPrefix(kernel, "kernel "), table)
		kernel, table, _ = strings.Cut(string(served), "\n")
		fmt.Fprintf(&sb, "\n#### Kernel %s (Debian)\n\n%s", strings.TrimPrefix(kernel, "kernel "), table)
	}
	return b.String(), sb.String(), nil
}

// pairReports runs the pair benchmarks on one booted pair of kernel k
// and returns their reports.
func pairReports(ctx context.Context, bed *e2e.Bed, k *e2e.Kernel, grdma, guestTests string, timeout time.Duration) (report, served []byte, err error) {
	r, err := bed.RunPairTests(ctx, &e2e.GuestTestRun{Kernel: k, Grdma: grdma, TestBinary: guestTests,
		Run: "ProbeBenchmark|ProbeServeBenchmark", Env: []string{"PAIR_BENCH_OUT=/out/pair.txt", "SERVE_BENCH_OUT=/out/serve.txt"},
		Timeout: timeout}, nil)
	if r != nil {
		defer r.Cleanup()
	}
	if err != nil {
		return nil, nil, err
	}
	report, rerr := os.ReadFile(filepath.Join(r.B.Out(), "pair.txt"))
	served, serr := os.ReadFile(filepath.Join(r.B.Out(), "serve.txt"))
	if rerr != nil || serr != nil {
		return nil, nil, fmt.Errorf("no report (%v):\n%s", errors.Join(rerr, serr), e2e.Tail(r.B.Log, 40))
	}
	return report, served, nil
}

// runGoBenchmarks runs the Go benchmarks once each (-benchtime 1s) and
// returns them as a Markdown table.
func runGoBenchmarks(ctx context.Context, repo string) (string, error) {
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1"}, goBenchPackages...)
	cmd := goCommand(ctx, repo, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n`go test -run '^$' -bench . -benchmem %s` on the host (%s):\n\n", strings.Join(goBenchPackages, " "), hostCPU())
	b.WriteString("| package | benchmark | time/op | B/op | allocs/op | other |\n|---|---|---:|---:|---:|---|\n")
	pkg := ""
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "pkg:":
			pkg = strings.TrimPrefix(f[1], "github.com/grdma/grdma/")
		case len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark"):
			// Name, iterations, then value-unit pairs.
			values := map[string]string{}
			var other []string
			for i := 2; i+1 < len(f); i += 2 {
				values[f[i+1]] = f[i]
				if f[i+1] != "ns/op" && f[i+1] != "B/op" && f[i+1] != "allocs/op" {
					other = append(other, f[i]+" "+f[i+1])
				}
			}
			name := strings.TrimSuffix(f[0], fmt.Sprintf("-%d", runtime.GOMAXPROCS(0)))
			fmt.Fprintf(&b, "| %s | %s | %s ns | %s | %s | %s |\n", pkg, name, values["ns/op"], values["B/op"], values["allocs/op"], strings.Join(other, ", "))
		case len(f) >= 3 && f[0] == "---" && f[1] == "SKIP:":
			fmt.Fprintf(&b, "| %s | %s | skipped: no RDMA device on the host | | | |\n", pkg, f[2])
		}
	}
	return b.String(), nil
}

// goCommand is a go command in the repository, building static binaries.
func goCommand(ctx context.Context, repo string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	return cmd
}

// hostCPU is the model name of the host's first CPU.
func hostCPU() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func qemuVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "qemu-system-x86_64", "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	f := strings.Fields(string(out))
	if len(f) >= 4 {
		return f[3]
	}
	return strings.TrimSpace(string(out))
}

// replaceSections rewrites, in a Markdown file, the text between
// "<!-- bench:NAME begin -->" and "<!-- bench:NAME end -->" for each section.
func replaceSections(file string, sections map[string]string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	text := string(b)
	for name, body := range sections {
		begin, end := "<!-- bench:"+name+" begin -->\n", "<!-- bench:"+name+" end -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			return fmt.Errorf("%s: no %q ... %q markers", file, strings.TrimSpace(begin), end)
		}
		text = text[:i+len(begin)] + body + "\n" + text[j:]
	}
	return os.WriteFile(file, []byte(text), 0o644)
}
