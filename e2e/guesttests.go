package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
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
	GuestGrdma string   // GRDMA inside the guest; "" = layout.Grdma
	Env        []string // KEY=VALUE settings for the guest tests, e.g. E2E_CHURN=20s
	Timeout    time.Duration
	Verbose    bool
}

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
	s.WriteString("\n")
	return s.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RunGuestTests boots the kernel with the guest tests as the payload.
func (b *Bed) RunGuestTests(ctx context.Context, r *GuestTestRun, opt BootOptions) (*Result, error) {
	if r.Timeout == 0 {
		r.Timeout = 6 * time.Minute
	}
	opt.Timeout = r.Timeout
	g := &Guest{Kernel: r.Kernel, Grdma: r.Grdma, TestBinary: r.TestBinary, Run: r.script(), Verbose: r.Verbose}
	return b.Boot(ctx, g, opt)
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
