package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// GuestTestRun says how to run the e2e/guest test binary in a guest.
type GuestTestRun struct {
	Kernel     *Kernel
	Grdma      string   // host path installed as layout.Grdma
	TestBinary string   // from BuildGuestTests
	Run        string   // -test.run pattern; "" runs all
	Skip       string   // -test.skip pattern
	GuestGrdma string   // GRDMA inside the guest; "" = layout.Grdma
	Env        []string // KEY=VALUE settings for the guest tests, e.g. E2E_CHURN=20s
	Timeout    time.Duration
	Verbose    bool
}

// DefaultGuestTimeout is a guest's time limit unless told otherwise: the
// whole single-guest suite takes 4-6 minutes on a 2-core machine without
// KVM while the other kernel's guest shares it, and one run under load took
// 5m17s; the limit catches a hang, it is not a speed goal.
const DefaultGuestTimeout = 12 * time.Minute

// script is the guest payload. Its -test.timeout fires before the host
// kills the guest, so a hung test is named and its goroutines dumped.
func (r *GuestTestRun) script() string {
	timeout := r.Timeout - 30*time.Second
	var s strings.Builder
	if r.GuestGrdma != "" {
		fmt.Fprintf(&s, "export GRDMA=%s\n", shellQuote(r.GuestGrdma))
	}
	for _, kv := range r.Env {
		fmt.Fprintf(&s, "export %s\n", shellQuote(kv))
	}
	fmt.Fprintf(&s, "exec %s -test.v=test2json -test.count=1 -test.timeout=%s", layout.GuestTest, timeout)
	if r.Run != "" {
		fmt.Fprintf(&s, " -test.run=%s", shellQuote(r.Run))
	}
	if r.Skip != "" {
		fmt.Fprintf(&s, " -test.skip=%s", shellQuote(r.Skip))
	}
	s.WriteString("\n")
	return s.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RunGuestTests boots the kernel with the guest tests as the payload.
func (b *Bed) RunGuestTests(ctx context.Context, r *GuestTestRun, opt BootOptions) (*Result, error) {
	if r.Timeout == 0 {
		r.Timeout = DefaultGuestTimeout
	}
	opt.Timeout = r.Timeout
	g := &Guest{Kernel: r.Kernel, Grdma: r.Grdma, TestBinary: r.TestBinary, Run: r.script(), Verbose: r.Verbose}
	return b.Boot(ctx, g, opt)
}

// PairScenarios is the -test.run pattern of the two-host scenarios in
// e2e/guest: their names start with TestPair, and the single guest skips them.
const PairScenarios = "^TestPair"

// FleetScenarios is the -test.run pattern of the fleet scenarios in
// e2e/guest: their names start with TestFleet.
const FleetScenarios = "^TestFleet"

// LinkedScenarios is what the single guest skips: the scenarios that need
// other guests.
const LinkedScenarios = "^Test(Pair|Fleet)"

// RunPairTests boots the two-host pair (BootPair) with the guest tests in
// both guests: A serves as the peer agent (layout.PeerAgentEnv), B runs the
// two-host scenarios matching r.Run (within PairScenarios: "Ping" selects
// TestPairPing) and stops A's agent when they end.
func (b *Bed) RunPairTests(ctx context.Context, r *GuestTestRun, console io.Writer) (*PairResult, error) {
	if r.Timeout == 0 {
		r.Timeout = DefaultGuestTimeout
	}
	agent := fmt.Sprintf("%s:%d", layout.PeerA, layout.PeerAgentPort)
	run := *r
	run.Run = scenarioPattern(PairScenarios, r.Run)
	run.Env = append([]string{layout.PeerEnv + "=" + agent}, r.Env...)
	a := &Guest{Grdma: r.Grdma, TestBinary: r.TestBinary, Verbose: r.Verbose,
		Run: fmt.Sprintf("export %s=%s\nexec %s\n", layout.PeerAgentEnv, agent, layout.GuestTest)}
	bg := &Guest{Grdma: r.Grdma, TestBinary: r.TestBinary, Verbose: r.Verbose, Run: run.script()}
	return b.BootPair(ctx, PairSpec{Kernel: r.Kernel, A: a, B: bg, Timeout: r.Timeout, Console: console})
}

// RunFleetTests boots a fleet (BootFleet) with the guest tests in every
// guest: node 1 runs the fleet scenarios matching r.Run (within
// FleetScenarios: "Ping" selects TestFleetPing) and stops the others'
// agents when they end; nodes 2..Size serve as peer agents. spec gives
// the fleet's size, memory, boot parallelism and console; RunFleetTests
// sets the rest.
func (b *Bed) RunFleetTests(ctx context.Context, r *GuestTestRun, spec FleetSpec) (*FleetResult, error) {
	if r.Timeout == 0 {
		r.Timeout = DefaultFleetTimeout
	}
	agents := make([]string, 0, spec.Size)
	for i := 2; i <= spec.Size; i++ {
		agents = append(agents, fmt.Sprintf("%s:%d", layout.FleetAddr(i), layout.PeerAgentPort))
	}
	run := *r
	run.Run = scenarioPattern(FleetScenarios, r.Run)
	run.Env = append([]string{layout.FleetAgentsEnv + "=" + strings.Join(agents, ",")}, r.Env...)
	driver := run.script()
	spec.Kernel, spec.Timeout = r.Kernel, r.Timeout
	spec.Image = &Guest{Grdma: r.Grdma, TestBinary: r.TestBinary, Verbose: r.Verbose}
	spec.Run = func(i int) string {
		if i == 1 {
			return driver
		}
		return fmt.Sprintf("export %s=%s\nexec %s\n", layout.PeerAgentEnv, agents[i-2], layout.GuestTest)
	}
	return b.BootFleet(ctx, spec)
}

// scenarioPattern narrows a -test.run pattern to the scenarios of prefix
// (PairScenarios, FleetScenarios): its first (top-level) element is
// matched after the prefix, unless it is anchored ("^…", as rerunPattern
// writes it): that one names whole top-level tests already.
func scenarioPattern(prefix, run string) string {
	if run == "" {
		return prefix
	}
	if strings.HasPrefix(run, "^") {
		return run
	}
	top, sub, hasSub := cutTopLevel(run)
	p := prefix + ".*(?:" + top + ")"
	if hasSub {
		p += "/" + sub
	}
	return p
}

// cutTopLevel splits a -test.run pattern at its first slash outside
// brackets and parentheses, as go test does.
func cutTopLevel(run string) (top, sub string, ok bool) {
	depth := 0
	for i := 0; i < len(run); i++ {
		switch run[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				return run[:i], run[i+1:], true
			}
		}
	}
	return run, "", false
}

