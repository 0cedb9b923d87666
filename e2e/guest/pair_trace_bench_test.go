//go:build e2eguest

package guest

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/e2e/layout"
)

// TestPairTraceBenchmark splits grdma's round trips and the peer tools'
// into what each guest did, with the kernel's tracer (ftrace) on both:
// lat write (3,000 exchanges of 2 bytes) against ib_write_lat, and UD ping
// with completion events (1,000 pings of 64 bytes) against
// ibv_ud_pingpong -e, 2 rounds each, interleaved. Per guest it logs the
// cycle (one data packet sent to the next), the share of cycles in which
// the CPU switched threads and the cycle without them, the time from a
// data packet's arrival to the tool's next write(2) (its doorbell, or the
// arming of its completion queue where that comes first) and from there
// to the packet sent, and the thread switches a cycle by kind; for UD ping
// also the tool's time a cycle in user mode and in system calls, and its
// system calls a cycle by number. The guests have one CPU,
// so a switch inside a cycle is time the round trip waited. It logs
// FIGURE lines and asserts only that every run was answered; it runs with
// E2E_TRACE_BENCH=1, else it is skipped.
func TestPairTraceBenchmark(t *testing.T) {
	if os.Getenv("E2E_TRACE_BENCH") == "" {
		t.Skip("E2E_TRACE_BENCH not set")
	}
	p := withPeer(t)
	kernel := strings.TrimSpace(must(t, "/bin/uname", "-r").stdout)
	tr := &tracer{t: t, p: p, kernel: kernel}
	tr.lat()
	tr.ud()
}

type tracer struct {
	t      *testing.T
	p      *pair
	kernel string
}

// start clears and starts the trace on both guests: the link's packets,
// write(2), thread switches, and the ends of NET_RX softirqs; with
// syscalls every system call's entry and exit too (too many for lat's
// polling loops to read back in the guest's time limit).
func (tr *tracer) start(syscalls bool) {
	tr.t.Helper()
	raw := ""
	if syscalls {
		raw = "1"
	}
	script := fmt.Sprintf(`set -e
RAW=%s
T=/sys/kernel/tracing; [ -e $T/trace ] || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo 0 > $T/events/enable; echo > $T/trace; echo 16384 > $T/buffer_size_kb
for e in net/netif_receive_skb net/net_dev_xmit; do echo 'name == "%s"' > $T/events/$e/filter; echo 1 > $T/events/$e/enable; done
echo 1 > $T/events/syscalls/sys_enter_write/enable
if [ -n "$RAW" ]; then echo 1 > $T/events/raw_syscalls/sys_enter/enable; echo 1 > $T/events/raw_syscalls/sys_exit/enable; fi
echo 1 > $T/events/sched/sched_switch/enable
echo 'vec == 3' > $T/events/irq/softirq_exit/filter; echo 1 > $T/events/irq/softirq_exit/enable
echo 1 > $T/tracing_on`, raw, tr.p.Netdev)
	must(tr.t, "/bin/sh", "-c", script)
	tr.p.A.Must("/bin/sh", "-c", script)
}

// traceCycles stops the trace and prints one line a cycle: "C cycle
// rx-to-write write-to-tx own kernel other" (µs and switch counts), for
// data packets of ipLen bytes (received; sent with their 14-byte
// Ethernet header) and write(2)s by threads named comm.
const traceCycles = `T=/sys/kernel/tracing; echo 0 > $T/tracing_on
awk -v L=%d -v C='%s' '
/^#/ { next }
{ ts = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i)-1); ev = $(i+1); break }
  if (ts == "") next; t = ts * 1e6 }
ev == "netif_receive_skb:" { if ($0 ~ (" len=" L "( |$)")) { tR = t; tW = 0 } ; next }
ev ~ /^sys_write\(/ { if (tR > 0 && tW == 0 && index($1, C "-") == 1) tW = t; next }
ev == "sched_switch:" {
  p = ""; n = ""
  for (i = 1; i <= NF; i++) { if ($i ~ /^prev_comm=/) p = substr($i, 11); if ($i ~ /^next_comm=/) n = substr($i, 11) }
  if (p == C && n == C) own++; else if (p ~ /^(ksoftirqd|kworker)/ || n ~ /^(ksoftirqd|kworker)/) kern++; else other++
  next }
ev == "net_dev_xmit:" { if ($0 ~ (" len=" L+14 "( |$)")) {
    if (tT > 0 && tR > tT && tW > tR) printf "C %%.1f %%.1f %%.1f %%d %%d %%d\n", t - tT, tW - tR, t - tW, own, kern, other
    tT = t; tR = 0; own = 0; kern = 0; other = 0 } ; next }' $T/trace
echo 0 > $T/events/enable`

