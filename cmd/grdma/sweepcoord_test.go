//go:build !grdma_noprometheus

package main

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/sweep"
)

// fakeExporters starts n fake grdma exporters on 127.0.0.2, 127.0.0.3,
// ... answering /probe as pingmesh-api.md documents it (bw: the
// bandwidth gauge; lat: the latency summary); pairs with slow's node
// measure a twentieth of the others. They want basic auth user:pass
// when user is set. It returns the host list's lines.
func fakeExporters(t *testing.T, n int, slow, user, pass string) []string {
	t.Helper()
	var hosts []string
	for i := range n {
		self := fmt.Sprintf("127.0.0.%d", i+2)
		ln, err := net.Listen("tcp", self+":0")
		if err != nil {
			t.Skipf("no loopback address %s: %v", self, err)
		}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, _ := r.BasicAuth(); user != "" && (u != user || p != pass) {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			q := r.URL.Query()
			target := q.Get("target")
			if target == "" {
				http.Error(w, "the target parameter is missing", http.StatusBadRequest)
				return
			}
			bw := 40e9 / 8
			if self == slow || target == slow {
				bw /= 20
			}
			switch q.Get("module") {
			case "rc_bw":
				fmt.Fprintf(w, "probe_success 1\nprobe_rdma_bandwidth_bytes_per_second %g\nprobe_rdma_messages 100\nprobe_rdma_test_duration_seconds 0.1\nprobe_rdma_transferred_bytes %g\n", bw, bw/10)
			case "rc_lat":
				fmt.Fprint(w, "# TYPE probe_rdma_latency_seconds summary\nprobe_rdma_latency_seconds{quantile=\"0\"} 2e-6\nprobe_rdma_latency_seconds{quantile=\"0.5\"} 3e-6\n"+
					"probe_rdma_latency_seconds{quantile=\"0.99\"} 4e-6\nprobe_rdma_latency_seconds{quantile=\"1\"} 5e-6\nprobe_rdma_latency_seconds_sum 3e-4\nprobe_rdma_latency_seconds_count 100\nprobe_success 1\n")
			default:
				fmt.Fprint(w, "probe_success 0\nprobe_failure_info{reason=\"unknown_module\",step=\"\"} 1\n")
			}
		}))
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		t.Cleanup(s.Close)
		hosts = append(hosts, self+":"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	return hosts
}

