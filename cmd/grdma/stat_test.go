package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/internal/rdmacompat"
	"github.com/grdma/grdma/nldev"
	"github.com/mdlayher/netlink"
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
				isJSON := strings.HasSuffix(c.file, ".json")
				if isJSON && len(want) == 0 {
					// rdma printed nothing at all: no port has optional
					// counters and rdma opens no JSON array then.
					if got != "[]\n" {
						t.Errorf("got %q, want an empty list", got)
					}
					return
				}
				diff, err := rdmacompat.DiffOutput(want, []byte(got), isJSON, rdmacompat.Version{Major: 6, Minor: 1})
				if err != nil {
					t.Fatal(err)
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
	cases := []errorCase{
		{"stat show -i 1s -c -3", exitUsage, "-c must be a number of samples from 1, not -3"},
		{"stat show -i 1s -c 0", exitUsage, "-c must be a number of samples from 1, not 0"},
		{"stat show -i 0s", exitUsage, "-i must be a positive interval such as 1s, not 0s"},
		{"stat show -i -1s -c 2", exitUsage, "-i must be a positive interval such as 1s, not -1s"},
		{"monitor --count -1", exitUsage, "--count must be a number of events from 1, not -1"},
		{"stat set link rxe0/1 optional-counters cc_rx_ce_pkts", exitFailed, "rxe0/1 has no optional counters"},
		{"stat set link rxe0 optional-counters a", exitUsage, "stat set needs link DEV/PORT"},
		{"stat unset link rxe0/1 counters", exitUsage, `unknown parameter "counters"`},
		{"stat qp set link rxe0/1 auto color on", exitUsage, `unknown auto criterion "color"`},
		{"stat qp bind link rxe0/1 lqpn x", exitUsage, `lqpn must be a number, not "x"`},
		{"stat qp unbind link rxe0/1 lqpn 5", exitUsage, "needs cntn COUNTER (and lqpn QPN for one QP only)"},
		{"stat show link nosuch/1", exitFailed, "RDMA device nosuch not found"},
		{"stat mode -i 1s", exitUsage, "-i, -c and --pma go with stat show"},
		{"stat show -c 3", exitUsage, "-c needs -i"},
		{"stat show -i 1ms -c 1", exitUsage, "too short"},
		{"stat export", exitUsage, "needs --textfile PATH"},
	}
	checkErrorCases(t, func() *nlfixture.Kernel { return statKernel("6.12") }, cases)
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

// TestStatQPShowEmpty: the real (empty) QP counter dump prints nothing,
// as rdma printed nothing (rxe cannot bind QPs to counters).
func TestStatQPShowEmpty(t *testing.T) {
	for _, kv := range kernels {
		// The recording's boot had rxe0 only.
		for args, want := range map[string]string{"stat qp show link rxe0/1": "", "-j stat qp link rxe0/1": "[]\n"} {
			got, stderr, code := runGrdma(t, statKernel(kv), strings.Fields(args)...)
			if code != 0 || got != want {
				t.Errorf("%s grdma %s: exit %d, %q (stderr %q), want %q", kv, args, code, got, stderr, want)
			}
		}
	}
}

// TestStatQPShowCounter renders a counter from a reply built by hand in
// the kernel's layout (fill_res_counter_entry), since rxe cannot make one.
func TestStatQPShowCounter(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(recorded("6.12"), "stat", "nl")
	for _, f := range []string{"get_dump.bin", "stat_qp_dump_dev1_port1.bin"} {
		if b, err := os.ReadFile(filepath.Join(src, strings.Replace(f, "dev1", "dev0", 1))); err == nil {
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
	}
	pid := uint32(os.Getpid())
	entry := concatAttrs(
		attrU32(nldev.AttrPortIndex, 1), attrU32(nldev.AttrStatCounterID, 5),
		attrU32(nldev.AttrStatMode, nldev.CounterModeAuto), attrU32(nldev.AttrStatAutoModeMask, nldev.CounterMaskQPType),
		attrBytes(nldev.AttrResType, []byte{2}), attrU32(nldev.AttrResPID, pid),
		attrNest(nldev.AttrStatHWCounters,
			attrNest(nldev.AttrStatHWCounterEntry, attrStr(nldev.AttrStatHWCounterEntryName, "rx_write_requests"), attrU64(nldev.AttrStatHWCounterEntryValue, 8)),
			attrNest(nldev.AttrStatHWCounterEntry, attrStr(nldev.AttrStatHWCounterEntryName, "rx_read_requests"), attrU64(nldev.AttrStatHWCounterEntryValue, 0))),
		attrNest(nldev.AttrResQP,
			attrNest(nldev.AttrResQPEntry, attrU32(nldev.AttrResLQPN, 178)),
			attrNest(nldev.AttrResQPEntry, attrU32(nldev.AttrResLQPN, 179))))
	msg := concatAttrs(attrU32(nldev.AttrDevIndex, 0), attrStr(nldev.AttrDevName, "rxe0"),
		attrNest(nldev.AttrStatCounter, attrNest(nldev.AttrStatCounterEntry, entry)))
	os.WriteFile(filepath.Join(dir, "stat_qp_dump_dev0_port1.bin"), append(nlmsg(nldev.MessageType(nldev.CmdStatGet), 0x2, msg), nlmsg(3, 0x2, []byte{0, 0, 0, 0})...), 0o644)

	k := nlfixture.NewKernel(dir).Standard()
	comm, _ := os.ReadFile("/proc/self/comm")
	got, stderr, code := runGrdma(t, k, "stat", "qp", "show", "link", "rxe0/1")
	want := "link rxe0/1 cntn 5 qp-type RC pid " + fmt.Sprint(pid) + " comm " + strings.TrimSpace(string(comm)) + " \n" +
		"    rx_write_requests 8 \n    rx_read_requests 0 \n    LQPN: <178,179>\n"
	if code != 0 || got != want {
		t.Fatalf("exit %d (stderr %q)\ngot  %q\nwant %q", code, stderr, got, want)
	}
	got, _, _ = runGrdma(t, k, "-j", "stat", "qp", "show", "link", "rxe0/1", "lqpn", "179,178")
	wantJSON := `[{"ifindex":0,"ifname":"rxe0","port":1,"cntn":5,"qp-type":"RC","pid":` + fmt.Sprint(pid) + `,"comm":"` + strings.TrimSpace(string(comm)) + `","rx_write_requests":8,"rx_read_requests":0,"lqpn":[178,179]}` + "\n]\n"
	if got != wantJSON {
		t.Fatalf("got  %s\nwant %s", got, wantJSON)
	}
	// Filters: a cntn, pid or lqpn the counter does not have hides it.
	for _, f := range [][]string{{"cntn", "6"}, {"lqpn", "1-177,180"}, {"lqpn", "179"}, {"qp-type", "UD"}, {"pid", "1"}} {
		got, _, _ := runGrdma(t, k, append([]string{"stat", "qp", "show", "link", "rxe0/1"}, f...)...)
		if got != "" {
			t.Errorf("filter %v printed %q", f, got)
		}
	}
	if _, stderr, code := runGrdma(t, k, "stat", "qp", "show", "lqpn", "3-1"); code != exitUsage || !strings.Contains(stderr, "runs backwards") {
		t.Errorf("bad range: exit %d, %q", code, stderr)
	}
}

func nlmsg(typ netlink.HeaderType, flags netlink.HeaderFlags, data []byte) []byte {
	b, _ := (&netlink.Message{Header: netlink.Header{Length: uint32(16 + len(data)), Type: typ, Flags: flags}, Data: data}).MarshalBinary()
	return b
}

func attrBytes(t nldev.Attr, v []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(v)))
	b = binary.NativeEndian.AppendUint16(b, uint16(t))
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func attrU32(t nldev.Attr, v uint32) []byte {
	return attrBytes(t, binary.NativeEndian.AppendUint32(nil, v))
}
func attrU64(t nldev.Attr, v uint64) []byte {
	return attrBytes(t, binary.NativeEndian.AppendUint64(nil, v))
}
func attrStr(t nldev.Attr, s string) []byte { return attrBytes(t, append([]byte(s), 0)) }
func attrNest(t nldev.Attr, parts ...[]byte) []byte {
	return attrBytes(t|0x8000, concatAttrs(parts...))
}
func concatAttrs(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestStatPMARates: -i goes with --pma (it used to be ignored there):
// samples are taken from sysfs every interval. rxe has no PMA counters
// (the recorded tree has no ports/1/counters), so each port is noted once
// and nothing is printed; the rates themselves are nldev.RatesSince's.
func TestStatPMARates(t *testing.T) {
	got, stderr, code := runGrdma(t, standardKernel("6.12"), "--sysfs-root", sysfsFixture("rxe-6.12"), "stat", "show", "--pma", "-i", "20ms", "-c", "3")
	if code != 0 || got != "" || strings.Count(stderr, "rxe0/1 has no PMA counters in sysfs") != 1 || strings.Count(stderr, "rxe1/1 has no PMA counters") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, got, stderr)
	}
	if _, stderr, code := runGrdma(t, standardKernel("6.12"), "--sysfs-root", sysfsFixture("rxe-6.12"), "stat", "show", "--pma", "-c", "3"); code != exitUsage || !strings.Contains(stderr, "-c needs -i") {
		t.Fatalf("--pma -c without -i: exit %d, %q", code, stderr)
	}
}

// TestStatQPShowFiltersAsRdma: rdma's stat qp show table (cntn, lqpn,
// pid, qp-type, optional-counters) resolves abbreviations in its order;
// optional-counters is accepted and filters nothing, as in rdma.
func TestStatQPShowFiltersAsRdma(t *testing.T) {
	for _, args := range []string{"stat qp show link rxe0/1 optional-counters on", "stat qp show l rxe0/1 c 1-9 q rc p 1"} {
		got, stderr, code := runGrdma(t, statKernel("6.12"), strings.Fields(args)...)
		if code != 0 || got != "" {
			t.Errorf("%s: exit %d, %q, %q", args, code, got, stderr)
		}
	}
	if _, stderr, code := runGrdma(t, statKernel("6.12"), "stat", "qp", "show", "x", "1"); code != exitUsage || !strings.Contains(stderr, `expected link, help, cntn, lqpn, pid, qp-type, optional-counters`) {
		t.Errorf("unknown filter: exit %d, %q", code, stderr)
	}
}