// traceSplit prints one line a cycle, "S user sys calls NR:COUNT…": the
// time (µs) threads named comm spent in user mode and in system calls
// between two data packets sent (ipLen as for traceCycles), and their
// system calls by number. A thread's time counts from its switch in (or
// a system call's exit) to its switch out (or next entry); interrupts
// count where they land. The trace stops first: reading it makes system
// calls too.
const traceSplit = `T=/sys/kernel/tracing; echo 0 > $T/tracing_on
awk -v L=%d -v C='%s' '
/^#/ { next }
{ ts = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i)-1); ev = $(i+1); nr = $(i+3); break }
  if (ts == "") next; t = ts * 1e6; k = split($1, a, "-"); pid = a[k]; mine = (index($1, C "-") == 1) }
ev == "sys_enter:" { if (mine) { if (!insys[pid] && us[pid] > 0) user += t - us[pid]; us[pid] = 0; insys[pid] = 1; ks[pid] = t; calls++; cnt[nr]++ } ; next }
ev == "sys_exit:" { if (mine) { if (insys[pid] && ks[pid] > 0) sys += t - ks[pid]; insys[pid] = 0; us[pid] = t; ks[pid] = 0 } ; next }
ev == "sched_switch:" {
  p = ""; n = ""; pp = ""; np = ""
  for (i = 1; i <= NF; i++) { if ($i ~ /^prev_comm=/) p = substr($i, 11); if ($i ~ /^next_comm=/) n = substr($i, 11); if ($i ~ /^prev_pid=/) pp = substr($i, 10); if ($i ~ /^next_pid=/) np = substr($i, 10) }
  if (p == C) { if (insys[pp]) { if (ks[pp] > 0) sys += t - ks[pp]; ks[pp] = 0 } else { if (us[pp] > 0) user += t - us[pp]; us[pp] = 0 } }
  if (n == C) { if (insys[np]) ks[np] = t; else us[np] = t }
  next }
ev == "net_dev_xmit:" { if ($0 ~ (" len=" L+14 "( |$)")) {
    if (on) { printf "S %%.1f %%.1f %%d", user, sys, calls; for (x in cnt) printf " %%s:%%d", x, cnt[x]; printf "\n" }
    on = 1; user = 0; sys = 0; calls = 0; delete cnt } ; next }' $T/trace`

// sh runs a shell script on guest A ("A") or here, and returns its
// output.
func (tr *tracer) sh(host, script string) string {
	tr.t.Helper()
	if host == "A" {
		return tr.p.A.Must("/bin/sh", "-c", script).stdout
	}
	return must(tr.t, "/bin/sh", "-c", script).stdout
}

// split is traceSplit's lines of one guest, as a FIGURE's text: medians of
// the user and system time a cycle, and the system calls a cycle, in
// all and by number.
func (tr *tracer) split(host string, ipLen int, comm string) string {
	tr.t.Helper()
	out := tr.sh(host, fmt.Sprintf(traceSplit, ipLen, comm))
	var user, sys []float64
	var calls float64
	byNR := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "S" {
			continue
		}
		u, _ := strconv.ParseFloat(f[1], 64)
		s, _ := strconv.ParseFloat(f[2], 64)
		n, _ := strconv.ParseFloat(f[3], 64)
		user, sys, calls = append(user, u), append(sys, s), calls+n
		for _, kv := range f[4:] {
			k, v, _ := strings.Cut(kv, ":")
			x, _ := strconv.ParseFloat(v, 64)
			byNR[k] += x
		}
	}
	if len(user) == 0 {
		return "no cycles traced"
	}
	c := float64(len(user))
	var nrs []string
	for k, v := range byNR {
		if v/c >= 0.05 {
			nrs = append(nrs, fmt.Sprintf("%s: %.2f", k, v/c))
		}
	}
	sort.Strings(nrs)
	return fmt.Sprintf("user %.0f µs, system calls %.0f µs a cycle (medians of %d); %.2f system calls a cycle (by number: %s)",
		median(user), median(sys), len(user), calls/c, strings.Join(nrs, ", "))
}

