package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/internal/rdmacompat"
	"github.com/grdma/grdma/nldev"
)

// statKernel serves the recordings made after ibv_rc_pingpong traffic.
func statKernel(kv string) *nlfixture.Kernel {
	return nlfixture.NewKernel(filepath.Join(recorded(kv), "stat", "nl")).Standard()
}

// TestStatMatchesRdma compares grdma stat with rdma statistic for the same
// recorded state. rdma 6.1 printed counters on one line unless -p; its -p
// layout is current rdma's default, so grdma's text is compared with that.
func TestStatMatchesRdma(t *testing.T) {
	cases := []struct {
		args []string
		file string
	}{
		{[]string{"stat"}, "stat-p.txt"},
		{[]string{"-j", "stat", "show"}, "stat.json"},
		{[]string{"stat", "mode"}, "stat-mode.txt"},
		{[]string{"stat", "mode", "supported"}, "stat-mode-supported.txt"},
		{[]string{"-j", "stat", "mode", "supported"}, "stat-mode-supported.json"},
		{[]string{"stat", "qp", "mode"}, "stat-qp-mode.txt"},
		{[]string{"-j", "stat", "qp", "mode"}, "stat-qp-mode.json"},
	}
	for _, kv := range kernels {
		for _, c := range cases {
			t.Run(kv+"/"+strings.Join(c.args, "_"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(recorded(kv), "stat", "rdma", c.file))
				if err != nil {
					t.Fatal(err)
				}
				got, stderr, code := runGrdma(t, statKernel(kv), c.args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				var diff string
				switch {
				case strings.HasSuffix(c.file, ".json") && len(want) == 0:
					// rdma printed nothing at all: no port has optional
					// counters and rdma opens no JSON array then.
					if got != "[]\n" {
						t.Errorf("got %q, want an empty list", got)
					}
				case strings.HasSuffix(c.file, ".json"):
					if diff, err = rdmacompat.DiffJSON(want, []byte(got), rdmacompat.Version{Major: 6, Minor: 1}); err != nil {
						t.Fatal(err)
					}
				default:
					diff = rdmacompat.DiffText(string(want), got, rdmacompat.Version{Major: 6, Minor: 1})
				}
				if diff != "" {
					t.Errorf("grdma %s differs from rdma:\n%s", strings.Join(c.args, " "), diff)
				}
			})
		}
	}
}

func TestStatValuesFromRealKernel(t *testing.T) {
	got, _, code := runGrdma(t, statKernel("6.12"), "-j", "stat", "show", "link", "rxe0/1")
	var ports []map[string]any
	if err := json.Unmarshal([]byte(got), &ports); code != 0 || err != nil || len(ports) != 1 {
		t.Fatalf("exit %d, error %v, output %s", code, err, got)
	}
	// 50 pingpong iterations: 100 sends and receives; at least 500 packets
	// each way (rxe may retry a few).
	c := ports[0]
	if c["rdma_sends"] != 100.0 || c["rdma_recvs"] != 100.0 || c["sent_pkts"].(float64) < 500 || c["rcvd_pkts"].(float64) < 500 {
		t.Fatalf("counters %v", c)
	}
}

func TestStatErrors(t *testing.T) {
	cases := []struct {
		args   string
		code   int
		stderr string
	}{
		{"stat set link rxe0/1 optional-counters cc_rx_ce_pkts", exitFailed, "rxe0/1 has no optional counters"},
		{"stat set link rxe0 optional-counters a", exitUsage, "stat set needs link DEV/PORT"},
		{"stat unset link rxe0/1 counters", exitUsage, `unknown parameter "counters"`},
		{"stat qp set link rxe0/1 auto color on", exitUsage, `unknown auto criterion "color"`},
		{"stat qp bind link rxe0/1 lqpn x", exitUsage, `lqpn must be a number, not "x"`},
		{"stat qp unbind link rxe0/1 lqpn 5", exitUsage, "needs cntn COUNTER and lqpn QPN"},
		{"stat show link nosuch/1", exitFailed, "RDMA device nosuch not found"},
		{"stat mode -i 1s", exitUsage, "-i, -c and --pma go with stat show"},
		{"stat show -c 3", exitUsage, "-c needs -i"},
		{"stat show -i 1ms -c 1", exitUsage, "too short"},
		{"stat export", exitUsage, "needs --textfile PATH"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			out, stderr, code := runGrdma(t, statKernel("6.12"), strings.Fields(c.args)...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, stderr, out, c.code, c.stderr)
			}
		})
	}
}

func TestCounterRate(t *testing.T) {
	cases := []struct {
		old, cur uint64
		secs     float64
		want     float64
	}{
		{100, 300, 2, 100},
		{100, 100, 1, 0},
		{1000, 40, 1, 40},                          // reset: counts from zero
		{math.MaxUint64 - 1, math.MaxUint64, 1, 1}, // no float overflow on large values
	}
	for _, c := range cases {
		if got := counterRate(c.old, c.cur, c.secs); got != c.want {
			t.Errorf("counterRate(%d, %d, %v) = %v, want %v", c.old, c.cur, c.secs, got, c.want)
		}
	}
}

func TestStatRatesJSONLines(t *testing.T) {
	got, stderr, code := runGrdma(t, statKernel("6.12"), "-j", "stat", "show", "link", "rxe0/1", "-i", "20ms", "-c", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (one JSON object per sample):\n%s", len(lines), got)
	}
	for _, l := range lines {
		// The recording does not change between samples: every rate is 0.
		if !strings.HasPrefix(l, `{"time":"`) || !strings.Contains(l, `"ifname":"rxe0","port":1,"interval":`) || !strings.Contains(l, `"sent_pkts":0,`) {
			t.Errorf("line %s", l)
		}
	}
}

func TestRenderRatesText(t *testing.T) {
	var out strings.Builder
	a := newApp(strings.NewReader(""), &out, &out)
	p := a.printer()
	old := nldev.PortCounters{DevName: "rxe0", Port: 1, Counters: []nldev.Counter{{Name: "sent_pkts", Value: 100}}}
	cur := nldev.PortCounters{DevName: "rxe0", Port: 1, Counters: []nldev.Counter{{Name: "sent_pkts", Value: 350}}}
	renderRates(p, &old, &cur, timeZero, 2.5)
	p.Flush()
	if want := "link rxe0/1 interval 2.500s \n    sent_pkts 100.0/s \n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

func nlfixtureGetDump() nlfixture.Request {
	return nlfixture.Request{Cmd: nldev.CmdGet, Dump: true, Dev: -1, Port: -1}
}
