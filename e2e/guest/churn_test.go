//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// churnSlots is how many veth netdevs the churn puts devices on: device
// number N always sits on vethN, named rxeN or, renamed, crnN.
const churnSlots = 8

// churnDuration is how long devices churn: $E2E_CHURN (a Go duration),
// else the 60 s.
func churnDuration(t *testing.T) time.Duration {
	d := 60 * time.Second
	if s := os.Getenv("E2E_CHURN"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("E2E_CHURN=%q: %v", s, err)
		}
	}
	return d
}

// churnDevice matches the names the churn gives; its group is N.
var churnDevice = regexp.MustCompile(`^(?:rxe|crn)([0-9])$`)

// TestChurn: while one loop adds, renames and deletes rxe devices, readers
// run every listing command without pause. No run may crash (exit codes 0
// or 1, never a Go panic), and every listing that succeeds must be valid
// JSON describing one consistent state: no half records, no duplicates,
// one name per device index, each device on its own netdev. A listing must
// not fail because a device vanished or a dump was interrupted: vanished
// devices are skipped and dumps retried.
func TestChurn(t *testing.T) {
	cleanRDMA(t)
	vethPairs(t, churnSlots)
	readers := [][]string{{"-j", "dev"}, {"-j", "link"}, {"-j", "port"}, {"-j", "gid"}, {"-j", "stat", "show"}}
	if strings.Contains(must(t, grdma(), "--help").stdout, "\n  res ") {
		readers = append(readers, []string{"-j", "res"}, []string{"-j", "res", "show", "qp"})
	} else {
		t.Log("this grdma has no res command: res is not read")
	}

	deadline := time.Now().Add(churnDuration(t))
	var tally churnTally
	var wg sync.WaitGroup
	wg.Go(func() { churnDevices(deadline, &tally) })
	for _, args := range readers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				r := run(grdma(), args...)
				tally.add(strings.Join(args, " "), r, checkListing(args, r))
			}
		})
	}
	wg.Wait()
	t.Log(tally.summary())
	for _, e := range tally.problems {
		t.Error(e)
	}
	if tally.writes == 0 || tally.reads == 0 {
		t.Errorf("nothing ran: %d writes, %d reads", tally.writes, tally.reads)
	}
}

// churnDevices adds, renames and deletes devices until the deadline, with
// grdma itself: with one writer, every change must succeed.
func churnDevices(deadline time.Time, tally *churnTally) {
	names := make([]string, churnSlots) // "" = no device on vethN
	rng := rand.New(rand.NewPCG(1, 2))
	for time.Now().Before(deadline) {
		n := rng.IntN(churnSlots)
		var args []string
		var newName string
		switch {
		case names[n] == "":
			newName = fmt.Sprintf("rxe%d", n)
			args = []string{"link", "add", newName, "type", "rxe", "netdev", fmt.Sprintf("veth%d", n)}
		case rng.IntN(3) == 0:
			newName = ""
			args = []string{"link", "delete", names[n]}
		default:
			newName = "crn" + strconv.Itoa(n)
			if names[n] == newName {
				newName = "rxe" + strconv.Itoa(n)
			}
			args = []string{"dev", "set", names[n], "name", newName}
		}
		r := run(grdma(), args...)
		tally.write(r)
		if r.code == 0 {
			names[n] = newName
		}
	}
}

// churnTally counts what the readers and the writer saw.
type churnTally struct {
	mu                      sync.Mutex
	reads, writes           int
	runs, failures          map[string]int // per command; failures per message
	problems                []string       // crashes and inconsistencies
	renames, adds, deletes  int
	failedWrites, emptyRead int
}

func (c *churnTally) add(cmd string, r result, problem string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs, c.failures = map[string]int{}, map[string]int{}
	}
	c.reads++
	c.runs[cmd]++
	if r.code == 1 {
		c.failures[cmd+": "+churnMessage(r.stderr)]++
	}
	if r.code == 0 && strings.TrimSpace(r.stdout) == "[]" {
		c.emptyRead++
	}
	if problem != "" && len(c.problems) < 20 {
		c.problems = append(c.problems, problem)
	}
}

func (c *churnTally) write(r result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	switch {
	case r.code != 0:
		c.failedWrites++
		if len(c.problems) < 20 {
			c.problems = append(c.problems, "a change failed (it is the only writer):\n"+r.String())
		}
	case strings.Contains(r.cmd, " link add "):
		c.adds++
	case strings.Contains(r.cmd, " link delete "):
		c.deletes++
	default:
		c.renames++
	}
}