// guestCycles is one guest's cycles of one run.
type guestCycles struct {
	cycle, free, rxWrite, writeTx []float64
	own, kern, other              float64 // switches a cycle
	switched                      int     // cycles with any
}

func (tr *tracer) cycles(host string, ipLen int, comm string) guestCycles {
	tr.t.Helper()
	out := tr.sh(host, fmt.Sprintf(traceCycles, ipLen, comm))
	var g guestCycles
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 7 || f[0] != "C" {
			continue
		}
		v := make([]float64, 6)
		for i := range v {
			v[i], _ = strconv.ParseFloat(f[i+1], 64)
		}
		g.cycle, g.rxWrite, g.writeTx = append(g.cycle, v[0]), append(g.rxWrite, v[1]), append(g.writeTx, v[2])
		g.own, g.kern, g.other = g.own+v[3], g.kern+v[4], g.other+v[5]
		if v[3]+v[4]+v[5] == 0 {
			g.free = append(g.free, v[0])
		} else {
			g.switched++
		}
	}
	if n := float64(len(g.cycle)); n > 0 {
		g.own, g.kern, g.other = g.own/n, g.kern/n, g.other/n
	}
	return g
}

func (g guestCycles) String() string {
	if len(g.cycle) == 0 {
		return "no cycles traced"
	}
	free := math.NaN()
	if len(g.free) > 0 {
		free = median(g.free)
	}
	return fmt.Sprintf("cycle %.0f µs (%d), %.0f%% with a switch, %.0f µs without; rx→write %.0f, write→tx %.0f; switches a cycle: own threads %.2f, kernel threads %.2f, idle/other %.2f",
		median(g.cycle), len(g.cycle), 100*float64(g.switched)/float64(len(g.cycle)), free,
		median(g.rxWrite), median(g.writeTx), g.own, g.kern, g.other)
}

func (tr *tracer) figure(format string, args ...any) {
	tr.t.Helper()
	tr.t.Logf("FIGURE %s trace: "+format, append([]any{tr.kernel}, args...)...)
}

// lat traces lat write against ib_write_lat: the server on A, the client
// here.
func (tr *tracer) lat() {
	t, p := tr.t, tr.p
	const n, ipLen = 3000, 64 // IPv4, UDP, BTH, RETH, 2 bytes padded to 4, ICRC
	gid := strconv.Itoa(p.GIDIndex)
	for r := range 2 {
		tr.start(false)
		ps, pc := p.across(t, true, toolPort, layout.IbWriteLat, "-d", p.Dev, "-x", gid, "-s", "2", "-n", strconv.Itoa(n))
		if ps.code != 0 || pc.code != 0 {
			t.Fatalf("ib_write_lat:\n%s\n%s", ps, pc)
		}
		f := perftestFigures(t, ps, pc, n)
		tr.figure("lat write round %d: ib_write_lat t_typical %s µs", r+1, f[4])
		tr.figure("lat write round %d: ib_write_lat client %s", r+1, tr.cycles("B", ipLen, "ib_write_lat"))
		tr.figure("lat write round %d: ib_write_lat server %s", r+1, tr.cycles("A", ipLen, "ib_write_lat"))

		tr.start(false)
		srv := p.ServeOnA(t, probePort, "/bin/sh", "-c", "exec "+grdma()+" -j probe "+p.Dev+" listen")
		cli := run("/bin/sh", "-c", "exec "+grdma()+" -j probe "+p.Dev+" peer "+p.PeerAddr+" lat write size 2 iters "+strconv.Itoa(n))
		if s := srv.Wait(); s.code != 0 || cli.code != 0 {
			t.Fatalf("grdma lat write:\n%s\n%s", s, cli)
		}
		rep := parseProbeJSON(t, "grdma", cli)
		tr.figure("lat write round %d: grdma median %.1f µs", r+1, rep.Results[0].Lat.Median)
		tr.figure("lat write round %d: grdma client %s", r+1, tr.cycles("B", ipLen, "grdma"))
		tr.figure("lat write round %d: grdma server %s", r+1, tr.cycles("A", ipLen, "grdma"))
	}
}