// grdma sweep coordinate drives fake exporters: the report names the
// slow node (exit 1) after retests, out keeps every node's records for
// sweep report, --svg writes the heatmap, http-config's basic auth is
// sent.
func TestSweepCoordinate(t *testing.T) {
	dir := t.TempDir()
	const slow = "127.0.0.5"
	hosts := fakeExporters(t, 6, slow, "sweep", "s3cret")
	hostsFile := filepath.Join(dir, "hosts")
	os.WriteFile(hostsFile, []byte(strings.Join(hosts, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "password"), []byte("s3cret\n"), 0o600)
	auth := filepath.Join(dir, "auth.yml")
	os.WriteFile(auth, []byte("basic_auth:\n  username: sweep\n  password_file: password\n"), 0o600)
	records, svg := filepath.Join(dir, "sweep.jsonl"), filepath.Join(dir, "sweep.svg")

	out, stderr, code := runProbe(t, "sweep", "coordinate", "--svg", svg, "hosts", hostsFile, "duration", "100ms", "http-config", auth, "out", records)
	want := "node         " + slow
	if code != exitFailed || !strings.Contains(out, want) || !strings.Contains(stderr, "confirming: 5 pairs") {
		t.Fatalf("exit %d, want 1 and %q\n%s%s", code, want, out, stderr)
	}
	t.Logf("%s%s", stderr, out)
	if strings.Count(out, "\n  node ") > 1 || strings.Contains(out, "link ") {
		t.Errorf("more than the slow node:\n%s", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil || xml.Unmarshal(b, new(struct{ XMLName xml.Name })) != nil || !strings.Contains(string(b), `class="verdict"`) {
		t.Errorf("--svg: %v\n%.300s", err, b)
	}
	again, _, code := runProbe(t, "sweep", "report", records)
	if code != exitFailed || !strings.Contains(again, want) {
		t.Errorf("sweep report over the records: exit %d\n%s", code, again)
	}

	// Without the credentials no exporter can be driven: every node
	// unreachable, each saying what to give.
	out, stderr, code = runProbe(t, "sweep", "coordinate", "hosts", hostsFile, "duration", "100ms")
	if code != exitFailed || !strings.Contains(stderr, "refused the credentials (HTTP 401): give http-config FILE") || strings.Count(out, "unreachable") != 6 {
		t.Errorf("no credentials: exit %d\n%s%s", code, out, stderr)
	}
}

func TestSweepCoordinateHealthy(t *testing.T) {
	dir := t.TempDir()
	hosts := fakeExporters(t, 4, "", "", "")
	hostsFile := filepath.Join(dir, "hosts")
	os.WriteFile(hostsFile, []byte(strings.Join(hosts, " ")), 0o644)
	out, stderr, code := runProbe(t, "-j", "sweep", "coordinate", "hosts", hostsFile, "quick", "bw", "duration", "100ms")
	if code != exitOK || !strings.Contains(out, `"ok":true`) || !strings.Contains(stderr, "quick of 4 hosts: bw write 65536 B 100ms each way") {
		t.Errorf("exit %d, want 0 and a JSON report\n%s%s", code, out, stderr)
	}
}

// Bad input: usage errors (exit 2) before any probe.
func TestSweepCoordinateBadInput(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	two := file("two", "127.0.0.1:1 127.0.0.1:2\n")
	t.Setenv("SLURM_JOB_NODELIST", "")
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nil, "sweep coordinate needs hosts FILE"},
		{[]string{"hosts", file("dup", "127.0.0.1 127.0.0.1:10041")}, "are the same node (127.0.0.1:10041)"},
		{[]string{"hosts", file("unknown", "127.0.0.1 no-such-host.invalid")}, "host no-such-host.invalid (rank 1) is unknown"},
		{[]string{"hosts", two, "http-config", filepath.Join(dir, "nope.yml")}, "http-config " + filepath.Join(dir, "nope.yml")},
		{[]string{"hosts", two, "http-config", file("bad.yml", "basic_auth: {username: a, password: b, password_file: c}\n")}, "http-config"},
		{[]string{"hosts", two, "http-config", file("typo.yml", "basic_oath: {}\n")}, "field basic_oath not found"},
		{[]string{"hosts", two, "scheme", "gopher"}, "gopher"},
		{[]string{"hosts", two, "rank", "1"}, `unknown argument "rank"`},
	} {
		args := append([]string{"sweep", "coordinate"}, tc.args...)
		_, stderr, code := runProbe(t, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.stderr)
		}
	}
}

// out /dev/stderr (the Kubernetes Job's) puts every record on this
// process's standard error among the progress lines, even where /dev has
// no stderr link (the e2e guest's bare devtmpfs): sweep report reads them
// back to the same report. A name under /dev that is no device is an
// error, not a file created there.
func TestSweepCoordinateOutStderr(t *testing.T) {
	dir := t.TempDir()
	hosts := fakeExporters(t, 4, "", "", "")
	hostsFile := filepath.Join(dir, "hosts")
	os.WriteFile(hostsFile, []byte(strings.Join(hosts, " ")), 0o644)
	out, stderr, code := runProbe(t, "-j", "sweep", "coordinate", "hosts", hostsFile, "bw", "duration", "100ms", "out", "/dev/stderr")
	if code != exitOK || !strings.Contains(out, `"ok":true`) {
		t.Fatalf("exit %d, want 0 and a JSON report\n%s%s", code, out, stderr)
	}
	recs, skipped, err := sweep.ReadRecords(strings.NewReader(stderr), "standard error")
	// 4 start and 4 end records, and both sides of 12 bandwidth tests.
	if err != nil || len(recs) != 4+4+2*12 || skipped == 0 {
		t.Fatalf("records on standard error: %d (%d other lines), %v\n%s", len(recs), skipped, err, stderr)
	}
	records := filepath.Join(dir, "sweep.jsonl")
	os.WriteFile(records, []byte(stderr), 0o644)
	again, _, code := runProbe(t, "-j", "sweep", "report", records)
	if code != exitOK || !strings.Contains(again, `"ok":true`) {
		t.Errorf("sweep report over the records: exit %d\n%s", code, again)
	}

	out, stderr, code = runProbe(t, "sweep", "coordinate", "hosts", hostsFile, "bw", "duration", "100ms", "out", "/dev/grdma-no-such-device")
	if code != exitFailed || !strings.Contains(stderr, "out /dev/grdma-no-such-device: no such device") || out != "" {
		t.Errorf("out naming no device under /dev: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat("/dev/grdma-no-such-device"); err == nil {
		t.Errorf("/dev/grdma-no-such-device was created")
	}
}
