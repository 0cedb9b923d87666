package cmdline

import (
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/ib"
)

// Abbrev resolves word to one of names as rdma resolves its keywords
// (utils.c strcmpx in rd_exec_cmd and add_filter): the first name, in the
// order given, that word is a prefix of, so the order of names decides:
// "s" is the first name starting with s. An exact match wins over an
// earlier longer name (rdma would read cm_id's "dev" as dev-type; no two
// names of rdma's own tables are in that relation). ok is false when no
// name starts with word (or word is empty).
func Abbrev(word string, names []string) (name string, ok bool) {
	if word == "" {
		return "", false
	}
	for _, n := range names {
		if n == word {
			return n, true
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, word) {
			return n, true
		}
	}
	return "", false
}

// Args walks the words after an object in iproute2 grammar: keywords,
// abbreviated as rdma abbreviates them, each followed by its values.
// Errors are *UsageError pointing at Help.
type Args struct {
	Words []string
	Help  string // e.g. "grdma link help", named in usage errors
	// OnHelp, when set, runs where a keyword list offers "help" and the
	// word is help (or h, he...), as rdma prints its help at the same
	// places; Keyword returns its error (nil: the word "help").
	OnHelp func() error
}

// NewArgs returns a cursor over words whose usage errors point at help.
func NewArgs(words []string, help string) *Args { return &Args{Words: words, Help: help} }

// Sub returns a cursor over words that shares a's help.
func (a *Args) Sub(words []string) *Args { return &Args{Words: words, Help: a.Help, OnHelp: a.OnHelp} }

// Empty reports whether every word was consumed.
func (a *Args) Empty() bool { return len(a.Words) == 0 }

// Next consumes the next word; there must be one.
func (a *Args) Next() string {
	w := a.Words[0]
	a.Words = a.Words[1:]
	return w
}

// Keyword consumes the next word as one of keywords, or returns def when
// there are no words left (def "" makes the keyword mandatory). Keywords
// are listed in rdma's order, which decides abbreviations; "help" among
// them runs OnHelp.
func (a *Args) Keyword(what, def string, keywords ...string) (string, error) {
	if a.Empty() {
		if def == "" {
			return "", Usagef(a.Help, "missing %s: expected %s", what, strings.Join(keywords, ", "))
		}
		return def, nil
	}
	k, err := a.Match(what, a.Next(), keywords)
	if err == nil && k == "help" && a.OnHelp != nil {
		if err := a.OnHelp(); err != nil {
			return "", err
		}
	}
	return k, err
}

// Match resolves word to a keyword as rdma does: the first keyword, in
// the order given, that word abbreviates (Abbrev).
func (a *Args) Match(what, word string, keywords []string) (string, error) {
	if k, ok := Abbrev(word, keywords); ok {
		return k, nil
	}
	return "", Usagef(a.Help, "unknown %s %q: expected %s", what, word, strings.Join(keywords, ", "))
}

// LinkOrHelp checks that the first word is link (or runs OnHelp for
// help), as rdma's tables of stat set, unset, qp set, bind and unbind say.
func (a *Args) LinkOrHelp() error {
	if a.Empty() {
		return nil
	}
	_, err := a.Sub(a.Words[:1]).Keyword("parameter", "", "link", "help")
	return err
}

// Value consumes the value that must follow a keyword.
func (a *Args) Value(what string) (string, error) {
	if a.Empty() {
		return "", Usagef(a.Help, "missing %s", what)
	}
	return a.Next(), nil
}

// OnOff consumes an on|off value.
func (a *Args) OnOff(what string) (bool, error) {
	v, err := a.Value(what + " (on or off)")
	if err != nil {
		return false, err
	}
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, Usagef(a.Help, "%s must be on or off, not %q", what, v)
}

// Number consumes a decimal value of a keyword within [lo, hi].
func (a *Args) Number(what string, lo, hi int) (int, error) {
	v, err := a.Value(what + " value")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, Usagef(a.Help, "%s must be a number from %d to %d, not %q", what, lo, hi, v)
	}
	return n, nil
}

// Duration consumes a Go duration (10s, 1m30s, 500ms) within (0, max].
func (a *Args) Duration(what string, max time.Duration) (time.Duration, error) {
	v, err := a.Value(what + " value")
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > max {
		return 0, Usagef(a.Help, "%s must be a duration from 1ms to %v such as 10s or 500ms, not %q", what, max, v)
	}
	return d, nil
}

// Done fails when words are left over.
func (a *Args) Done() error {
	if a.Empty() {
		return nil
	}
	return Usagef(a.Help, "unexpected argument %q", a.Words[0])
}

// DevPort parses DEV, DEV/ and DEV/PORT (Port 0: every port). Unlike
// rdma, a bare DEV is accepted everywhere and means all of its ports.
func (a *Args) DevPort(s string) (ib.PortRef, error) {
	dev, port, hasSlash := strings.Cut(s, "/")
	if dev == "" {
		return ib.PortRef{}, Usagef(a.Help, "missing device name in %q", s)
	}
	if !hasSlash || port == "" {
		return ib.PortRef{Device: dev}, nil
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil || n == 0 {
		return ib.PortRef{}, Usagef(a.Help, "invalid port %q in %q: ports are numbered from 1", port, s)
	}
	return ib.PortRef{Device: dev, Port: uint32(n)}, nil
}

// Link parses an optional "link DEV[/PORT]" (rdma's grammar of stat show
// and stat qp): the zero PortRef when the words are empty.
func (a *Args) Link() (ib.PortRef, error) {
	if a.Empty() {
		return ib.PortRef{}, nil
	}
	if _, err := a.Keyword("parameter", "", "link", "help"); err != nil {
		return ib.PortRef{}, err
	}
	if a.Empty() {
		return ib.PortRef{}, nil
	}
	return a.DevPort(a.Next())
}
