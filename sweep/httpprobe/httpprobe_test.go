package httpprobe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
)

// exporterFake answers /probe as grdma exporter's documentation says
// (pingmesh-api: the URL's parameters, the scrape timeout header, the
// answer's metric families, failure reasons), for a fleet of nodes on
// 127.0.0.N: node N's exporter tests "from" 127.0.0.N.
type exporterFake struct {
	t       testing.TB
	bw      func(client, server string) float64 // Gb/s
	latUsec func(client, server string) float64
	// failure, when it returns a reason, fails the probe with it.
	failure func(client, server string) (reason, step string)
	user    string // basic auth wanted, "" none
	pass    string

	mu   sync.Mutex
	seen []url.Values
}

func (e *exporterFake) handler(self string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != e.user || p != e.pass {
				w.Header().Set("WWW-Authenticate", "Basic")
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path != "/probe" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		target := q.Get("target")
		if target == "" {
			http.Error(w, "the target parameter is missing: /probe?target=HOST&module=NAME", http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.seen = append(e.seen, q)
		e.mu.Unlock()
		fail := func(reason, step string) {
			fmt.Fprintf(w, "# TYPE probe_failure_info gauge\nprobe_failure_info{reason=%q,step=%q} 1\n# TYPE probe_success gauge\nprobe_success 0\n"+
				"# TYPE probe_duration_seconds gauge\nprobe_duration_seconds 0.01\n", reason, step)
		}
		for k := range q {
			switch k {
			case "target", "module", "op", "size", "iters", "duration", "debug":
			default:
				fail("bad_parameter", "")
				return
			}
		}
		if h := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); h == "" {
			e.t.Errorf("no X-Prometheus-Scrape-Timeout-Seconds header")
		}
		if e.failure != nil {
			if reason, step := e.failure(self, target); reason != "" {
				fail(reason, step)
				return
			}
		}
		switch q.Get("module") {
		case "rc_bw":
			bps := e.bw(self, target) * 1e9 / 8
			fmt.Fprintf(w, `# HELP probe_rdma_bandwidth_bytes_per_second Payload bandwidth of a bw test (this side's measurement).
# TYPE probe_rdma_bandwidth_bytes_per_second gauge
probe_rdma_bandwidth_bytes_per_second %g
# TYPE probe_rdma_info gauge
probe_rdma_info{device="rxe0",gid="::ffff:%s",port="1",remote_gid="::ffff:%s",test="bw write"} 1
# TYPE probe_rdma_messages gauge
probe_rdma_messages 7629
# TYPE probe_rdma_test_duration_seconds gauge
probe_rdma_test_duration_seconds 0.5
# TYPE probe_rdma_transferred_bytes gauge
probe_rdma_transferred_bytes %g
# TYPE probe_success gauge
probe_success 1
# TYPE probe_duration_seconds gauge
probe_duration_seconds 0.61
`, bps, self, target, bps*0.5)
		case "rc_lat":
			l := e.latUsec(self, target) / 1e6
			fmt.Fprintf(w, `# HELP probe_rdma_latency_seconds Latency of a lat test.
# TYPE probe_rdma_latency_seconds summary
probe_rdma_latency_seconds{quantile="0"} %g
probe_rdma_latency_seconds{quantile="0.5"} %g
probe_rdma_latency_seconds{quantile="0.99"} %g
probe_rdma_latency_seconds{quantile="1"} %g
probe_rdma_latency_seconds_sum %g
probe_rdma_latency_seconds_count 1000
# TYPE probe_rdma_messages gauge
probe_rdma_messages 1000
# TYPE probe_rdma_test_duration_seconds gauge
probe_rdma_test_duration_seconds 0.01
# TYPE probe_rdma_transferred_bytes gauge
probe_rdma_transferred_bytes 2000
# TYPE probe_success gauge
probe_success 1
`, l*0.9, l, l*1.5, l*2, l*1000)
		default:
			fail("unknown_module", "")
		}
	})
}

// fleet starts n fake exporters on 127.0.0.2 ... (distinct addresses, so
// that a target names one node) and returns the Prober's nodes.
func (e *exporterFake) fleet(t *testing.T, n int) []Node { return e.fleetB(t, n) }

