package peer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// waitMargin is how long a client waits for a reply beyond the command's
// own timeout: the agent's kill, WaitDelay and the reply itself.
const waitMargin = 15 * time.Second

// Client asks an Agent to run commands. Errors of its methods are about
// the agent or the request; how a command ended is in its Result.
type Client struct {
	// Addr is the agent's host:port.
	Addr string
	// Tag names the asker in the agent's log (a test's name).
	Tag string
	// Timeout bounds each command; 0 means DefaultTimeout.
	Timeout time.Duration
}

// WithTag returns a copy of c that tags its requests with tag.
func (c *Client) WithTag(tag string) *Client { d := *c; d.Tag = tag; return &d }

// WithTimeout returns a copy of c whose commands are killed after d.
func (c *Client) WithTimeout(d time.Duration) *Client { e := *c; e.Timeout = d; return &e }

// Remote is a command started on the agent.
type Remote struct {
	c       *Client
	id      int
	argv    []string
	timeout time.Duration
}

// Start starts a command on the agent and returns at once.
func (c *Client) Start(name string, args ...string) (*Remote, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	argv := append([]string{name}, args...)
	resp, err := c.do(Request{Op: OpStart, Argv: argv, Timeout: timeout}, requestDeadline)
	if err != nil {
		return nil, err
	}
	return &Remote{c: c, id: resp.ID, argv: argv, timeout: timeout}, nil
}

// Run runs a command on the agent and waits for it.
func (c *Client) Run(name string, args ...string) (Result, error) {
	r, err := c.Start(name, args...)
	if err != nil {
		return Result{Argv: append([]string{name}, args...), Code: -1}, err
	}
	return r.Wait()
}

// Wait waits for the command to end (at most its timeout and a margin).
// A command can be waited for once.
func (r *Remote) Wait() (Result, error) {
	resp, err := r.c.do(Request{Op: OpWait, ID: r.id}, r.timeout+waitMargin)
	if err != nil {
		return Result{Argv: r.argv, Code: -1}, err
	}
	if resp.Result == nil {
		return Result{Argv: r.argv, Code: -1}, errors.New("peer: wait: reply without a result")
	}
	return *resp.Result, nil
}

// Output returns what the command printed so far.
func (r *Remote) Output() (stdout, stderr string, err error) {
	resp, err := r.c.do(Request{Op: OpOutput, ID: r.id}, requestDeadline)
	return resp.Stdout, resp.Stderr, err
}

// Signal sends sig to the command's process group.
func (r *Remote) Signal(sig syscall.Signal) error {
	_, err := r.c.do(Request{Op: OpSignal, ID: r.id, Signal: int(sig)}, requestDeadline)
	return err
}

// Argv is the command line.
func (r *Remote) Argv() []string { return r.argv }

// Shutdown asks the agent to kill its commands and stop serving.
func (c *Client) Shutdown() error {
	_, err := c.do(Request{Op: OpShutdown}, requestDeadline)
	return err
}

// Reachable reports whether the agent accepts a connection now.
func (c *Client) Reachable() bool {
	conn, err := net.DialTimeout("tcp", c.Addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// do sends one request on its own connection and reads the reply, all
// within deadline.
func (c *Client) do(req Request, deadline time.Duration) (Response, error) {
	req.Tag = c.Tag
	var resp Response
	conn, err := net.DialTimeout("tcp", c.Addr, requestDeadline)
	if err != nil {
		return resp, fmt.Errorf("peer %s: %v", c.Addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(deadline))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return resp, fmt.Errorf("peer %s: %s: %v", c.Addr, req.Op, err)
	}
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return resp, fmt.Errorf("peer %s: %s: no reply: %v", c.Addr, req.Op, err)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("peer %s: %s", c.Addr, resp.Error)
	}
	return resp, nil
}
