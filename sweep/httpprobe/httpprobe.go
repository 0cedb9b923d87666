// Package httpprobe drives the tests of a coordinated sweep through the
// nodes' exporters: node X's test against node Y is
// GET http://X:10041/probe?target=Y&module=rc_bw&op=write&size=65536&duration=500ms
// (grdma exporter's /probe, blackbox_exporter's protocol), answered with
// the probe's metrics in Prometheus' text format, which Prober turns into
// a sweep.ProbeResult: the figures, or why it failed and which node took
// no part.
//
// The answers are a peer's words: Prober reads at most MaxAnswer bytes of
// one, accepts only finite, non-negative figures, escapes and cuts what
// it repeats, and follows no redirect (credentials go to the listed
// exporters only).
package httpprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/verbsprobe"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Defaults.
const (
	DefaultExporterPort  = 10041 // grdma exporter's
	DefaultResponderPort = 18515 // grdma probe DEV serve's
	DefaultBWModule      = "rc_bw"
	DefaultLatModule     = "rc_lat"
	// MaxAnswer bounds an answer's body: a probe's metrics are a few
	// kilobytes.
	MaxAnswer = 1 << 20
	// maxText bounds what an answer contributes to a record.
	maxText = 256
	// slack is how much longer than the probe's time an answer may take
	// to arrive (the exporter's own work, the network).
	slack = 5 * time.Second
)

// Node is one node of the sweep as the coordinator reaches it.
type Node struct {
	// Exporter is the base URL of its exporter: "http://node01:10041".
	Exporter string
	// Target is how other nodes' exporters name its responder in
	// target=: "node01", or "node01:18600" for another port.
	Target string
}

// NodeOf is the Node of host (its :PORT, if any, is its exporter's) for
// scheme "http" or "https" and the responders' port.
func NodeOf(h sweep.Host, scheme string, responderPort int) Node {
	port := h.Port
	if port == 0 {
		port = DefaultExporterPort
	}
	n := Node{Exporter: scheme + "://" + net.JoinHostPort(h.Name, strconv.Itoa(port)), Target: h.Name}
	if responderPort != 0 && responderPort != DefaultResponderPort {
		n.Target = net.JoinHostPort(h.Name, strconv.Itoa(responderPort))
	} else if strings.Contains(h.Name, ":") {
		n.Target = "[" + h.Name + "]" // an IPv6 address
	}
	return n
}

// Prober is a sweep.TestProber over HTTP.
type Prober struct {
	Nodes  []Node // by rank
	Client *http.Client
	// BWModule and LatModule are the exporters' modules that run bw and
	// lat tests (DefaultBWModule, DefaultLatModule): an rc module of that
	// kind, whose op, size, iters and duration each request sets.
	BWModule, LatModule string
}

func (p *Prober) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return http.DefaultClient
}

// URL is the /probe request of test from client to server.
func (p *Prober) URL(client, server int, t verbsprobe.Test) string {
	q := url.Values{}
	q.Set("target", p.Nodes[server].Target)
	module := p.BWModule
	if module == "" {
		module = DefaultBWModule
	}
	if t.Kind == verbsprobe.TestLatency {
		module = p.LatModule
		if module == "" {
			module = DefaultLatModule
		}
	}
	q.Set("module", module)
	q.Set("op", string(t.Op))
	q.Set("size", strconv.Itoa(t.Size))
	if t.Duration > 0 {
		q.Set("duration", t.Duration.String())
	} else {
		q.Set("iters", strconv.Itoa(t.Iters))
	}
	return p.Nodes[client].Exporter + "/probe?" + q.Encode()
}

// Check asks the node's exporter for /probe without a target: an
// exporter that serves /probe and takes the credentials answers 400.
func (p *Prober) Check(ctx context.Context, rank int) error {
	ctx, cancel := context.WithTimeout(ctx, slack)
	defer cancel()
	u := p.Nodes[rank].Exporter + "/probe"
	resp, err := p.get(ctx, u, 0)
	if err != nil {
		return fmt.Errorf("its exporter at %s did not answer: %v", u, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswer))
	switch resp.StatusCode {
	case http.StatusBadRequest:
		return nil
	case http.StatusOK:
		// An exporter of another kind, or a proxy: let the probes say.
		return nil
	}
	return statusError(u, resp.StatusCode)
}

