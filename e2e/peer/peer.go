// Package peer runs commands on the other guest of the e2e bed's two-host
// topology (see e2e/README.md). Guest A runs an Agent on its end of the
// guest link; the scenarios run in guest B and drive A through a Client.
//
// The protocol is one JSON Request and one JSON Response per TCP
// connection. Every command runs with a time limit: the agent kills a
// command (its whole process group) that outlives it and reports it as
// TimedOut, and every client call has a deadline of its own, so a hung
// command or agent fails a scenario instead of the whole guest.
package peer

import (
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout bounds a command when the client sets none.
const DefaultTimeout = 60 * time.Second

// MaxTimeout is the longest a command may run on the agent: a fleet
// scenario's daemons run for the whole scenario (the pingmesh's three
// faults on the 6.1 fleet took 11.5 min).
const MaxTimeout = 30 * time.Minute

// Operations of a Request.
const (
	OpStart    = "start"    // start Argv; the reply carries its ID
	OpWait     = "wait"     // wait for ID to end; the reply carries its Result
	OpOutput   = "output"   // stdout and stderr of ID so far
	OpSignal   = "signal"   // send Signal to ID's process group
	OpShutdown = "shutdown" // kill every command and stop serving
)

// Request is what a client sends.
type Request struct {
	Op string `json:"op"`
	// Tag names the asker (a test's name) in the agent's log.
	Tag  string   `json:"tag,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// Timeout: for OpStart, kill the command after this long (0 means
	// DefaultTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
	ID      int           `json:"id,omitempty"`
	Signal  int           `json:"signal,omitempty"`
}

// Response is the agent's answer. Error is about the request (unknown
// ID, a command that cannot start), never about how a command ended.
type Response struct {
	Error  string  `json:"error,omitempty"`
	ID     int     `json:"id,omitempty"`
	Result *Result `json:"result,omitempty"`
	Stdout string  `json:"stdout,omitempty"`
	Stderr string  `json:"stderr,omitempty"`
}

// Result is how a command ended.
type Result struct {
	Argv           []string
	Stdout, Stderr string
	// Code is the exit status; -1 when a signal ended the command.
	Code int
	// Signal names the signal that ended it, e.g. "interrupt".
	Signal string `json:",omitempty"`
	// TimedOut: the agent killed it after its timeout.
	TimedOut bool          `json:",omitempty"`
	Elapsed  time.Duration `json:",omitempty"`
}

// String shows the command, how it ended and its output, for test failures.
func (r Result) String() string {
	end := fmt.Sprintf("exit %d", r.Code)
	switch {
	case r.TimedOut:
		end = fmt.Sprintf("killed after its timeout (%v)", r.Elapsed.Round(time.Millisecond))
	case r.Signal != "":
		end = "killed by signal: " + r.Signal
	}
	return fmt.Sprintf("$ %s\n%s\nstdout:\n%sstderr:\n%s", strings.Join(r.Argv, " "), end, indent(r.Stdout), indent(r.Stderr))
}

func indent(s string) string {
	if s == "" {
		return "    (empty)\n"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
