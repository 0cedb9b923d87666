package main

import (
	"strconv"
	"strings"

	"github.com/grdma/grdma/nldev"
	"github.com/spf13/cobra"
)

// argv walks the words after an object in iproute2 grammar: keywords,
// abbreviated as rdma abbreviates them, each followed by its values.
type argv struct {
	words []string
	help  string // e.g. "grdma link help", named in usage errors
	// cmd prints its help where a keyword list offers "help" and the word
	// is help (or h, he...), as rdma does at the same places.
	cmd *cobra.Command
}

func newArgv(words []string, help string) *argv { return &argv{words: words, help: help} }

// cmdArgv is newArgv for the words of cmd, whose help "help" prints.
func cmdArgv(cmd *cobra.Command, words []string, help string) *argv {
	return &argv{words: words, help: help, cmd: cmd}
}

// sub returns an argv for words that shares a's help.
func (a *argv) sub(words []string) *argv { return &argv{words: words, help: a.help, cmd: a.cmd} }

// errHelpShown ends a command whose help a "help" word printed: exit 0.
var errHelpShown = &helpShownError{}

type helpShownError struct{}

func (*helpShownError) Error() string { return "" }

func (a *argv) empty() bool { return len(a.words) == 0 }

func (a *argv) next() string {
	w := a.words[0]
	a.words = a.words[1:]
	return w
}

// keyword consumes the next word as one of keywords, or returns def when
// there are no words left (def "" makes the keyword mandatory). Keywords
// are listed in rdma's order, which decides abbreviations; "help" among
// them prints the command's help (errHelpShown).
func (a *argv) keyword(what, def string, keywords ...string) (string, error) {
	if a.empty() {
		if def == "" {
			return "", usagef(a.help, "missing %s: expected %s", what, strings.Join(keywords, ", "))
		}
		return def, nil
	}
	k, err := a.match(what, a.next(), keywords)
	if err == nil && k == "help" && a.cmd != nil {
		if err := a.cmd.Help(); err != nil {
			return "", err
		}
		return "", errHelpShown
	}
	return k, err
}

// match resolves word to a keyword as rdma does: the first keyword, in
// the order given, that word abbreviates (nldev.Abbrev).
func (a *argv) match(what, word string, keywords []string) (string, error) {
	if k, ok := nldev.Abbrev(word, keywords); ok {
		return k, nil
	}
	return "", usagef(a.help, "unknown %s %q: expected %s", what, word, strings.Join(keywords, ", "))
}

// linkOrHelp checks that the first word is link (or prints the help for
// help), as rdma's tables of stat set, unset, qp set, bind and unbind say.
func (a *argv) linkOrHelp() error {
	if a.empty() {
		return nil
	}
	_, err := a.sub(a.words[:1]).keyword("parameter", "", "link", "help")
	return err
}

// value consumes the value that must follow a keyword.
func (a *argv) value(what string) (string, error) {
	if a.empty() {
		return "", usagef(a.help, "missing %s", what)
	}
	return a.next(), nil
}

// onOff consumes an on|off value.
func (a *argv) onOff(what string) (bool, error) {
	v, err := a.value(what + " (on or off)")
	if err != nil {
		return false, err
	}
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, usagef(a.help, "%s must be on or off, not %q", what, v)
}

// done fails when words are left over.
func (a *argv) done() error {
	if a.empty() {
		return nil
	}
	return usagef(a.help, "unexpected argument %q", a.words[0])
}

// devPort is a DEV[/PORT] argument. Port 0 means every port.
type devPort struct {
	Dev  string
	Port uint32
}

// parseDevPort parses DEV, DEV/ and DEV/PORT. Unlike rdma, a bare DEV is
// accepted everywhere and means all of its ports.
func (a *argv) parseDevPort(s string) (devPort, error) {
	dev, port, hasSlash := strings.Cut(s, "/")
	if dev == "" {
		return devPort{}, usagef(a.help, "missing device name in %q", s)
	}
	if !hasSlash || port == "" {
		return devPort{Dev: dev}, nil
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil || n == 0 {
		return devPort{}, usagef(a.help, "invalid port %q in %q: ports are numbered from 1", port, s)
	}
	return devPort{Dev: dev, Port: uint32(n)}, nil
}
