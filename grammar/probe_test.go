package grammar_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/verbsprobe"
)

// The words of grdma probe, and the usage errors of words that are wrong
// or do not go together (grdma exits 2 with them).

func TestParseProbe(t *testing.T) {
	req, err := grammar.ParseProbe(strings.Fields("mlx5_0/2 gid 3 tr co 5"))
	o := req.Options
	if err != nil || o.Device != "mlx5_0" || o.Port != 2 || o.GIDIndex != 3 || !o.Traffic || req.Count != 5 {
		t.Errorf("ParseProbe = %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe([]string{"rxe0"})
	if err != nil || req.Options.GIDIndex != verbsprobe.AutoGID || req.Options.Port != 0 || req.Count != 1 || req.Options.Traffic {
		t.Errorf("ParseProbe(rxe0) = %+v, %v", req, err)
	}
}

func TestParseProbePeer(t *testing.T) {
	for _, tt := range []struct {
		line string
		want grammar.ProbeRequest
	}{
		{"rxe0 listen", grammar.ProbeRequest{Listen: true, ListenAddr: ":18515"}},
		{"rxe0 listen :18600 pingpong iters 10", grammar.ProbeRequest{Listen: true, ListenAddr: "0.0.0.0:18600",
			Test: verbsprobe.Test{Kind: verbsprobe.TestPingpong, Iters: 10}}},
		{"rxe0 gid-index 1 peer hosta", grammar.ProbeRequest{PeerAddr: "hosta:18515"}},
		{"rxe0 peer 10.0.0.1:9 bw", grammar.ProbeRequest{PeerAddr: "10.0.0.1:9", Test: verbsprobe.Test{Kind: verbsprobe.TestBandwidth}}},
		{"rxe0 peer h bw read size 4096 duration 2s timeout 3s", grammar.ProbeRequest{PeerAddr: "h:18515", Timeout: 3 * time.Second,
			Test: verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpRead, Size: 4096, Duration: 2 * time.Second}}},
		{"rxe0 peer h lat send iters 10", grammar.ProbeRequest{PeerAddr: "h:18515", Test: verbsprobe.Test{Kind: verbsprobe.TestLatency, Op: verbsprobe.OpSend, Iters: 10}}},
		{"rxe0 peer h traffic", grammar.ProbeRequest{PeerAddr: "h:18515", Test: verbsprobe.Test{Kind: verbsprobe.TestTraffic}}},
		{"rxe0 peer h pingpong size 64", grammar.ProbeRequest{PeerAddr: "h:18515", Test: verbsprobe.Test{Kind: verbsprobe.TestPingpong, Size: 64}}},
	} {
		req, err := grammar.ParseProbe(strings.Fields(tt.line))
		got := grammar.ProbeRequest{Listen: req.Listen, ListenAddr: req.ListenAddr, PeerAddr: req.PeerAddr, Test: req.Test, Timeout: req.Timeout}
		if err != nil || got.Listen != tt.want.Listen || got.ListenAddr != tt.want.ListenAddr || got.PeerAddr != tt.want.PeerAddr ||
			got.Test != tt.want.Test || got.Timeout != tt.want.Timeout {
			t.Errorf("%s: %+v, %v; want %+v", tt.line, got, err, tt.want)
		}
	}
	for line, want := range map[string]string{
		"rxe0 listen bw":                             "listen serves the test its peer asks for: give bw to probe ... peer HOST",
		"rxe0 listen peer h":                         "listen or peer, not both",
		"rxe0 bw":                                    "bw needs a peer",
		"rxe0 traffic count 2 peer h":                "count repeats a probe of this host alone",
		"rxe0 peer h bw lat":                         "bw and lat: one test at a time",
		"rxe0 peer h traffic traffic":                "traffic given twice",
		"rxe0 peer h lat iters 5 duration 1s":        "iters or duration, not both",
		"rxe0 peer h lat duration -1s":               `duration must be a duration from 1ms to 1h0m0s such as 10s or 500ms, not "-1s"`,
		"rxe0 peer h bw size 0":                      `size must be a number from 1 to 268435456, not "0"`,
		"rxe0 peer h:70000":                          `peer: peer address "h:70000": port "70000" is not 1-65535`,
		"rxe0 peer h traffic duration 1s":            "traffic takes no duration",
		"rxe0 peer":                                  "missing peer address HOST[:PORT]",
		"rxe0 peer h from 10.0.0.0/8":                "from restricts who may connect to a listener",
		"rxe0 listen from":                           "from needs HOST[/PREFIX]",
		"rxe0 listen from 10.0.0.0/33":               `from: "10.0.0.0/33" is not ADDR/PREFIX`,
		"rxe0 listen from host_1":                    `from: "host_1" is neither an address, a network nor a host name`,
		"rxe0 serve peer h":                          "serve or peer, not both",
		"rxe0 listen serve":                          "listen or serve, not both",
		"rxe0 serve bw":                              "serve serves the test each peer asks for: give bw to probe ... peer HOST",
		"rxe0 serve count 2":                         "a responder serves until stopped",
		"rxe0 listen peers 4":                        "peers is a limit of a responder",
		"rxe0 peer h memory 4096":                    "memory is a limit of a responder",
		"rxe0 serve peer-memory 1048576 memory 4096": "peer-memory 1048576 is more than memory 4096",
		"rxe0 serve peers 0":                         `peers must be a number from 1 to 4096, not "0"`,
		"rxe0 auth k":                                "auth is a shared secret between two hosts",
		"rxe0 serve auth":                            "missing auth FILE",
	} {
		_, err := grammar.ParseProbe(strings.Fields(line))
		var usage *cmdline.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a usage error saying %q", line, err, want)
		}
	}
}

