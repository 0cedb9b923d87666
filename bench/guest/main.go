// Command guestbench runs inside the e2e QEMU guest (see BENCHMARKS.md):
// it makes 1, 16 and 64 rxe devices and times grdma against iproute2 rdma
// and ibv_devinfo on the same state, interleaving the two sides rep by rep
// so that both see the same conditions, and writes every duration as JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/bench/result"
	"github.com/grdma/grdma/e2e/layout"
)

func main() {
	counts := flag.String("devices", "1,16,64", "comma list of rxe device counts, ascending")
	reps := flag.Int("reps", 40, "timed runs of each command per device count")
	budget := flag.Duration("budget", 30*time.Second, "stop a comparison after this long once it has 5 runs")
	out := flag.String("out", layout.Out+"/bench.json", "where to write the results")
	only := flag.String("only", "", `time only this group: "devinfo" (dev info, port show, gid show against ibv_devinfo -v, with system call counts)`)
	before := flag.String("before", "", "an older grdma whose port show and gid show system calls are counted too (the \"before\" of BENCHMARKS.md)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("guestbench: ")

	run := result.Run{
		Kernel: strings.TrimSpace(mustRun("/bin/uname", "-r")),
		Rdma:   strings.TrimSpace(mustRun(layout.Rdma, "-V")),
		Reps:   *reps,
	}
	hasRes := strings.Contains(mustRun(layout.Grdma, "--help"), "\n  res ")
	made := 0
	for _, field := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(field)
		if err != nil || n < made {
			log.Fatalf("bad -devices %q", *counts)
		}
		for ; made < n; made++ {
			addDevice(made)
		}
		waitActive(n)
		cs := comparisons(hasRes)
		if *only == "devinfo" {
			cs = devinfoComparisons()
		}
		for _, c := range cs {
			run.Results = append(run.Results, measure(n, c, *reps, *budget))
		}
		if *only == "devinfo" {
			run.Syscalls = append(run.Syscalls, countSyscalls(n, *before)...)
		}
		log.Printf("%d devices done", n)
	}
	if !hasRes {
		run.Notes = append(run.Notes, "grdma has no res command in this build: res show qp not measured")
	}
	b, err := json.MarshalIndent(run, "", " ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

// comparisons are the command pairs to time: grdma's side, the reference's.
func comparisons(hasRes bool) []result.Comparison {
	g, r := layout.Grdma, layout.Rdma
	cs := []result.Comparison{
		{Name: "start-up only (-V)", Grdma: [][]string{{g, "-V"}}, Ref: [][]string{{r, "-V"}}},
		{Name: "-j dev", Grdma: [][]string{{g, "-j", "dev"}}, Ref: [][]string{{r, "-j", "dev"}}},
		{Name: "-j link", Grdma: [][]string{{g, "-j", "link"}}, Ref: [][]string{{r, "-j", "link"}}},
		{Name: "-j stat show", Grdma: [][]string{{g, "-j", "stat", "show"}}, Ref: [][]string{{r, "-j", "stat", "show"}}},
	}
	if hasRes {
		cs = append(cs, result.Comparison{Name: "-j res show qp",
			Grdma: [][]string{{g, "-j", "res", "show", "qp"}}, Ref: [][]string{{r, "-j", "res", "show", "qp"}}})
	}
	cs = append(cs, result.Comparison{Name: "port show + gid show vs ibv_devinfo -v",
		Grdma: [][]string{{g, "port", "show"}, {g, "gid", "show"}}, Ref: [][]string{{layout.IbvDevinfo, "-v"}}})
	if strings.Contains(mustRun(g, "dev", "help"), "dev info") {
		cs = append(cs, devinfoComparisons()...)
	}
	return cs
}

// devinfoComparisons time `grdma dev info` and the commands that share its
// path against ibv_devinfo -v, which shows the same (issue 14).
func devinfoComparisons() []result.Comparison {
	g, ref := layout.Grdma, [][]string{{layout.IbvDevinfo, "-v"}}
	return []result.Comparison{
		{Name: "-j dev info vs ibv_devinfo -v", Grdma: [][]string{{g, "-j", "dev", "info"}}, Ref: ref},
		{Name: "-j port show vs ibv_devinfo -v", Grdma: [][]string{{g, "-j", "port", "show"}}, Ref: ref},
		{Name: "-j gid show vs ibv_devinfo -v", Grdma: [][]string{{g, "-j", "gid", "show"}}, Ref: ref},
	}
}

// countSyscalls counts the system calls of one run of each command with
// strace -f -c; before, when set, is an older grdma counted alongside.
func countSyscalls(devices int, before string) []result.Syscalls {
	g := layout.Grdma
	cmds := []struct {
		name string
		argv []string
	}{
		{"grdma -j dev info", []string{g, "-j", "dev", "info"}},
		{"grdma -j port show", []string{g, "-j", "port", "show"}},
		{"grdma -j gid show", []string{g, "-j", "gid", "show"}},
		{"ibv_devinfo -v", []string{layout.IbvDevinfo, "-v"}},
	}
	if before != "" {
		cmds = append(cmds, struct {
			name string
			argv []string
		}{"before: grdma -j port show", []string{before, "-j", "port", "show"}}, struct {
			name string
			argv []string
		}{"before: grdma -j gid show", []string{before, "-j", "gid", "show"}})
	}
	var out []result.Syscalls
	for _, c := range cmds {
		s := result.Syscalls{Devices: devices, Name: c.name}
		s.Calls, s.Error = straceTotal(c.argv)
		out = append(out, s)
	}
	return out
}

// straceTotal runs argv under strace -f -c and returns the total number
// of calls from its summary's last line ("100.00 ... CALLS [ERRORS] total").
func straceTotal(argv []string) (int, string) {
	const summary = "/tmp/strace-summary.txt"
	cmd := exec.Command(layout.Strace, append([]string{"-f", "-c", "-o", summary}, argv...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		return 0, err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 5 || f[len(f)-1] != "total" {
		return 0, "no total in strace's summary"
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return 0, err.Error()
	}
	return n, ""
}

// minReps is the fewest runs a comparison gets, whatever its budget.
const minReps = 5

// measure runs both sides of c reps times, alternating which goes first;
// a slow comparison stops once its budget is spent.
func measure(devices int, c result.Comparison, reps int, budget time.Duration) result.Result {
	res := result.Result{Devices: devices, Comparison: c}
	// One untimed run of each: it must work, and it warms the page cache.
	for _, side := range [][][]string{c.Grdma, c.Ref} {
		if _, err := timeAll(side); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	start := time.Now()
	for i := 0; i < reps && (i < minReps || time.Since(start) < budget); i++ {
		first, second := &res.GrdmaNS, &res.RefNS
		a, b := c.Grdma, c.Ref
		if i%2 == 1 {
			first, second, a, b = second, first, b, a
		}
		for _, s := range []struct {
			cmds [][]string
			into *[]int64
		}{{a, first}, {b, second}} {
			d, err := timeAll(s.cmds)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			*s.into = append(*s.into, d.Nanoseconds())
		}
	}
	return res
}

// timeAll runs the commands one after the other, output to /dev/null, and
// returns their total wall time.
func timeAll(cmds [][]string) (time.Duration, error) {
	var total time.Duration
	for _, argv := range cmds {
		cmd := exec.Command(argv[0], argv[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		total += time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, stderr.String())
		}
	}
	return total, nil
}

// addDevice makes rxeN on vethN, creating the veth pair it needs.
func addDevice(i int) {
	netdev := fmt.Sprintf("veth%d", i)
	if _, err := os.Stat("/sys/class/net/" + netdev); err != nil {
		peer := fmt.Sprintf("veth%d", i+1)
		mustRun(layout.IP, "link", "add", netdev, "type", "veth", "peer", "name", peer)
		mustRun(layout.IP, "link", "set", netdev, "up")
		mustRun(layout.IP, "link", "set", peer, "up")
	}
	mustRun(layout.Rdma, "link", "add", fmt.Sprintf("rxe%d", i), "type", "rxe", "netdev", netdev)
}

// waitActive waits until rdma shows n ACTIVE ports, so that every side
// sees the same settled state.
func waitActive(n int) {
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if strings.Count(mustRun(layout.Rdma, "link"), "state ACTIVE") == n {
			return
		}
	}
	log.Fatalf("the %d rxe ports did not all become ACTIVE:\n%s", n, mustRun(layout.Rdma, "link"))
}

func mustRun(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		log.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