func (c *churnTally) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writes: %d (%d adds, %d renames, %d deletes, %d failed)\n", c.writes, c.adds, c.renames, c.deletes, c.failedWrites)
	fmt.Fprintf(&b, "reads: %d (%d listed no device)\n", c.reads, c.emptyRead)
	for _, cmd := range sortedKeys(c.runs) {
		fmt.Fprintf(&b, "  grdma %s: %d runs\n", cmd, c.runs[cmd])
	}
	if len(c.failures) == 0 {
		b.WriteString("failed reads: none\n")
	}
	for _, msg := range sortedKeys(c.failures) {
		fmt.Fprintf(&b, "failed read ×%d: grdma %s\n", c.failures[msg], msg)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// churnMessage is a failure's first stderr line with numbers masked, so
// that the same failure on different devices counts once.
func churnMessage(stderr string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	return digits.ReplaceAllString(line, "N")
}

var digits = regexp.MustCompile(`[0-9]+`)

// checkListing returns what is wrong with one reader's run, or "".
func checkListing(args []string, r result) string {
	switch {
	case r.code != 0 && r.code != 1,
		strings.Contains(r.stderr, "panic:"), strings.Contains(r.stderr, "fatal error:"), strings.Contains(r.stderr, "goroutine "):
		return "crash:\n" + r.String()
	case r.code == 1 && !strings.HasPrefix(r.stderr, "grdma: "):
		return "a failure without a grdma: message:\n" + r.String()
	case r.code == 1:
		return "a listing failed while devices churned (vanished devices must be skipped, interrupted dumps retried):\n" + r.String()
	}
	var records []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &records); err != nil {
		return fmt.Sprintf("invalid JSON (%v):\n%s", err, r)
	}
	if msg := checkRecords(strings.Join(args[1:], " "), records); msg != "" {
		return msg + ":\n" + r.String()
	}
	return ""
}

// listingShape says what every record of a listing must have and what
// identifies it.
type listingShape struct {
	required []string // fields every record carries
	key      []string // fields that identify a record: no two alike
}

var listingShapes = map[string]listingShape{
	"dev":         {required: []string{"ifindex", "ifname", "node_type", "node_guid", "sys_image_guid"}, key: []string{"ifindex"}},
	"link":        {required: []string{"ifindex", "ifname", "port", "state", "physical_state", "netdev", "netdev_index"}, key: []string{"ifindex", "port"}},
	"port":        {required: []string{"ifindex", "ifname", "port", "state", "link_layer", "active_mtu", "netdev"}, key: []string{"ifindex", "port"}},
	"gid":         {required: []string{"ifname", "port", "index", "gid", "type", "netdev"}, key: []string{"ifname", "port", "index"}},
	"stat show":   {required: []string{"ifname", "port"}, key: []string{"ifname", "port"}},
	"res":         {required: []string{"ifindex", "ifname", "qp", "pd", "cq", "mr"}, key: []string{"ifindex"}},
	"res show qp": {required: []string{"ifindex", "ifname", "lqpn", "type", "state"}, key: []string{"ifindex", "lqpn"}},
}

// checkRecords checks one listing's records against its shape and against
// the churn's invariants: names are ones the churn gives, a device index
// has one name and a name one index, and a device's netdev is its own.
func checkRecords(what string, records []map[string]any) string {
	shape := listingShapes[what]
	seen := map[string]bool{}
	nameOf, indexOf := map[float64]string{}, map[string]float64{}
	for i, rec := range records {
		for _, f := range shape.required {
			if _, ok := rec[f]; !ok {
				return fmt.Sprintf("record %d has no %q (a half record)", i, f)
			}
		}
		key := ""
		for _, f := range shape.key {
			key += fmt.Sprint(rec[f]) + "/"
		}
		if seen[key] {
			return fmt.Sprintf("record %d duplicates %s %s", i, strings.Join(shape.key, "/"), key)
		}
		seen[key] = true
		name, _ := rec["ifname"].(string)
		m := churnDevice.FindStringSubmatch(name)
		if m == nil {
			return fmt.Sprintf("record %d names device %q, which the churn never made", i, name)
		}
		if netdev, ok := rec["netdev"]; ok && netdev != "veth"+m[1] {
			return fmt.Sprintf("record %d puts %s on netdev %v, not veth%s", i, name, netdev, m[1])
		}
		index, hasIndex := rec["ifindex"].(float64)
		if !hasIndex {
			continue
		}
		if other, ok := nameOf[index]; ok && other != name {
			return fmt.Sprintf("device index %v is named both %s and %s", index, other, name)
		}
		if other, ok := indexOf[name]; ok && other != index {
			return fmt.Sprintf("device %s has both index %v and %v", name, other, index)
		}
		nameOf[index], indexOf[name] = name, index
	}
	return ""
}
