//go:build e2eguest

package guest

// The exporter's /probe endpoint (issue 26) across the pair bed: a
// responder on A (grdma probe DEV serve), the exporter on B, and
// Debian's Prometheus on B scraping /probe with the relabelling of a
// blackbox scrape configuration: rc_lat, rc_bw and rc_connect against A
// succeed with their results; a target without a responder, a name that
// does not resolve and an unknown module are answers with probe_success 0
// and their reason, never failed scrapes; then the same behind basic
// auth, which Prometheus' scrape configuration passes.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"golang.org/x/crypto/bcrypt"
)

func TestPairProbeExporter(t *testing.T) {
	p := withPeer(t)
	// serve cm: the responder answers over the RDMA CM too (cm_connect).
	srv := p.A.WithTimeout(10*time.Minute).Serve(probePort, grdma(), "-j", "probe", p.Dev, "serve", "timeout", "30s", "cm")
	dir := t.TempDir()
	modules := filepath.Join(dir, "probe.yml")
	os.WriteFile(modules, []byte(`modules:
  rc_lat_send:
    prober: rc
    timeout: 8s
    rc: {test: lat, op: send, size: 4096, iters: 20}
`), 0o644)

	t.Run("Prometheus", func(t *testing.T) {
		exp := startDaemon(t, 10041, grdma(), "exporter", "--web.listen-address="+exporterAddr, "--probe.config.file="+modules)
		// One job per module, each over the targets, as blackbox_exporter's
		// documentation relabels: __address__ becomes the target
		// parameter and the instance, the exporter becomes the address.
		// A latency exchange takes ~20 ms in the emulated guests: rc_lat
		// runs 20 (the iters parameter), not perftest's 1000.
		job := func(module string, targets ...string) string {
			every, params := "6s", ""
			switch module {
			case "rc_bw": // the 2 s test needs a second more and the offset
				every = "12s"
			case "rc_lat":
				params = ", iters: ['20']"
			}
			return fmt.Sprintf(`  - job_name: %[1]s
    metrics_path: /probe
    params: {module: [%[1]s]%[5]s}
    scrape_interval: %[4]s
    scrape_timeout: %[4]s
    static_configs: [{targets: ['%[2]s']}]
    relabel_configs:
      - {source_labels: [__address__], target_label: __param_target}
      - {source_labels: [__param_target], target_label: instance}
      - {target_label: __address__, replacement: '%[3]s'}
`, module, strings.Join(targets, "','"), exporterAddr, every, params)
		}
		cfg := filepath.Join(dir, "prometheus.yml")
		os.WriteFile(cfg, []byte("global: {evaluation_interval: 1s}\nscrape_configs:\n"+
			job("rc_lat", p.PeerAddr, p.PeerAddr+":18599", "no-such-host.invalid")+
			job("rc_bw", p.PeerAddr)+job("rc_connect", p.PeerAddr)+job("rc_lat_send", p.PeerAddr)+job("nosuch", p.PeerAddr)+
			job("cm_connect", p.PeerAddr, p.PeerAddr+":18599")), 0o644)
		prom := startDaemon(t, 9090, layout.Prometheus, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+prometheusAddr)
		const scraped = `count(up == 1) == 9`
		if _, ok := waitQuery(t, 90*time.Second, scraped, nonEmpty); !ok {
			got, _ := promQuery("up")
			t.Fatalf("Prometheus never scraped all 9 probes successfully (up: %v):\n%s\nexporter:\n%s", got, prom.output(), exp.output())
		}
		// One time limit for all the values (each scrape interval is 4-10 s):
		// a responder that is gone fails the test in minutes, not in one
		// minute per value.
		deadline := time.Now().Add(2 * time.Minute)
		for q, want := range map[string]string{
			`probe_success{job="rc_lat",instance="` + p.PeerAddr + `"}`:                                      "1",
			`probe_success{job="rc_bw"}`:                                                                     "1",
			`probe_success{job="rc_connect"}`:                                                                "1",
			`probe_success{job="rc_lat_send"}`:                                                               "1",
			`probe_success{job="cm_connect",instance="` + p.PeerAddr + `"}`:                                  "1",
			`probe_failure_info{job="cm_connect",instance="` + p.PeerAddr + `:18599",reason="no_responder"}`: "1",
			`probe_rdma_latency_seconds_count{job="rc_lat_send"}`:                                            "20",
			`probe_rdma_latency_seconds{job="rc_lat",quantile="0.5"} > 0`:                                    "",
			`probe_rdma_bandwidth_bytes_per_second{job="rc_bw"} > 0`:                                         "",
			`probe_rdma_path_mtu_bytes{job="rc_connect"}`:                                                    "1024",
			`probe_rdma_info{job="rc_lat",device="rxe0",remote_gid="::ffff:` + p.PeerAddr + `"}`:             "1",
			`probe_success{instance="` + p.PeerAddr + `:18599"}`:                                             "0",
			`probe_failure_info{instance="` + p.PeerAddr + `:18599",reason="no_responder",step="connect"}`:   "1",
			`probe_failure_info{instance="no-such-host.invalid",reason="resolve"}`:                           "1",
			`probe_failure_info{job="nosuch",reason="unknown_module"}`:                                       "1",
			`probe_duration_seconds{instance="` + p.PeerAddr + `:18599"} < 2`:                                "",
		} {
			// The first probes may still be running when Prometheus
			// scrapes: wait for the value, not for any.
			got, ok := waitQuery(t, max(time.Until(deadline), time.Second), q, func(s []promSample) bool {
				return len(s) > 0 && (want == "" || fmt.Sprint(s[0].Value) == want)
			})
			if !ok {
				t.Errorf("%s: want %q, last %v", q, want, got)
			}
		}
		if t.Failed() {
			t.Logf("exporter:\n%s", exp.output())
		}
		// The exporter's own metrics count the unknown module (scraped
		// directly here: Prometheus has no job for /metrics).
		body := httpGet(t, "http://"+exporterAddr+"/metrics", "", "")
		if !strings.Contains(body, `grdma_probes_total{module="rc_lat",result="success"}`) {
			t.Errorf("successful probes not counted:\n%s", grepLines(body, "grdma_probe"))
		}
		if !strings.Contains(body, "grdma_probe_module_unknown_total") || strings.Contains(body, "grdma_probe_module_unknown_total 0") {
			t.Errorf("unknown modules not counted:\n%s", grepLines(body, "grdma_probe"))
		}
		dbg := httpGet(t, "http://"+exporterAddr+"/probe?module=rc_lat&target="+p.PeerAddr+"&debug=true", "", "")
		for _, want := range []string{"Logs for the probe:", "probe succeeded", "Metrics that would have been returned:", "probe_success 1", "Module configuration:"} {
			if !strings.Contains(dbg, want) {
				t.Errorf("debug=true lacks %q:\n%s", want, dbg)
			}
		}
	})

	t.Run("BasicAuth", func(t *testing.T) {
		hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		web := filepath.Join(dir, "web.yml")
		os.WriteFile(web, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600)
		startDaemon(t, 10041, grdma(), "exporter", "--web.listen-address="+exporterAddr, "--web.config.file="+web)
		url := "http://" + exporterAddr + "/probe?module=rc_connect&target=" + p.PeerAddr
		if code, _ := fetch(t, url, "", ""); code != http.StatusUnauthorized {
			t.Errorf("/probe without credentials: HTTP %d, want 401", code)
		}
		if body := httpGet(t, url, "prom", "secret"); !strings.Contains(body, "probe_success 1") {
			t.Errorf("/probe with credentials:\n%s", body)
		}
	})

	// Probes cut off when the exporter stops end as failures on A: only
	// the passes are counted.
	s := stopServe(t, srv)
	n := count(servedLines(t, s.stdout))
	if n["pass"] == 0 {
		t.Errorf("the responder's lines: %v\n%s", n, s)
	}
	t.Logf("the responder served %v", n)
}

// fetch GETs url (with basic auth if user is set): the status and body.
func fetch(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// httpGet is fetch of a page that must answer 200: its body.
func httpGet(t *testing.T, url, user, password string) string {
	t.Helper()
	code, body := fetch(t, url, user, password)
	if code != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d\n%s", url, code, body)
	}
	return body
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