func statusError(u string, code int) error {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("its exporter at %s refused the credentials (HTTP %d): give http-config FILE with its basic_auth or TLS client certificate", u, code)
	case http.StatusNotFound:
		return fmt.Errorf("its exporter at %s has no /probe (HTTP 404): run a grdma exporter that serves it", u)
	}
	if code >= 300 && code < 400 {
		return fmt.Errorf("its exporter at %s redirects (HTTP %d), which a sweep does not follow: give the exporter's own address", u, code)
	}
	return fmt.Errorf("its exporter at %s answered HTTP %d", u, code)
}

func (p *Prober) get(ctx context.Context, u string, timeout time.Duration) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if timeout > 0 {
		// The exporter takes its probe's time from the scrape timeout.
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	}
	return p.client().Do(req)
}

// Probe runs the test through the client's exporter.
func (p *Prober) Probe(ctx context.Context, client, server int, t verbsprobe.Test, timeout time.Duration) sweep.ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout+slack)
	defer cancel()
	u := p.URL(client, server, t)
	resp, err := p.get(ctx, u, timeout)
	if err != nil {
		return sweep.ProbeResult{Outcome: sweep.OutcomeNoAnswer, Down: client,
			Error: text(fmt.Sprintf("the exporter at %s did not answer: %v", p.Nodes[client].Exporter, unwrapURL(err)))}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	switch {
	case resp.StatusCode != http.StatusOK:
		r := sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: text(statusError(p.Nodes[client].Exporter, resp.StatusCode).Error())}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound {
			r.Outcome, r.Down = sweep.OutcomeRefused, client
		}
		return r
	case err != nil:
		return sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: text(fmt.Sprintf("reading the exporter's answer: %v", err))}
	case len(body) > MaxAnswer:
		return sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: fmt.Sprintf("the exporter's answer is over %d bytes", MaxAnswer)}
	}
	a, err := Parse(strings.NewReader(string(body)))
	if err != nil {
		return sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: text(fmt.Sprintf("the exporter's answer: %v", err))}
	}
	return a.result(t, p.Nodes[client].Target, p.Nodes[server].Target, client, server)
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// text is a peer's words made fit to print and record.
func text(s string) string {
	if len(s) > maxText {
		s = s[:maxText] + "..."
	}
	return output.Escape(s)
}

// Answer is what a /probe answer says.
type Answer struct {
	Success  bool
	Reason   string // probe_failure_info's reason label
	Step     string // and its step
	Duration float64
	// Measured: probe_rdma_bandwidth_bytes_per_second,
	// _transferred_bytes, _messages, _test_duration_seconds.
	BandwidthBps, Bytes, Messages, TestSeconds float64
	HasBandwidth                               bool
	// Latency quantiles in seconds (0, 0.5, 0.99, 1), and _sum/_count.
	Latency          map[float64]float64
	LatSum, LatCount float64
}

// Parse reads a /probe answer in Prometheus' text format. It refuses an
// answer without probe_success, and values that are not finite or are
// negative.
func Parse(r io.Reader) (*Answer, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("not Prometheus' text format: %v", err)
	}
	a := &Answer{Latency: map[float64]float64{}}
	one := func(name string) (float64, bool, error) {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0, false, nil
		}
		v := value(f.GetMetric()[0])
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return 0, false, fmt.Errorf("%s is %v", name, v)
		}
		return v, true, nil
	}
	s, ok, err := one("probe_success")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("no probe_success: is this grdma exporter's /probe?")
	}
	a.Success = s == 1
	for _, m := range []struct {
		name string
		dst  *float64
	}{{"probe_duration_seconds", &a.Duration}, {"probe_rdma_bandwidth_bytes_per_second", &a.BandwidthBps},
		{"probe_rdma_transferred_bytes", &a.Bytes}, {"probe_rdma_messages", &a.Messages},
		{"probe_rdma_test_duration_seconds", &a.TestSeconds}} {
		v, ok, err := one(m.name)
		if err != nil {
			return nil, err
		}
		*m.dst = v
		if ok && m.name == "probe_rdma_bandwidth_bytes_per_second" {
			a.HasBandwidth = true
		}
	}
	if f := fams["probe_failure_info"]; f != nil && len(f.GetMetric()) > 0 {
		a.Reason, a.Step = label(f.GetMetric()[0], "reason"), label(f.GetMetric()[0], "step")
	}
	if f := fams["probe_rdma_latency_seconds"]; f != nil && len(f.GetMetric()) > 0 {
		if sm := f.GetMetric()[0].GetSummary(); sm != nil {
			for _, q := range sm.GetQuantile() {
				v := q.GetValue()
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return nil, fmt.Errorf("probe_rdma_latency_seconds{quantile=\"%g\"} is %v", q.GetQuantile(), v)
				}
				a.Latency[q.GetQuantile()] = v
			}
			a.LatSum, a.LatCount = sm.GetSampleSum(), float64(sm.GetSampleCount())
			if math.IsNaN(a.LatSum) || math.IsInf(a.LatSum, 0) || a.LatSum < 0 {
				return nil, fmt.Errorf("probe_rdma_latency_seconds_sum is %v", a.LatSum)
			}
		}
	}
	return a, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// result turns the answer to test from client to server into a