// TestNode is one guest test (or subtest) and what it printed.
type TestNode struct {
	Name     string // full name, e.g. TestErrorCases/unprivileged
	Short    string // last element, without the Test prefix at top level
	Action   string // pass, fail, skip; "" if it never finished
	Elapsed  float64
	Output   []string // its own output lines, without === / --- framing
	Children []*TestNode
}

// ParseGuestTests turns the guest's `-test.v=test2json` output into a test
// tree, using go's own test2json so that any output is attributed right
// (with -t: without it, test2json leaves out the elapsed times too).
func ParseGuestTests(ctx context.Context, log string) ([]*TestNode, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "test2json", "-t")
	cmd.Stdin = strings.NewReader(log)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go tool test2json: %v\n%s", err, stderr.String())
	}
	nodes := map[string]*TestNode{}
	var top []*TestNode
	get := func(name string) *TestNode {
		if n := nodes[name]; n != nil {
			return n
		}
		n := &TestNode{Name: name}
		nodes[name] = n
		if i := strings.LastIndex(name, "/"); i >= 0 {
			n.Short = name[i+1:]
			parent := nodes[name[:i]]
			if parent == nil {
				parent = &TestNode{Name: name[:i], Short: name[:i]}
				nodes[name[:i]] = parent
				top = append(top, parent)
			}
			parent.Children = append(parent.Children, n)
		} else {
			n.Short = strings.TrimPrefix(name, "Test")
			top = append(top, n)
		}
		return n
	}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var ev struct {
			Action  string
			Test    string
			Output  string
			Elapsed float64
		}
		if err := dec.Decode(&ev); err != nil {
			return nil, err
		}
		if ev.Test == "" {
			continue
		}
		n := get(ev.Test)
		switch ev.Action {
		case "output":
			line := strings.TrimRight(ev.Output, "\n")
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
				continue
			}
			n.Output = append(n.Output, line)
		case "pass", "fail", "skip":
			n.Action, n.Elapsed = ev.Action, ev.Elapsed
		}
	}
	return top, nil
}

// Summary counts finished tests by action, for logs.
func Summary(nodes []*TestNode) string {
	counts := map[string]int{}
	var walk func([]*TestNode)
	walk = func(ns []*TestNode) {
		for _, n := range ns {
			a := n.Action
			if a == "" {
				a = "unfinished"
			}
			counts[a]++
			walk(n.Children)
		}
	}
	walk(nodes)
	var parts []string
	for a, c := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", c, a))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// unfinished lists the top-level scenarios that did not pass or skip.
func unfinished(nodes []*TestNode) []string {
	var names []string
	for _, n := range nodes {
		if n.Action != "pass" && n.Action != "skip" {
			names = append(names, n.Name)
		}
	}
	return names
}

// rerunPattern is a -test.run pattern selecting exactly these top-level
// scenarios (full names: TestFleetPing must not also run TestFleetUDPing).
func rerunPattern(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "^(?:" + strings.Join(q, "|") + ")$"
}
