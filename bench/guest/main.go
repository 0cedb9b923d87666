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
		for _, c := range comparisons(hasRes) {
			run.Results = append(run.Results, measure(n, c, *reps, *budget))
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
	return append(cs, result.Comparison{Name: "port show + gid show vs ibv_devinfo -v",
		Grdma: [][]string{{g, "port", "show"}, {g, "gid", "show"}}, Ref: [][]string{{layout.IbvDevinfo, "-v"}}})
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