// sweep.ProbeResult.
func (a *Answer) result(t verbsprobe.Test, clientName, serverName string, client, server int) sweep.ProbeResult {
	if !a.Success {
		return a.failure(clientName, serverName, client, server)
	}
	f := &sweep.Figures{Iters: int(min(a.Messages, math.MaxInt32)), Bytes: uint64(min(a.Bytes, 1<<62)), Seconds: round(a.TestSeconds, 6)}
	if a.TestSeconds > 0 {
		f.MsgRateMpps = round(a.Messages/a.TestSeconds/1e6, 6)
	}
	switch t.Kind {
	case verbsprobe.TestBandwidth:
		if !a.HasBandwidth {
			return sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: "the exporter's answer has no probe_rdma_bandwidth_bytes_per_second: is the module a bw test?"}
		}
		f.BWGbps = round(a.BandwidthBps*8/1e9, 6)
	case verbsprobe.TestLatency:
		med, ok := a.Latency[0.5]
		if !ok {
			return sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Down: -1, Error: "the exporter's answer has no probe_rdma_latency_seconds: is the module a lat test?"}
		}
		us := func(s float64) float64 { return round(s*1e6, 1) }
		l := &sweep.LatUsec{Min: us(a.Latency[0]), Median: us(med), P99: us(a.Latency[0.99]), Max: us(a.Latency[1])}
		if a.LatCount > 0 {
			l.Avg = us(a.LatSum / a.LatCount)
		}
		f.LatUsec = l
		if a.TestSeconds > 0 {
			f.BWGbps = round(a.Bytes*8/a.TestSeconds/1e9, 6)
		}
	}
	return sweep.ProbeResult{Outcome: sweep.OutcomeOK, Down: -1, Figures: f}
}

// failure maps a failed probe's reason (grdma exporter's
// probe_failure_info) to what the sweep records: which node took no
// part, if one did.
func (a *Answer) failure(clientName, serverName string, client, server int) sweep.ProbeResult {
	reason, step := text(a.Reason), text(a.Step)
	r := sweep.ProbeResult{Outcome: sweep.OutcomeFailed, Step: step, Down: -1}
	at := ""
	if step != "" {
		at = " at " + step
	}
	switch a.Reason {
	case "no_responder":
		r.Outcome, r.Down = sweep.OutcomeNoAnswer, server
		r.Error = fmt.Sprintf("nothing answers on %s's responder port (no_responder)", serverName)
	case "no_device", "unsupported":
		r.Outcome, r.Down = sweep.OutcomeRefused, client
		r.Error = fmt.Sprintf("%s has no RDMA port to test from (%s)", clientName, reason)
	case "unknown_module", "bad_parameter", "bad_target":
		r.Outcome = sweep.OutcomeRefused
		r.Error = fmt.Sprintf("%s's exporter refused the test (%s): its modules or version differ", clientName, reason)
	case "responder_refused":
		r.Outcome = sweep.OutcomeRefused
		r.Error = fmt.Sprintf("%s's responder refused %s%s (responder_refused: its limits, allow-list or shared secret)", serverName, clientName, at)
	case "responder_busy":
		r.Error = fmt.Sprintf("%s's responder stayed busy (responder_busy)", serverName)
	case "probe_busy":
		r.Error = fmt.Sprintf("%s's exporter had no free probe slot in time (probe_busy)", clientName)
	case "resolve":
		r.Error = fmt.Sprintf("%s cannot resolve %s (resolve)", clientName, serverName)
	case "":
		r.Error = "the probe failed without saying why (no probe_failure_info)"
	default:
		r.Error = fmt.Sprintf("%s%s", reason, at)
	}
	return r
}

func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}
