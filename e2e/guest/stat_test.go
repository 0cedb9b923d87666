//go:build e2eguest

package guest

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/internal/rdmacompat"
)

// TestStat: after ibv_rc_pingpong traffic, grdma stat prints what rdma
// statistic prints; -i shows non-zero rates while traffic runs; the
// Prometheus export parses and names every counter.
func TestStat(t *testing.T) {
	cleanRDMA(t)
	addRxeAddr(t)
	addRxe(t, "rxe0", "veth0")
	addRxe(t, "rxe1", "veth1")
	gid := ipv4GID(t, "rxe0", rxeAddr)
	pingpong(t, "rxe0", gid)

	t.Run("MatchesRdma", func(t *testing.T) {
		for _, args := range [][]string{
			{"-j", "stat", "show"}, {"-j", "stat", "show", "link", "rxe0/1"},
			{"stat", "qp", "mode"}, {"-j", "stat", "qp", "mode"}, {"stat", "mode", "supported"},
		} {
			if msg := compareOutputs(grdma(), args...); msg != "" {
				t.Error(msg)
			}
		}
		// rdma before 6.7 printed the counters on one line unless -p; its
		// -p layout is current rdma's default, which grdma prints.
		want := must(t, layout.Rdma, "-p", "stat", "show")
		got := must(t, grdma(), "stat", "show")
		ver, err := rdmaVersion()
		if err != nil {
			t.Fatal(err)
		}
		if d := rdmacompat.DiffText(want.stdout, got.stdout, ver); d != "" {
			t.Errorf("grdma stat show differs from rdma -p stat show:\n%s", d)
		}
	})

	t.Run("RatesWhileTrafficRuns", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Add(1)
		// 500 iterations outlast the 1 s of samples (rxe under emulation
		// runs ~100-600 a second) without nearing the command time limit.
		go func() { defer wg.Done(); pingpongN(t, "rxe0", gid, 500) }()
		defer wg.Wait()
		// Sample once the ping-pong runs: rxe0 sends. (Polling for the
		// server's listening socket missed it when the client connected
		// between two polls: the server stops listening once it accepts.)
		sent := func() int {
			v, _ := strconv.Atoi(strings.TrimSpace(readFile("/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts")))
			return v
		}
		before := sent()
		if !eventually(20*time.Second, func() bool { return sent() > before }) {
			t.Fatal("rxe0 sent nothing in 20 s: the ping-pong did not start")
		}
		r := must(t, grdma(), "-j", "stat", "show", "link", "rxe0/1", "-i", "300ms", "-c", "3")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 {
			t.Fatalf("want 3 JSON lines:\n%s", r)
		}
		busy := 0
		for _, l := range lines {
			var sample map[string]any
			if err := json.Unmarshal([]byte(l), &sample); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if rate, _ := sample["sent_pkts"].(float64); rate > 0 {
				busy++
			}
		}
		if busy == 0 {
			t.Errorf("no sample shows a non-zero sent_pkts rate while traffic ran:\n%s", r.stdout)
		}
		t.Logf("rates:\n%s", r.stdout)
	})

	// Replacing the export keeps the file's mode, and every call on the
	// new file goes through its descriptor (strace shows the calls): the
	// directory is opened, the file created in it with O_EXCL|O_NOFOLLOW,
	// fchmod'ed and fsynced, renamed over the old one within the
	// directory, and the directory fsynced; nothing is chmod'ed or
	// chown'ed by name, which another account could swap for a symlink.
	t.Run("ExportReplacesDurably", func(t *testing.T) {
		dir := t.TempDir()
		path := dir + "/rdma.prom"
		if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		trace := dir + "/strace.out"
		must(t, layout.Strace, "-f", "-o", trace, "-e", "trace=openat,rename,renameat,renameat2,fsync,chmod,fchmod,fchmodat,chown,lchown,fchown,fchownat",
			grdma(), "stat", "export", "--textfile", path)
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("mode after export: %v (%v), want 0600 as before", st.Mode().Perm(), err)
		}
		b, _ := os.ReadFile(trace)
		calls := joinResumed(string(b))
		steps := []string{
			`openat\((?P<dir>\d+), "(?P<tmp>\.rdma\.prom\.tmp[^"]+)", (?P<flags>[A-Z_|]+), 0600\)\s+= (?P<file>\d+)`,
			`fchmod\($file, 0600\)\s+= 0`, // strace aligns the results
			`fsync\($file\)\s+= 0`,
			`renameat2?\($dir, "$tmp", $dir, "rdma\.prom"(, 0)?\)\s+= 0`,
			`fsync\($dir\)\s+= 0`,
		}
		vars := map[string]string{}
		rest := calls
		for _, step := range steps {
			for k, v := range vars {
				step = strings.ReplaceAll(step, "$"+k, regexp.QuoteMeta(v))
			}
			re := regexp.MustCompile(step)
			m := re.FindStringSubmatchIndex(rest)
			if m == nil {
				t.Fatalf("no %s after what came before:\n%s", step, calls)
			}
			for i, name := range re.SubexpNames() {
				if name != "" {
					vars[name] = rest[m[2*i]:m[2*i+1]]
				}
			}
			if vars["dir"] != "" && len(vars) == 4 { // the directory was opened before, as a directory
				before := calls[:len(calls)-len(rest)+m[0]]
				opens := regexp.MustCompile(`openat\(AT_FDCWD, "`+regexp.QuoteMeta(dir)+`", [^)]*O_DIRECTORY[^)]*\)\s+= (\d+)`).FindAllStringSubmatch(before, -1)
				if len(opens) == 0 || opens[len(opens)-1][1] != vars["dir"] {
					t.Errorf("descriptor %s is not the directory %s opened:\n%s", vars["dir"], dir, calls)
				}
				for _, f := range []string{"O_CREAT", "O_EXCL", "O_NOFOLLOW", "O_CLOEXEC"} {
					if !strings.Contains(vars["flags"], f) {
						t.Errorf("the new file was created without %s: %s", f, vars["flags"])
					}
				}
			}
			rest = rest[m[1]:]
		}
		if byName := regexp.MustCompile(`(^|\s)(chmod|fchmodat|chown|lchown|fchownat)\(.*`).FindAllString(calls, -1); len(byName) > 0 {
			t.Errorf("chmod or chown by name: %q", byName)
		}
	})

	// A textfile directory another account may write in without the
	// sticky bit is refused before anything is written.
	t.Run("ExportRefusesUnsafeDirectory", func(t *testing.T) {
		dir := t.TempDir() + "/textfile"
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		r := run(grdma(), "stat", "export", "--textfile", dir+"/rdma.prom")
		if r.code != 1 || !strings.Contains(r.stderr, "is writable by group and others (mode 0777) without the sticky bit") ||
			!strings.Contains(r.stderr, "chmod go-w "+dir) {
			t.Errorf("exit %d, stderr %q; want 1 and the mode and the fix named", r.code, r.stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("wrote %v", entries)
		}
	})

	t.Run("PrometheusExport", func(t *testing.T) {
		path := t.TempDir() + "/rdma.prom"
		must(t, grdma(), "stat", "export", "--textfile", path)
		fams, err := exporter.ReadTextfile(path)
		if err != nil {
			t.Fatalf("Prometheus cannot parse the export: %v", err)
		}
		// Every counter rdma shows is exported, with its value.
		var ports []map[string]any
		if err := json.Unmarshal([]byte(must(t, layout.Rdma, "-j", "stat", "show").stdout), &ports); err != nil {
			t.Fatal(err)
		}
		exported := map[string]bool{}
		for _, m := range fams["grdma_port_hw_counter_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			exported[l["device"]+"/"+l["port"]+"/"+l["counter"]] = true
		}
		n := 0
		for _, p := range ports {
			for k := range p {
				if k == "ifname" || k == "port" {
					continue
				}
				n++
				if key := p["ifname"].(string) + "/1/" + k; !exported[key] {
					t.Errorf("counter %s not exported", key)
				}
			}
		}
		if n == 0 || len(exported) != n {
			t.Errorf("rdma shows %d counters, the export has %d", n, len(exported))
		}
		if g := fams["grdma_port_rate_bytes_per_second"]; g == nil || len(g.GetMetric()) != 2 {
			t.Errorf("no port rate for both ports: %v", g)
		}
	})
}