// from takes addresses, networks and host names up to the next keyword.
func TestParseProbeFrom(t *testing.T) {
	req, err := grammar.ParseProbe(strings.Fields("rxe0 listen 10.0.0.1 from 10.0.0.0/24 hostb fd00::1 timeout 5s"))
	if err != nil || req.ListenAddr != "10.0.0.1:18515" || strings.Join(req.From, " ") != "10.0.0.0/24 hostb fd00::1" || req.Timeout != 5*time.Second {
		t.Errorf("ParseProbe = %+v, %v", req, err)
	}
}

// serve: a responder's limits from its words, size and duration among
// them; a pingpong client's size and iters.
func TestParseProbeServe(t *testing.T) {
	req, err := grammar.ParseProbe(strings.Fields("rxe0/1 serve 10.0.0.1:18600 size 1048576 duration 1m peers 4 memory 16777216 peer-memory 4194304 grace 2s iters 50 timeout 3s from 10.0.0.0/24 auth /etc/k"))
	r := req.Responder
	if err != nil || !req.Serve || req.Listen || req.ListenAddr != "10.0.0.1:18600" || r.MaxPeers != 4 || r.MaxPinnedTotal != 16<<20 ||
		r.Limits.MaxPinned != 4<<20 || r.Limits.MaxSize != 1<<20 || r.Limits.MaxDuration != time.Minute || r.Grace != 2*time.Second ||
		req.Timeout != 3*time.Second || req.Auth != "/etc/k" || req.Test != (verbsprobe.Test{Size: 1 << 20, Iters: 50}) || len(req.From) != 1 {
		t.Errorf("ParseProbe = %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe(strings.Fields("rxe0 se"))
	if err != nil || !req.Serve || req.ListenAddr != ":18515" || req.Responder.WithDefaults().MaxPeers != verbsprobe.DefaultMaxPeers {
		t.Errorf("ParseProbe(rxe0 se) = %+v, %v", req, err)
	}
}

// UD: ud-pingpong against ibv_ud_pingpong (peer) or for its client
// (listen), and ping with its count, interval and sizes.
func TestParseProbeUD(t *testing.T) {
	req, err := grammar.ParseProbe(strings.Fields("rxe0 peer h ud-pingpong iters 10 size 512"))
	if err != nil || req.Test != (verbsprobe.Test{Kind: verbsprobe.TestUDPingpong, Iters: 10, Size: 512}) || req.PeerAddr != "h:18515" {
		t.Errorf("ud-pingpong: %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe(strings.Fields("rxe0 listen ud-pingpong"))
	if err != nil || !req.Listen || req.Test.Kind != verbsprobe.TestUDPingpong {
		t.Errorf("listen ud-pingpong: %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe(strings.Fields("rxe0 peer h ping"))
	if err != nil || !req.Ping || req.Count != 0 || req.Interval != time.Second || req.PingSize != 0 || req.Test.Kind != "" {
		t.Errorf("ping: %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe(strings.Fields("rxe0 peer h:7 ping count 5 interval 200ms size 512 timeout 3s"))
	if err != nil || req.Count != 5 || req.Interval != 200*time.Millisecond || req.PingSize != 512 || req.Test.Size != 0 ||
		req.Timeout != 3*time.Second || req.PeerAddr != "h:7" {
		t.Errorf("ping count 5 ...: %+v, %v", req, err)
	}
	req, err = grammar.ParseProbe(strings.Fields("rxe0 peer h ping size cycle"))
	if err != nil || req.PingSize != 0 {
		t.Errorf("ping size cycle: %+v, %v", req, err)
	}
	for line, want := range map[string]string{
		"rxe0 ping":                           "ping needs a peer",
		"rxe0 listen ping":                    "ping pings a responder",
		"rxe0 serve ping":                     "ping pings a responder",
		"rxe0 peer h ping bw":                 "ping and bw: one test at a time",
		"rxe0 peer h ping iters 3":            "ping takes count N and interval D, not iters",
		"rxe0 peer h ping size 20":            "a UD ping probe is from 40 to 4096 bytes",
		"rxe0 peer h ping size 5000":          "a UD ping probe is from 40 to 4096 bytes",
		"rxe0 peer h interval 1s":             "interval is a ping's",
		"rxe0 peer h bw size cycle":           "size cycle is a ping's",
		"rxe0 peer h ping interval 0s":        "interval must be a duration",
		"rxe0 serve ud-pingpong":              "give ud-pingpong to probe DEV listen",
		"rxe0 ud-pingpong":                    "ud-pingpong needs a peer",
		"rxe0 peer h ud-pingpong duration 1s": "ud-pingpong takes no operation or duration",
		"rxe0 peer h ud-pingpong size 5000":   "a datagram is at most 4096 bytes",
		"rxe0 peer h ping from 10.0.0.0/8":    "from restricts who may connect",
	} {
		_, err := grammar.ParseProbe(strings.Fields(line))
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error with %q", line, err, want)
		}
	}
}