func (e *exporterFake) fleetB(t testing.TB, n int) []Node {
	t.Helper()
	var nodes []Node
	for i := range n {
		addr := fmt.Sprintf("127.0.0.%d", i+2)
		ln, err := net.Listen("tcp", addr+":0")
		if err != nil {
			t.Skipf("no loopback address %s: %v", addr, err)
		}
		s := httptest.NewUnstartedServer(e.handler(addr))
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		t.Cleanup(s.Close)
		port := ln.Addr().(*net.TCPAddr).Port
		nodes = append(nodes, NodeOf(sweep.Host{Name: addr, Port: port}, "http", 0))
	}
	return nodes
}

func params(n int, tests ...verbsprobe.Test) sweep.Params {
	p := sweep.Params{Schedule: sweep.KindAllPairs, Tests: tests}
	for i := range n {
		p.Hosts = append(p.Hosts, fmt.Sprintf("127.0.0.%d", i+2))
	}
	return p
}

var (
	bwTest  = verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Size: 4096, Duration: 500 * time.Millisecond}
	latTest = verbsprobe.Test{Kind: verbsprobe.TestLatency, Op: verbsprobe.OpWrite, Size: 2, Iters: 1000}
)

func TestURL(t *testing.T) {
	p := &Prober{Nodes: []Node{NodeOf(sweep.Host{Name: "node01"}, "https", 0), NodeOf(sweep.Host{Name: "node02", Port: 9100}, "http", 18600),
		NodeOf(sweep.Host{Name: "fd00::1"}, "http", 0)}}
	for _, tc := range []struct {
		client, server int
		test           verbsprobe.Test
		want           string
	}{
		{0, 1, bwTest, "https://node01:10041/probe?duration=500ms&module=rc_bw&op=write&size=4096&target=node02%3A18600"},
		{1, 0, latTest, "http://node02:9100/probe?iters=1000&module=rc_lat&op=write&size=2&target=node01"},
		{0, 2, latTest, "https://node01:10041/probe?iters=1000&module=rc_lat&op=write&size=2&target=%5Bfd00%3A%3A1%5D"},
		{2, 0, bwTest, "http://[fd00::1]:10041/probe?duration=500ms&module=rc_bw&op=write&size=4096&target=node01"},
	} {
		if got := p.URL(tc.client, tc.server, tc.test); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	p.BWModule, p.LatModule = "my_bw", "my_lat"
	if got := p.URL(0, 1, bwTest); !strings.Contains(got, "module=my_bw") {
		t.Errorf("bw-module: %s", got)
	}
}

// The coordinator through fake exporters: the figures arrive as sent,
// and a planted slow node is the one verdict.
func TestCoordinatedSweepOverHTTP(t *testing.T) {
	const bad = "127.0.0.6"
	e := &exporterFake{t: t,
		bw: func(c, s string) float64 {
			if c == bad || strings.HasPrefix(s, bad) {
				return 2
			}
			return 40
		},
		latUsec: func(c, s string) float64 { return 3 },
	}
	nodes := e.fleet(t, 6)
	c := &sweep.Coordinator{Params: params(6, bwTest, latTest), Prober: &Prober{Nodes: nodes}, Confirm: true, Criteria: sweep.DefaultCriteria}
	rep, recs, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Kind != sweep.VerdictNode || rep.Verdicts[0].Nodes[0] != bad {
		t.Fatalf("verdicts %+v", rep.Verdicts)
	}
	for _, r := range recs {
		if r.Test == nil || r.Test.Role != verbsprobe.RoleClient || r.Test.Pass != sweep.KindAllPairs {
			continue
		}
		f := r.Test.Figures
		if f == nil {
			t.Fatalf("no figures: %+v", r.Test)
		}
		switch r.Test.Test.Kind {
		case verbsprobe.TestBandwidth:
			want := 40.0
			if r.Node == bad || r.Test.Peer == bad {
				want = 2
			}
			if f.BWGbps != want || f.Iters != 7629 || f.Seconds != 0.5 {
				t.Errorf("bw figures %+v, want %g Gb/s", f, want)
			}
		case verbsprobe.TestLatency:
			if l := f.LatUsec; l == nil || l.Median != 3 || l.Min != 2.7 || l.P99 != 4.5 || l.Max != 6 || l.Avg != 3 || f.Iters != 1000 {
				t.Errorf("lat figures %+v %+v", f, f.LatUsec)
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range e.seen {
		if q.Get("module") == "rc_bw" && (q.Get("duration") != "500ms" || q.Get("size") != "4096" || q.Get("op") != "write" || q.Has("iters")) {
			t.Errorf("bw request %v", q)
		}
		if q.Get("module") == "rc_lat" && (q.Get("iters") != "1000" || q.Get("size") != "2" || q.Has("duration")) {
			t.Errorf("lat request %v", q)
		}
	}
}

// Failures map to the node that took no part: an exporter that does not
// answer (the client), nothing on the responder's port (the server), no
// RDMA port (the client); other reasons are the pair's.
func TestFailures(t *testing.T) {
	e := &exporterFake{t: t, bw: func(c, s string) float64 { return 10 }, latUsec: func(c, s string) float64 { return 3 },
		failure: func(c, s string) (string, string) {
			switch {
			case s == "127.0.0.3":
				return "no_responder", "connect"
			case c == "127.0.0.4":
				return "no_device", "resolve"
			case s == "127.0.0.5":
				return "failed", "modify_qp_rtr"
			case s == "127.0.0.6":
				return "responder_refused", "accept"
			}
			return "", ""
		}}
	nodes := e.fleet(t, 5)
	// A sixth node whose exporter is not there at all.
	ln, _ := net.Listen("tcp", "127.0.0.7:0")
	dead := ln.Addr().String()
	ln.Close()
	h, p, _ := net.SplitHostPort(dead)
	port, _ := strconv.Atoi(p)
	nodes = append(nodes, NodeOf(sweep.Host{Name: h, Port: port}, "http", 0))
	nodes[4].Target = "127.0.0.6" // node 4 (127.0.0.6 as a target) refuses
	pr := &Prober{Nodes: nodes}
	ctx := context.Background()
	for _, tc := range []struct {
		client, server int
		outcome        sweep.Outcome
		down           int
		step, err      string
	}{
		{0, 1, sweep.OutcomeNoAnswer, 1, "connect", "nothing answers on 127.0.0.3's responder port (no_responder)"},
		{2, 0, sweep.OutcomeRefused, 2, "resolve", "127.0.0.4 has no RDMA port to test from (no_device)"},
		{0, 3, sweep.OutcomeFailed, -1, "modify_qp_rtr", "failed at modify_qp_rtr"},
		{0, 4, sweep.OutcomeRefused, -1, "accept", "127.0.0.6's responder refused 127.0.0.2 at accept"},
		{5, 0, sweep.OutcomeNoAnswer, 5, "", "the exporter at http://" + dead + " did not answer"},
	} {
		r := pr.Probe(ctx, tc.client, tc.server, bwTest, 2*time.Second)
		if r.Outcome != tc.outcome || r.Down != tc.down || r.Step != tc.step || !strings.Contains(r.Error, tc.err) || r.Figures != nil {
			t.Errorf("%d→%d: %+v, want %s down %d step %q saying %q", tc.client, tc.server, r, tc.outcome, tc.down, tc.step, tc.err)
		}
	}
	if err := pr.Check(ctx, 0); err != nil {
		t.Errorf("check of a live exporter: %v", err)
	}
	if err := pr.Check(ctx, 5); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("check of a dead exporter: %v", err)
	}
	// A module the exporter lacks: refused, no node blamed.
	pr.BWModule = "nope"
	if r := pr.Probe(ctx, 0, 2, bwTest, time.Second); r.Outcome != sweep.OutcomeRefused || r.Down != -1 || !strings.Contains(r.Error, "unknown_module") {
		t.Errorf("unknown module: %+v", r)
	}
}

// Credentials: refused without them (the check says what to give),
// accepted with them; never sent to where an exporter redirects.
func TestCredentials(t *testing.T) {
	e := &exporterFake{t: t, bw: func(c, s string) float64 { return 10 }, latUsec: func(c, s string) float64 { return 3 }, user: "sweep", pass: "s3cret"}
	nodes := e.fleet(t, 2)
	pr := &Prober{Nodes: nodes}
	ctx := context.Background()
	if err := pr.Check(ctx, 0); err == nil || !strings.Contains(err.Error(), "refused the credentials (HTTP 401)") || !strings.Contains(err.Error(), "http-config") {
		t.Errorf("check without credentials: %v", err)
	}
	if r := pr.Probe(ctx, 0, 1, bwTest, time.Second); r.Outcome != sweep.OutcomeRefused || r.Down != 0 {
		t.Errorf("probe without credentials: %+v", r)
	}
	pr.Client = &http.Client{Transport: basicAuth{"sweep", "s3cret", http.DefaultTransport}}
	if err := pr.Check(ctx, 0); err != nil {
		t.Errorf("check with credentials: %v", err)
	}
	if r := pr.Probe(ctx, 0, 1, bwTest, time.Second); r.Outcome != sweep.OutcomeOK || r.Figures.BWGbps != 10 {
		t.Errorf("probe with credentials: %+v", r)
	}
}

type basicAuth struct {
	user, pass string
	rt         http.RoundTripper
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.pass)
	return b.rt.RoundTrip(r)
}

// Hostile exporters: garbage, an endless answer, silence, absurd
// figures, a redirect elsewhere. Each probe fails within its time, says
// why in printable text, and nothing is believed.
func TestHostileExporter(t *testing.T) {
	var stolen sync.Mutex
	leaked := ""
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Lock()
		leaked = r.Header.Get("Authorization")
		stolen.Unlock()
	}))
	defer thief.Close()
	answers := map[string]http.HandlerFunc{
		"garbage": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("\x1b[31mHELLO\x00 {not: metrics}\n")) },
		"endless": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_success 1\n# "))
			chunk := []byte(strings.Repeat("x", 64<<10))
			for range (MaxAnswer / len(chunk)) + 4 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		},
		"silent": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		},
		"nan": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_success 1\nprobe_rdma_bandwidth_bytes_per_second NaN\n"))
		},
		"negative": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_success 1\nprobe_rdma_bandwidth_bytes_per_second -5\n"))
		},
		"huge-lat": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("# TYPE probe_rdma_latency_seconds summary\nprobe_rdma_latency_seconds{quantile=\"0.5\"} +Inf\nprobe_rdma_latency_seconds_sum 1\nprobe_rdma_latency_seconds_count 1\nprobe_success 1\n"))
		},
		"no-success": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_rdma_bandwidth_bytes_per_second 1e9\n"))
		},
		"reason-escape": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_success 0\nprobe_failure_info{reason=\"\x1b[2J" + strings.Repeat("z", 2000) + "\",step=\"\\n\"} 1\n"))
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, thief.URL+"/probe", http.StatusFound)
		},
		"500": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		"lat-as-bw": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("probe_success 1\nprobe_rdma_messages 3\n"))
		},
	}
	for name, h := range answers {
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(h)
			defer s.Close()
			u, _ := url.Parse(s.URL)
			pr := &Prober{Nodes: []Node{{Exporter: "http://" + u.Host, Target: "a"}, {Exporter: "http://" + u.Host, Target: "b"}},
				Client: &http.Client{Transport: basicAuth{"sweep", "s3cret", http.DefaultTransport},
					CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
			r := pr.Probe(context.Background(), 0, 1, bwTest, 300*time.Millisecond)
			if r.Outcome == sweep.OutcomeOK || r.Figures != nil || r.Error == "" {
				t.Errorf("believed: %+v", r)
			}
			if len(r.Error) > maxText+64 || strings.ContainsAny(r.Error, "\x1b\x00\n") {
				t.Errorf("error not fit to print: %q", r.Error)
			}
			t.Logf("%s: %s %q", name, r.Outcome, r.Error)
		})
	}
	stolen.Lock()
	defer stolen.Unlock()
	if leaked != "" {
		t.Errorf("the credentials went where the exporter redirected: %q", leaked)
	}
}

func TestParse(t *testing.T) {
	a, err := Parse(strings.NewReader("probe_success 0\nprobe_failure_info{reason=\"timeout\",step=\"bw_write\"} 1\n"))
	if err != nil || a.Success || a.Reason != "timeout" || a.Step != "bw_write" {
		t.Errorf("%+v %v", a, err)
	}
	r := a.result(bwTest, "x", "y", 0, 1)
	if r.Outcome != sweep.OutcomeFailed || r.Error != "timeout at bw_write" || r.Down != -1 {
		t.Errorf("%+v", r)
	}
}
