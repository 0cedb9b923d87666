package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/verbsprobe"
)

// passingResult is a traffic probe as rxe0 passed it in the guest.
func passingResult(qpn uint32, us time.Duration) *verbsprobe.Result {
	r := &verbsprobe.Result{Device: "rxe0", Port: 1, Driver: "rxe", VerbsDevice: "uverbs0", GIDIndex: 1,
		GID: gid.GID{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 77, 15: 1}, QPN: qpn, Traffic: true}
	for i, name := range []string{"open", "alloc_pd", "send", "close"} {
		r.Steps = append(r.Steps, verbsprobe.Step{Name: name, OK: true, Duration: time.Duration(i+1) * us * time.Microsecond})
	}
	r.Steps[1].Detail = "pd 0"
	return r
}

func TestProbeResultPassing(t *testing.T) {
	var series verbsprobe.Series
	for _, r := range []*verbsprobe.Result{passingResult(17, 100), passingResult(18, 300), passingResult(19, 200)} {
		series.Add(r)
	}
	var text bytes.Buffer
	p := output.New(&text, output.Options{})
	ProbeResult(p, series.Last, &series, 3)
	p.Flush()
	want := `probe rxe0/1 (driver rxe, uverbs0, GID 1 ::ffff:192.168.77.1, qpn 19), run 3 of 3
  [ok  ] open                200µs
  [ok  ] alloc_pd            400µs  pd 0
  [ok  ] send                600µs
  [ok  ] close               800µs
PASS: RC queue pair in RTS, SEND, RDMA WRITE and RDMA READ verified (2.00ms)

3 runs of 3, 3 passed
  step                  min    median       max
  open                100µs     200µs     300µs
  alloc_pd            200µs     400µs     600µs
  send                300µs     600µs     900µs
  close               400µs     800µs    1.20ms
  total              1.00ms    2.00ms    3.00ms
`
	if text.String() != want {
		t.Errorf("text\n%s\nwant\n%s", text.String(), want)
	}

	var js bytes.Buffer
	p = output.New(&js, output.Options{JSON: true})
	var one verbsprobe.Series
	one.Add(passingResult(17, 100))
	ProbeResult(p, one.Last, &one, 1)
	p.Flush()
	wantJSON := `{"ifname":"rxe0","port":1,"driver":"rxe","uverbs":"uverbs0","gid_index":1,"gid":"::ffff:192.168.77.1","qpn":17,"traffic":true,"ok":true,"usec":1000,` +
		`"steps":[{"name":"open","ok":true,"usec":100,"detail":"","error":""},{"name":"alloc_pd","ok":true,"usec":200,"detail":"pd 0","error":""},` +
		`{"name":"send","ok":true,"usec":300,"detail":"","error":""},{"name":"close","ok":true,"usec":400,"detail":"","error":""}]}` + "\n"
	if js.String() != wantJSON {
		t.Errorf("JSON\n%s\nwant\n%s", js.String(), wantJSON)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0µs", 1499 * time.Nanosecond: "1µs", 999_400 * time.Nanosecond: "999µs",
		1_234_567: "1.23ms", 2_500 * time.Millisecond: "2.50s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
	if usec(1_234_567) != 1234.6 {
		t.Errorf("usec = %v", usec(1_234_567))
	}
}

// The output of probes between two hosts, text and JSON, for a client
// that failed to connect, a bw client, a server nobody came to, a server
// of an ibv_rc_pingpong client, a traffic server and a connect client:
// testdata/probe-twohost.txt was printed by the code before Result had
// its peer sub-structure (issue 25), and must not change.
func TestProbeResultTwoHosts(t *testing.T) {
	g, _ := gid.Parse("::ffff:10.0.0.1")
	ok := verbsprobe.Step{Name: "open", OK: true, Duration: time.Millisecond, Detail: "x"}
	fail := verbsprobe.Step{Name: "connect", Duration: 2 * time.Millisecond, Err: &verbsprobe.StepError{Step: "connect", Err: os.ErrClosed}}
	remote := verbsprobe.Endpoint{Ifname: "rxe0", Port: 1, Driver: "rxe", LinkLayer: ib.LinkLayerEthernet, GIDIndex: 1, GID: g, GIDType: "RoCE v2", QPN: 17, PSN: 5, ActiveMTU: 1024}
	bw := &verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 65536, Iters: 200}
	lat := verbsprobe.LatencyStats{Samples: 3, Min: time.Microsecond, Median: 2 * time.Microsecond, Avg: 2 * time.Microsecond, P99: 3 * time.Microsecond, Max: 3 * time.Microsecond}
	base := func() *verbsprobe.Result {
		return &verbsprobe.Result{Device: "rxe0", Port: 1, Driver: "rxe", VerbsDevice: "uverbs0", GIDIndex: 1, GID: g, QPN: 18, LinkLayer: ib.LinkLayerEthernet}
	}
	var rs []*verbsprobe.Result
	r := base()
	r.Steps = []verbsprobe.Step{ok}
	rs = append(rs, r)

	r = base()
	r.Steps = []verbsprobe.Step{ok, fail}
	r.Peer = &verbsprobe.PeerResult{Role: "client", Test: bw, Host: "10.0.0.1:18515"}
	rs = append(rs, r)
	r = base()
	r.Steps = []verbsprobe.Step{ok}
	r.Peer = &verbsprobe.PeerResult{Role: "client", Test: bw, Host: "10.0.0.1:18515", Remote: &remote, PathMTU: ib.MTU1024, Pinned: 131072}
	r.Peer.Measurements = []verbsprobe.Measurement{{Test: "bw", Op: "write", Size: 65536, Iters: 200, Bytes: 65536 * 200, Elapsed: time.Second}}
	rs = append(rs, r)
	r = base()
	r.Steps = []verbsprobe.Step{ok, fail}
	r.Peer = &verbsprobe.PeerResult{Role: "server"}
	rs = append(rs, r)
	pp := verbsprobe.Endpoint{Ifname: "ibv_rc_pingpong", LinkLayer: ib.LinkLayerEthernet, GID: g, QPN: 9, PSN: 3}
	r = base()
	r.Steps = []verbsprobe.Step{ok}
	r.Peer = &verbsprobe.PeerResult{Role: "server", Test: &verbsprobe.Test{Kind: "pingpong", Size: 4096, Iters: 50}, Host: "10.0.0.2:40000", Remote: &pp, Pingpong: true, PathMTU: ib.MTU1024}
	r.Peer.Measurements = []verbsprobe.Measurement{{Test: "pingpong", Size: 4096, Iters: 50, Bytes: 4096 * 100, Elapsed: time.Second, Latency: &lat}}
	rs = append(rs, r)
	r = base()
	r.Steps = []verbsprobe.Step{ok}
	r.Peer = &verbsprobe.PeerResult{Role: "server", Test: &verbsprobe.Test{Kind: "traffic", Size: 8192}, Host: "10.0.0.2:40000", Remote: &remote, PathMTU: ib.MTU1024, Pinned: 32768}
	rs = append(rs, r)
	r = base()
	r.Steps = []verbsprobe.Step{ok}
	r.Peer = &verbsprobe.PeerResult{Role: "client", Test: &verbsprobe.Test{Kind: "connect", Size: 8192}, Host: "10.0.0.1:18515", Remote: &remote, PathMTU: ib.MTU1024}
	rs = append(rs, r)

	var b bytes.Buffer
	for _, r := range rs {
		for _, j := range []bool{false, true} {
			p := output.New(&b, output.Options{JSON: j})
			s := &verbsprobe.Series{}
			s.Add(r)
			ProbeResult(p, r, s, 1)
			p.Flush()
		}
	}
	want, err := os.ReadFile("testdata/probe-twohost.txt")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("got:\n%s\nwant:\n%s", &b, want)
	}
}