// ud traces UD ping with completion events: ibv_ud_pingpong -e, then a
// prober in this process against grdma probe DEV serve on A.
func (tr *tracer) ud() {
	t, p := tr.t, tr.p
	const n, size, ipLen = 1000, 64, 116 // IPv4, UDP, BTH, DETH, 64 bytes, ICRC
	ctx, prober, stop := startUDProber(t, p.Dev, false)
	defer stop()
	perIter := regexp.MustCompile(`([\d.]+) usec/iter`)
	tool := []string{"-d", p.Dev, "-g", strconv.Itoa(p.GIDIndex), "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "-p", strconv.Itoa(udToolPort), "-e"}
	for r := range 2 {
		tr.start(true)
		srvTool := p.ServeOnA(t, udToolPort, layout.IbvUdPingpong, tool...)
		cli := run(layout.IbvUdPingpong, append(tool, p.PeerAddr)...)
		srvTool.Wait()
		m := perIter.FindStringSubmatch(cli.stdout)
		if cli.code != 0 || m == nil {
			t.Fatalf("ibv_ud_pingpong:\n%s", cli)
		}
		// The name in the tracer: 15 characters of ibv_ud_pingpong.
		tr.figure("ud ping round %d: ibv_ud_pingpong -e %s µs/iter", r+1, m[1])
		tr.figure("ud ping round %d: ibv_ud_pingpong client %s", r+1, tr.split("B", ipLen, "ibv_ud_pingpong"))
		tr.figure("ud ping round %d: ibv_ud_pingpong server %s", r+1, tr.split("A", ipLen, "ibv_ud_pingpong"))
		tr.figure("ud ping round %d: ibv_ud_pingpong client %s", r+1, tr.cycles("B", ipLen, "ibv_ud_pingpong"))
		tr.figure("ud ping round %d: ibv_ud_pingpong server %s", r+1, tr.cycles("A", ipLen, "ibv_ud_pingpong"))

		// A responder a round, stopped before the trace is read: reading
		// it takes longer than a guest command's time limit (a minute).
		port := udToolPort + 1 + r
		srv := p.ServeOnA(t, port, "/bin/sh", "-c", "exec "+grdma()+" probe "+p.Dev+" serve :"+strconv.Itoa(port))
		target := p.PeerAddr + ":" + strconv.Itoa(port)
		if _, _, err := prober.Lookup(ctx, target); err != nil {
			t.Fatal(err)
		}
		tr.start(true)
		var rtts []float64
		for range n {
			res, err := prober.Ping(ctx, target, size)
			if err != nil {
				t.Fatalf("round %d: %+v: %v", r+1, res, err)
			}
			rtts = append(rtts, float64(res.RTT)/1e3)
		}
		stopServe(t, srv)
		tr.figure("ud ping round %d: grdma mean rtt %.1f µs, median %.1f", r+1, mean(rtts), median(rtts))
		tr.figure("ud ping round %d: grdma prober (this process) %s", r+1, tr.split("B", ipLen, "guest.test"))
		tr.figure("ud ping round %d: grdma responder %s", r+1, tr.split("A", ipLen, "grdma"))
		tr.figure("ud ping round %d: grdma prober (this process) %s", r+1, tr.cycles("B", ipLen, "guest.test"))
		tr.figure("ud ping round %d: grdma responder %s", r+1, tr.cycles("A", ipLen, "grdma"))
	}
}
