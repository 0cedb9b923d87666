package main

import (
	"strconv"
	"strings"
)

// argv walks the words after an object in iproute2 grammar: keywords,
// abbreviable to a unique prefix, each followed by its values.
type argv struct {
	words []string
	help  string // e.g. "grdma link help", named in usage errors
}

func newArgv(words []string, help string) *argv { return &argv{words: words, help: help} }

func (a *argv) empty() bool { return len(a.words) == 0 }

func (a *argv) next() string {
	w := a.words[0]
	a.words = a.words[1:]
	return w
}

// keyword consumes the next word as one of keywords, or returns def when
// there are no words left (def "" makes the keyword mandatory).
func (a *argv) keyword(what, def string, keywords ...string) (string, error) {
	if a.empty() {
		if def == "" {
			return "", usagef(a.help, "missing %s: expected %s", what, strings.Join(keywords, ", "))
		}
		return def, nil
	}
	return a.match(what, a.next(), keywords)
}

// match resolves word to a keyword: an exact match, else a unique prefix.
func (a *argv) match(what, word string, keywords []string) (string, error) {
	var found []string
	for _, k := range keywords {
		if k == word {
			return k, nil
		}
		if strings.HasPrefix(k, word) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", usagef(a.help, "unknown %s %q: expected %s", what, word, strings.Join(keywords, ", "))
	}
	return "", usagef(a.help, "ambiguous %s %q: could be %s", what, word, strings.Join(found, ", "))
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
