package exporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"
)

// basicAuthConfig writes a web configuration file with user prom,
// password secret.
func basicAuthConfig(t *testing.T) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("basic_auth_users:\n  prom: %s\n", hash)), 0o600)
	return cfg
}

// TestServeSeveralAddresses: with two listen addresses and a web
// configuration file, exporter-toolkit's ServeMultiple ran web.Serve on one
// http.Server from two goroutines, each wrapping and replacing its
// Handler: a data race (go test -race reported it) and basic auth wrapped
// twice. Each address gets its own server now; both enforce basic auth and
// serve, and the shutdown ends both.
func TestServeSeveralAddresses(t *testing.T) {
	cfg := basicAuthConfig(t)
	listening, cancel, served, err := serveRecorded(t, ServerOptions{ListenAddresses: []string{"127.0.0.1:0", "127.0.0.1:0", "[::1]:0"}, ConfigFile: cfg})
	if strings.Contains(fmt.Sprint(err), "::1") {
		t.Skip("no IPv6 loopback")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range listening {
		for _, auth := range []bool{false, true} {
			req, _ := http.NewRequest("GET", "http://"+a.String()+"/metrics", nil)
			if auth {
				req.SetBasicAuth("prom", "secret")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case !auth && resp.StatusCode != http.StatusUnauthorized:
				t.Errorf("%s without credentials: HTTP %d", a, resp.StatusCode)
			case auth && (resp.StatusCode != 200 || !strings.Contains(string(body), "grdma_port_active")):
				t.Errorf("%s: HTTP %d\n%s", a, resp.StatusCode, body)
			}
		}
	}
	stopServer(t, cancel, served, 10*time.Second)
}

// blockingRegistry is the recorded node behind a Dial that waits for
// release: scrapes stay in flight until the test lets them finish.
func blockingRegistry(t *testing.T) (reg *prometheus.Registry, release func()) {
	t.Helper()
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	reg, err = NewRegistry(New(Options{Sysfs: fsys, Dial: func() (*nldev.Client, error) {
		<-ch
		return nldev.NewClient(k.Conn()), nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	return reg, sync.OnceFunc(func() { close(ch) })
}

// TestMaxRequests: with --web.max-requests 2, three scrapes at once get
// two answers and one 503 at once (node_exporter's flag, default 40);
// with 0 there is no limit.
func TestMaxRequests(t *testing.T) {
	for _, c := range []struct{ max, want503 int }{{2, 1}, {0, 0}} {
		reg, release := blockingRegistry(t)
		h, err := Handler(reg, "/metrics", "test", c.max)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		codes := make(chan int, 3)
		for range 3 {
			go func() {
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					codes <- -1
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
		}
		var got []int
		if c.want503 > 0 { // the refused one is answered while the others wait
			got = append(got, <-codes)
		}
		release()
		for len(got) < 3 {
			got = append(got, <-codes)
		}
		srv.Close()
		if n := countOf(got, http.StatusServiceUnavailable); n != c.want503 || countOf(got, 200) != 3-c.want503 {
			t.Errorf("max-requests %d: 3 scrapes at once answered %v, want %d × 503", c.max, got, c.want503)
		}
	}
	if _, err := Handler(prometheus.NewRegistry(), "/metrics", "test", -1); err == nil || !strings.Contains(err.Error(), "--web.max-requests must be 0 (no limit) or more") {
		t.Errorf("max-requests -1: %v", err)
	}
}

func countOf(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestServeIdleConnectionsBounded plays a client that opens 500
// connections, sends a keep-alive scrape on each and never closes them:
// the exporter used to hold every one for ever, a goroutine and a
// descriptor each (15,000 held: fds exhausted). Now at most
// MaxConnections are open at once (the rest wait in the kernel's listen
// queue, costing the exporter nothing), each is closed once answered and
// idle (when a new one needs its place, or after IdleTimeout), and every
// scrape is answered in turn.
func TestServeIdleConnectionsBounded(t *testing.T) {
	const conns, maxConns = 500, 20
	listening, cancel, served, err := serveRecorded(t, ServerOptions{ListenAddresses: []string{"127.0.0.1:0"}, MaxConnections: maxConns, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr := listening[0].String()
	time.Sleep(50 * time.Millisecond)
	baseG, baseFD := runtime.NumGoroutine(), openFDs()

	// Watch the exporter's goroutines and descriptors (less the client's
	// own) while the attack runs.
	var clientFDs atomic.Int32
	var maxG, maxFD atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			maxG.Store(max(maxG.Load(), int64(runtime.NumGoroutine()-baseG)))
			// The client's count may change while /proc/self/fd is listed:
			// take the larger of before and after.
			before := clientFDs.Load()
			open := openFDs()
			client := max(before, clientFDs.Load())
			maxFD.Store(max(maxFD.Load(), int64(open-baseFD-int(client))))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clientFDs.Add(1)
		cs = append(cs, c)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Each connection gets its answer, then is closed by the exporter.
	answered := 0
	for _, c := range cs {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		b, err := io.ReadAll(c)
		if err != nil {
			t.Errorf("a connection was not closed by the exporter: %v", err)
		}
		if bytes.HasPrefix(b, []byte("HTTP/1.1 200 OK")) && bytes.Contains(b, []byte("grdma_port_active")) {
			answered++
		}
		c.Close()
		clientFDs.Add(-1)
	}
	close(stop)
	<-watched
	if answered != conns {
		t.Errorf("%d of %d scrapes answered", answered, conns)
	}
	// A connection is its goroutine, one more while its request is
	// served and those of its scrape's Gather (one per collector); a
	// descriptor, and those the process collector opens under /proc while
	// it scrapes. Bounded by MaxConnections, not by the connections held.
	gWant, fdWant := int64(8*maxConns), int64(3*maxConns)
	if g, fd := maxG.Load(), maxFD.Load(); g > gWant || fd > fdWant {
		t.Errorf("with %d connections held, the exporter had up to %d more goroutines and %d more descriptors; want at most %d and %d",
			conns, g, fd, gWant, fdWant)
	} else {
		t.Logf("%d connections held: at most %d more goroutines, %d more descriptors in the exporter", conns, g, fd)
	}
	stopServer(t, cancel, served, 10*time.Second)
}

// openFDs counts the process's open descriptors one number at a time:
// listing /proc/self/fd while hundreds open and close counts some twice.
func openFDs() int {
	n := 0
	for fd := range 4096 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			n++
		}
	}
	return n
}

// TestServeProbe: the probe handler is served on /probe behind the same
// basic auth as the metrics, and may not share the telemetry path.
func TestServeProbe(t *testing.T) {
	reg, err := NewRegistry(recorded(t, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "probe_success 1 # %s\n", r.URL.Query().Get("target"))
	})
	if _, err := NewHandler(HandlerOptions{Registry: reg, TelemetryPath: ProbePath, Probe: probe}); err == nil {
		t.Error("telemetry path /probe accepted beside the probe handler")
	}
	h, err := NewHandler(HandlerOptions{Registry: reg, TelemetryPath: "/metrics", Version: "test", Probe: probe})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, h, ServerOptions{ListenAddresses: []string{"127.0.0.1:0"}, ConfigFile: basicAuthConfig(t),
			Listening: func(a []net.Addr) { listening <- a }})
	}()
	base := "http://" + (<-listening)[0].String()
	get := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth {
			req.SetBasicAuth("prom", "secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/probe?target=node2&module=rc_lat", false); code != http.StatusUnauthorized {
		t.Errorf("/probe without credentials: HTTP %d, want 401", code)
	}
	if code, body := get("/probe?target=node2&module=rc_lat", true); code != 200 || body != "probe_success 1 # node2\n" {
		t.Errorf("/probe: HTTP %d %q", code, body)
	}
	if code, body := get("/", true); code != 200 || !strings.Contains(body, "/probe") {
		t.Errorf("landing page without the probe link: HTTP %d\n%s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