// A responder's lines: a peer served, one that failed, one refused, one
// told busy; text and JSON, with a peer's ESC bytes escaped.
func TestServedPeerLines(t *testing.T) {
	test := &verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 65536, Iters: 200}
	pass := &verbsprobe.Result{Steps: []verbsprobe.Step{{Name: "accept", OK: true, Duration: time.Second}},
		Peer: &verbsprobe.PeerResult{Role: "server", Host: "10.0.0.2:40000", Test: test, Pinned: 135168,
			Measurements: []verbsprobe.Measurement{{Test: "bw", Op: "write", Size: 65536, Iters: 200, Bytes: 65536 * 200, Elapsed: time.Second}}}}
	fail := &verbsprobe.Result{Steps: []verbsprobe.Step{{Name: "bw_write", Duration: 2 * time.Second,
		Err: &verbsprobe.StepError{Step: "bw_write", Err: errors.New("no word from the peer for 10s")}}},
		Peer: &verbsprobe.PeerResult{Role: "server", Host: "10.0.0.3:40000", Test: test}}
	memlock := &verbsprobe.Result{Steps: []verbsprobe.Step{{Name: "reg_mr", Duration: time.Second / 10,
		Err: &verbsprobe.StepError{Step: "reg_mr", Err: errors.New("REG_MR: cannot allocate memory"), Cause: "RLIMIT_MEMLOCK (8 MiB) is too small"}}},
		Peer: &verbsprobe.PeerResult{Role: "server", Host: "10.0.0.6:40000", Test: test}}
	var b bytes.Buffer
	for _, j := range []bool{false, true} {
		p := output.New(&b, output.Options{JSON: j})
		ServedPeer(p, pass)
		ServedPeer(p, fail)
		ServedPeer(p, memlock)
		Refused(p, verbsprobe.Refusal{Peer: "10.0.0.4:5", Reason: "closed before its first message"})
		Refused(p, verbsprobe.Refusal{Peer: "10.0.0.5:6", Reason: "busy: 16 peers served at once\x1b[2J", Busy: true})
		p.Flush()
	}
	want := `10.0.0.2:40000 bw write: PASS 200 × 65536 bytes in 1.00s, 0.105 Gb/s, 0.0002 Mmsg/s (1.00s, pinned 135168 bytes)
10.0.0.3:40000 bw write: FAIL at bw_write: no word from the peer for 10s (2.00s, pinned 0 bytes)
10.0.0.6:40000 bw write: FAIL at reg_mr: REG_MR: cannot allocate memory (likely cause: RLIMIT_MEMLOCK (8 MiB) is too small) (100.00ms, pinned 0 bytes)
10.0.0.4:5: REFUSED closed before its first message
10.0.0.5:6: BUSY 16 peers served at once\x1b[2J
{"peer":"10.0.0.2:40000","result":"pass","test":{"kind":"bw","op":"write","size":65536,"iters":200},"usec":1000000,"pinned_bytes":135168,"results":[{"test":"bw","op":"write","size":65536,"iters":200,"bytes":13107200,"seconds":1,"bw_gbps":0.1048576,"msg_rate_mpps":0.0002}]}
{"peer":"10.0.0.3:40000","result":"fail","test":{"kind":"bw","op":"write","size":65536,"iters":200},"usec":2000000,"pinned_bytes":0,"step":"bw_write","error":"no word from the peer for 10s","results":[]}
{"peer":"10.0.0.6:40000","result":"fail","test":{"kind":"bw","op":"write","size":65536,"iters":200},"usec":100000,"pinned_bytes":0,"step":"reg_mr","error":"REG_MR: cannot allocate memory","cause":"RLIMIT_MEMLOCK (8 MiB) is too small","results":[]}
{"peer":"10.0.0.4:5","result":"refused","error":"closed before its first message"}
{"peer":"10.0.0.5:6","result":"busy","error":"busy: 16 peers served at once\\x1b[2J"}
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", &b, want)
	}
}

// TestProbeResultPeerText plays a peer whose names and messages carry
// terminal controls: a failed probe must print FAIL, whatever the peer's
// ESC, OSC (52: the clipboard), C1 CSI or CR bytes try to erase, move or
// rewrite; text and JSON carry them escaped, the JSON is valid and says
// ok false.
func TestProbeResultPeerText(t *testing.T) {
	const rewrite = "\r\x1b[2K\x1b[1APASS: everything verified\x1b]52;c;cm0gLXJmIH4=\x07\xc2\x9b8m\x9b\x7f\xff"
	r := &verbsprobe.Result{Device: "rxe0", Port: 1, Driver: "rxe", GIDIndex: 1,
		Peer: &verbsprobe.PeerResult{Role: verbsprobe.RoleClient, Test: &verbsprobe.Test{Kind: verbsprobe.TestTraffic, Size: 8192},
			Host: "10.0.0.2:18515", Remote: &verbsprobe.Endpoint{Ifname: "rxe0" + rewrite, Port: 1,
				Driver: "rxe" + rewrite, LinkLayer: ib.LinkLayerEthernet, GIDType: "RoCE v2" + rewrite, GIDIndex: 1, QPN: 17}},
		Steps: []verbsprobe.Step{
			{Name: "open", OK: true, Detail: "the peer: " + rewrite},
			{Name: "peer_test", Err: &verbsprobe.StepError{Step: "peer_test",
				Err: &verbsprobe.RemoteFailure{Step: "verify" + rewrite, Message: rewrite}, Cause: rewrite}},
		},
	}
	var series verbsprobe.Series
	series.Add(r)
	var text bytes.Buffer
	p := output.New(&text, output.Options{})
	ProbeResult(p, r, &series, 1)
	p.Flush()
	out := text.String()
	for i, c := range out {
		if (c < 0x20 && c != '\n') || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == utf8.RuneError {
			t.Errorf("text carries %U at %d", c, i)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "FAIL at peer_test" {
		t.Errorf("last line %q, want FAIL at peer_test", last)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "PASS") {
			t.Errorf("a line reads %q", l)
		}
	}
	if !strings.Contains(out, `rxe0\x0d\x1b[2K\x1b[1APASS: everything verified\x1b]52;c;cm0gLXJmIH4=\x07\xc2\x9b8m\x9b\x7f\xff/1`) {
		t.Errorf("the peer's ifname is not escaped as expected:\n%s", out)
	}

	var js bytes.Buffer
	p = output.New(&js, output.Options{JSON: true})
	ProbeResult(p, r, &series, 1)
	p.Flush()
	for i, c := range js.String() {
		if c == 0x7f || (c >= 0x80 && c < 0xa0) || c == utf8.RuneError {
			t.Errorf("JSON carries %U at %d", c, i)
		}
	}
	var got struct {
		OK    bool `json:"ok"`
		Steps []struct{ Detail, Error, Cause string }
		Peer  struct {
			Ifname    string `json:"ifname"`
			Driver    string `json:"driver"`
			LinkLayer string `json:"link_layer"`
			GIDType   string `json:"gid_type"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	esc := output.Escape(rewrite)
	if got.OK || got.Peer.Ifname != "rxe0"+esc || got.Peer.Driver != "rxe"+esc || got.Peer.LinkLayer != "Ethernet" ||
		got.Peer.GIDType != "RoCE v2"+esc || got.Steps[0].Detail != "the peer: "+esc || got.Steps[1].Cause != esc ||
		got.Steps[1].Error != output.Escape(r.Steps[1].Err.Err.Error()) {
		t.Errorf("JSON does not carry the text's escaped strings: %+v", got)
	}
}
