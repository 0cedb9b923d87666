package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// requestDeadline bounds reading a request and writing a reply that does
// not wait for a command.
const requestDeadline = 10 * time.Second

// Agent runs the commands clients ask for. The zero value is ready to Serve.
type Agent struct {
	// Logf, if set, logs every command with its asker's tag and how it ended.
	Logf func(format string, args ...any)

	mu       sync.Mutex
	nextID   int
	commands map[int]*command
	stop     chan struct{}
	stopOnce sync.Once
}

// command is one started command.
type command struct {
	tag            string
	argv           []string
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{} // closed when result is set
	result         Result
}

// Serve answers requests on l until ctx ends or a client asks OpShutdown;
// then it kills the commands still running and returns. It closes l.
func (a *Agent) Serve(ctx context.Context, l net.Listener) error {
	a.init()
	go func() {
		select {
		case <-ctx.Done():
		case <-a.stop:
		}
		l.Close()
	}()
	var wg sync.WaitGroup
	defer func() {
		a.killAll()
		wg.Wait()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			select {
			case <-a.stop:
				return nil
			default:
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.handle(conn)
		}()
	}
}

func (a *Agent) init() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.commands == nil {
		a.commands = map[int]*command{}
		a.stop = make(chan struct{})
	}
}

func (a *Agent) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// handle answers the one request of a connection.
func (a *Agent) handle(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(requestDeadline))
	var req Request
	var resp Response
	if err := json.NewDecoder(conn).Decode(&req); err != nil {
		resp.Error = fmt.Sprintf("bad request: %v", err)
	} else {
		resp = a.answer(conn, req)
	}
	json.NewEncoder(conn).Encode(resp)
}

func (a *Agent) answer(conn net.Conn, req Request) Response {
	if req.Op == OpStart {
		id, err := a.start(req)
		if err != nil {
			return Response{Error: err.Error()}
		}
		return Response{ID: id}
	}
	if req.Op == OpShutdown {
		a.logf("[%s] shutdown", req.Tag)
		a.stopOnce.Do(func() { close(a.stop) })
		return Response{}
	}
	switch req.Op {
	case OpWait, OpOutput, OpSignal:
	default:
		return Response{Error: fmt.Sprintf("unknown op %q (want %s, %s, %s, %s or %s)", req.Op, OpStart, OpWait, OpOutput, OpSignal, OpShutdown)}
	}
	a.mu.Lock()
	c := a.commands[req.ID]
	a.mu.Unlock()
	if c == nil {
		return Response{Error: fmt.Sprintf("no command %d (finished and waited for already, or never started)", req.ID)}
	}
	switch req.Op {
	case OpWait:
		// The command's own timeout bounds this wait; the reply must
		// still go out after it.
		conn.SetDeadline(time.Time{})
		<-c.done
		conn.SetDeadline(time.Now().Add(requestDeadline))
		a.mu.Lock()
		delete(a.commands, req.ID)
		a.mu.Unlock()
		r := c.result
		return Response{ID: req.ID, Result: &r}
	case OpOutput:
		return Response{ID: req.ID, Stdout: c.stdout.String(), Stderr: c.stderr.String()}
	default: // OpSignal
		sig := syscall.Signal(req.Signal)
		a.logf("[%s] #%d %s: signal %v", req.Tag, req.ID, c.argv[0], sig)
		if err := syscall.Kill(-c.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return Response{Error: fmt.Sprintf("signal %v: %v", sig, err)}
		}
	}
	return Response{ID: req.ID}
}

// start runs a command in its own process group, killed with the group
// when its timeout passes.
func (a *Agent) start(req Request) (int, error) {
	if len(req.Argv) == 0 {
		return 0, errors.New("start: empty argv")
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < 0 || timeout > MaxTimeout {
		return 0, fmt.Errorf("start: timeout %v outside (0, %v]", timeout, MaxTimeout)
	}
	select {
	case <-a.stop:
		return 0, errors.New("start: the agent is shutting down")
	default:
	}
	c := &command{tag: req.Tag, argv: req.Argv, done: make(chan struct{})}
	c.cmd = exec.Command(req.Argv[0], req.Argv[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps the output pipes open must not hold Wait forever.
	c.cmd.WaitDelay = 2 * time.Second
	begin := time.Now()
	if err := c.cmd.Start(); err != nil {
		a.logf("[%s] $ %s: %v", req.Tag, strings.Join(req.Argv, " "), err)
		return 0, fmt.Errorf("start: %v", err)
	}
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	a.commands[id] = c
	a.mu.Unlock()
	a.logf("[%s] #%d $ %s", req.Tag, id, strings.Join(req.Argv, " "))

	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	})
	go func() {
		err := c.cmd.Wait()
		timer.Stop()
		r := Result{Argv: req.Argv, Stdout: c.stdout.String(), Stderr: c.stderr.String(),
			Code: c.cmd.ProcessState.ExitCode(), TimedOut: timedOut.Load(), Elapsed: time.Since(begin)}
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal().String()
		}
		if err != nil && !errors.As(err, new(*exec.ExitError)) {
			r.Stderr += fmt.Sprintf("[agent: %v]\n", err)
		}
		a.logf("[%s] #%d %s: %s after %v", req.Tag, id, req.Argv[0], ending(r), r.Elapsed.Round(time.Millisecond))
		c.result = r
		close(c.done)
	}()
	return id, nil
}

// ending is a Result's end in a few words, for the log.
func ending(r Result) string {
	switch {
	case r.TimedOut:
		return "killed (timeout)"
	case r.Signal != "":
		return "signal: " + r.Signal
	}
	return fmt.Sprintf("exit %d", r.Code)
}

// killAll kills every command still running and waits for them.
func (a *Agent) killAll() {
	a.mu.Lock()
	var running []*command
	for _, c := range a.commands {
		running = append(running, c)
	}
	a.mu.Unlock()
	for _, c := range running {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// lockedBuffer is a bytes.Buffer that a command writes while a request
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
