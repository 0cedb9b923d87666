package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serve starts an agent on loopback for the test and returns a client.
func serve(t *testing.T) (*Client, *logBuffer) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuffer{}
	a := &Agent{Logf: log.printf}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && err != context.Canceled {
			t.Errorf("Serve: %v", err)
		}
	})
	return &Client{Addr: l.Addr().String(), Tag: t.Name()}, log
}

type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// firstLine polls the command's output until it printed a whole line
// (for at most 10 s) and returns its output so far.
func firstLine(t *testing.T, r *Remote) string {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stdout, _, err := r.Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stdout, "\n") || time.Now().After(end) {
			return stdout
		}
	}
}

func TestRunReportsOutputAndExitStatus(t *testing.T) {
	c, log := serve(t)
	r, err := c.Run("sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "out\n" || r.Stderr != "err\n" || r.Code != 3 || r.TimedOut || r.Signal != "" {
		t.Errorf("want stdout out, stderr err, exit 3; got\n%s", r)
	}
	if got := strings.Join(r.Argv, " "); got != "sh -c echo out; echo err >&2; exit 3" {
		t.Errorf("argv %q", got)
	}
	// The agent's log names the asker and the ending.
	if s := log.String(); !strings.Contains(s, "["+t.Name()+"] #1 $ sh -c") || !strings.Contains(s, "#1 sh: exit 3") {
		t.Errorf("agent log:\n%s", s)
	}
}

func TestStartThenSignal(t *testing.T) {
	c, _ := serve(t)
	// sh traps nothing: SIGINT to the group ends sh and its sleep.
	r, err := c.Start("sh", "-c", "echo ready; sleep 30; echo not reached")
	if err != nil {
		t.Fatal(err)
	}
	stdout := firstLine(t, r)
	if stdout != "ready\n" {
		t.Fatalf("output so far: want ready, got %q", stdout)
	}
	if err := r.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != -1 || res.Signal != "interrupt" || res.TimedOut || res.Stdout != "ready\n" {
		t.Errorf("want killed by interrupt after printing ready, got\n%s", res)
	}
	// Waited for once: the agent forgot it.
	if _, err := r.Wait(); err == nil || !strings.Contains(err.Error(), "no command") {
		t.Errorf("second Wait: want 'no command', got %v", err)
	}
}

func TestHungCommandIsKilledAndReported(t *testing.T) {
	c, log := serve(t)
	// The child sleep holds stdout open: the kill must reach the group.
	r, err := c.WithTimeout(300*time.Millisecond).Run("sh", "-c", "sleep 30 & echo started; wait")
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Code != -1 || r.Stdout != "started\n" {
		t.Errorf("want a timed-out command with its output so far, got\n%s", r)
	}
	if !strings.Contains(r.String(), "killed after its timeout") {
		t.Errorf("Result.String does not say it was killed:\n%s", r)
	}
	if !strings.Contains(log.String(), "killed (timeout)") {
		t.Errorf("agent log:\n%s", log)
	}
}

func TestRequestErrors(t *testing.T) {
	c, _ := serve(t)
	if _, err := c.Run("/nonexistent/tool"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing tool: want a start error, got %v", err)
	}
	if _, err := c.WithTimeout(MaxTimeout + time.Second).Start("true"); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("too long a timeout: want an error, got %v", err)
	}
	if _, err := c.do(Request{Op: "frobnicate"}, time.Second); err == nil || !strings.Contains(err.Error(), `unknown op "frobnicate"`) {
		t.Errorf("unknown op: got %v", err)
	}
	if _, err := c.do(Request{Op: OpStart}, time.Second); err == nil || !strings.Contains(err.Error(), "empty argv") {
		t.Errorf("empty argv: got %v", err)
	}
	if err := (&Remote{c: c, id: 99}).Signal(syscall.SIGTERM); err == nil || !strings.Contains(err.Error(), "no command 99") {
		t.Errorf("unknown id: got %v", err)
	}
	// Not JSON at all.
	conn, err := net.Dial("tcp", c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintln(conn, "hello?")
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil || !strings.Contains(resp.Error, "bad request") {
		t.Errorf("garbage: want 'bad request', got %+v, %v", resp, err)
	}
}

func TestShutdownKillsCommandsAndStops(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- (&Agent{}).Serve(context.Background(), l) }()
	c := &Client{Addr: l.Addr().String()}
	if !c.Reachable() {
		t.Fatal("agent not reachable")
	}
	r, err := c.Start("sh", "-c", "echo $$; exec sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	stdout := firstLine(t, r)
	pid, err := strconv.Atoi(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after shutdown: %v", err)
	}
	// Serve returns after its commands were killed and reaped.
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("command %d running at shutdown: want it gone, kill(0) says %v", pid, err)
	}
	if c.Reachable() {
		t.Error("agent still reachable after shutdown")
	}
}

// A client runs a command on the agent and reads how it ended.
func Example() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go (&Agent{}).Serve(ctx, l)

	peerA := &Client{Addr: l.Addr().String(), Tag: "Example"}
	r, err := peerA.Run("echo", "hello from A")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q exit %d\n", r.Stdout, r.Code)
	// Output: "hello from A\n" exit 0
}
