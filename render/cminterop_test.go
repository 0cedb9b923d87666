package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/cminterop"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

func interopResult() *cminterop.Result {
	return &cminterop.Result{Mode: cminterop.Rping, Role: cminterop.Server, Device: "rxe0", Port: 1,
		CM: verbsprobe.CMInfo{Src: netip.MustParseAddrPort("10.0.0.1:7174"), Dst: netip.MustParseAddrPort("10.0.0.2:41000"),
			Device: "rxe0", Port: 1, GIDIndex: 1, RoCE: "RoCE v2", PathMTU: ib.MTU1024, HopLimit: 64,
			Steps: []verbsprobe.CMStep{{Name: verbsprobe.CMStepEstablish, Duration: 300 * time.Microsecond}}},
		Steps: []verbsprobe.Step{{Name: "listen", OK: true, Duration: time.Millisecond},
			{Name: "rping", OK: true, Duration: 2 * time.Millisecond, Detail: "5 pings of 64 bytes served"}},
		Count: 5, Size: 64, Bytes: 640, Elapsed: 5 * time.Millisecond,
		// A peer's data with terminal controls: printed escaped.
		Sample: "rdma-ping-0: \x1b[2J\x1b[32mPASS",
	}
}

func TestCMInteropText(t *testing.T) {
	var out bytes.Buffer
	p := output.New(&out, output.Options{})
	CMInteropResult(p, interopResult())
	p.Flush()
	s := out.String()
	for _, want := range []string{"probe rxe0/1 cm rping server", "rdma_cm: 10.0.0.2:41000 from 10.0.0.1:7174 via rxe0/1 GID 1",
		"(RoCE v2), path MTU 1024, ToS 0, hop limit 64; establish", "[ok  ] rping", "PASS: 5 pings of 64 bytes"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b") {
		t.Errorf("the peer's escape sequences reached the terminal:\n%q", s)
	}
	r := interopResult()
	r.Err = errors.New("rping: ping 0: boom")
	r.Steps[1].OK, r.Steps[1].Err = false, &verbsprobe.StepError{Step: "rping", Err: errors.New("ping 0: boom")}
	out.Reset()
	CMInteropResult(p, r)
	p.Flush()
	if !strings.Contains(out.String(), "FAIL at rping") || !strings.Contains(out.String(), "[FAIL] rping") {
		t.Errorf("%s", out.String())
	}
}

func TestCMInteropJSON(t *testing.T) {
	var out bytes.Buffer
	p := output.New(&out, output.Options{JSON: true})
	CMInteropResult(p, interopResult())
	p.Flush()
	var v struct {
		Mode   string `json:"mode"`
		OK     bool   `json:"ok"`
		Count  int    `json:"count"`
		Sample string `json:"sample"`
		CM     struct {
			GIDIndex int    `json:"gid_index"`
			RoCE     string `json:"roce"`
		} `json:"cm"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if v.Mode != "rping" || !v.OK || v.Count != 5 || v.CM.GIDIndex != 1 || v.CM.RoCE != "RoCE v2" || !strings.HasPrefix(v.Sample, "rdma-ping-0: ") {
		t.Errorf("%+v from %s", v, out.String())
	}
}

func perftestResult() *cminterop.Result {
	r := interopResult()
	r.Mode, r.Sample, r.Test, r.Op = cminterop.Perftest, "", verbsprobe.TestBandwidth, verbsprobe.OpWrite
	r.PeerVersion = "6.06\x1b[2J" // the peer's text, escaped where printed
	r.Measurement = &verbsprobe.Measurement{Test: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 65536, Iters: 2000,
		Bytes: 2000 * 65536, Elapsed: time.Second}
	r.PeerReport = &cminterop.PerftestReport{Size: 65536, Iters: 2000, BWPeak: 130, BWAvg: 125.5, MsgRate: 0.002}
	return r
}

func TestCMInteropPerftest(t *testing.T) {
	var out bytes.Buffer
	p := output.New(&out, output.Options{})
	CMInteropResult(p, perftestResult())
	p.Flush()
	s := out.String()
	for _, want := range []string{"probe rxe0/1 cm perftest bw write server", "perftest client's report: 2000 × 65536 bytes, 125.50 MB/s, 0.0020 Mmsg/s",
		"PASS: bw write with perftest 6.06\\x1b[2J: 2000 × 65536 bytes in 1.00s, 1.049 Gb/s"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	out.Reset()
	p = output.New(&out, output.Options{JSON: true})
	CMInteropResult(p, perftestResult())
	p.Flush()
	var got struct {
		Test, Op    string
		PeerVersion string `json:"peer_version"`
		Results     []struct {
			Iters  int
			BWGbps float64 `json:"bw_gbps"`
		}
		PeerReport struct {
			Iters    int
			BWAvgMBs float64 `json:"bw_avg_mbs"`
		} `json:"peer_report"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.Test != "bw" || got.Op != "write" || got.PeerVersion != `6.06\x1b[2J` || len(got.Results) != 1 || got.Results[0].Iters != 2000 ||
		got.Results[0].BWGbps < 1.04 || got.PeerReport.Iters != 2000 || got.PeerReport.BWAvgMBs != 125.5 {
		t.Errorf("%+v\n%s", got, out.String())
	}
}
