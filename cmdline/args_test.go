package cmdline

import (
	"errors"
	"testing"
	"time"

	"github.com/grdma/grdma/ib"
)

func TestArgsErrors(t *testing.T) {
	usage := func(err error) string {
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Help != "grdma x help" {
			t.Fatalf("%v: not a usage error pointing at the help", err)
		}
		return ue.Msg
	}
	a := NewArgs(nil, "grdma x help")
	if _, err := a.Keyword("object", "", "qp", "cq"); usage(err) != "missing object: expected qp, cq" {
		t.Error(err)
	}
	if k, err := a.Keyword("object", "qp", "qp", "cq"); k != "qp" || err != nil {
		t.Errorf("default: %q %v", k, err)
	}
	if _, err := NewArgs(nil, "grdma x help").Number("count", 1, 5); usage(err) != `missing count value` {
		t.Error(err)
	}
	if _, err := NewArgs([]string{"x"}, "grdma x help").Sub([]string{"9"}).Number("count", 1, 5); usage(err) != `count must be a number from 1 to 5, not "9"` {
		t.Error(err)
	}
	a = NewArgs([]string{"0s"}, "grdma x help")
	if _, err := a.Duration("timeout", time.Hour); usage(err) != `timeout must be a duration from 1ms to 1h0m0s such as 10s or 500ms, not "0s"` {
		t.Error(err)
	}
	if _, err := NewArgs([]string{"maybe"}, "grdma x help").OnOff("adaptive-moderation"); usage(err) != `adaptive-moderation must be on or off, not "maybe"` {
		t.Error(err)
	}
	if err := NewArgs([]string{"extra"}, "grdma x help").Done(); usage(err) != `unexpected argument "extra"` {
		t.Error(err)
	}
	for in, want := range map[string]string{"/1": `missing device name in "/1"`, "rxe0/0": `invalid port "0" in "rxe0/0": ports are numbered from 1`} {
		if _, err := NewArgs(nil, "grdma x help").DevPort(in); usage(err) != want {
			t.Errorf("%s: %v", in, err)
		}
	}
	if dp, err := NewArgs(nil, "").DevPort("rxe0/"); err != nil || dp != (ib.PortRef{Device: "rxe0"}) {
		t.Errorf("rxe0/: %+v %v", dp, err)
	}
	helped := false
	a = NewArgs([]string{"he"}, "grdma x help")
	a.OnHelp = func() error { helped = true; return nil }
	if k, err := a.Keyword("command", "", "show", "help"); k != "help" || err != nil || !helped {
		t.Errorf("help: %q %v, OnHelp ran %v", k, err, helped)
	}
	err := WithHelp(Usagef("", "bad"), "grdma y help")
	if ue := (*UsageError)(nil); !errors.As(err, &ue) || ue.Help != "grdma y help" {
		t.Errorf("WithHelp: %+v", err)
	}
}

// TestAbbrev: rdma's first match in table order (utils.c strcmpx), an
// exact name first.
func TestAbbrev(t *testing.T) {
	objects := []string{"help", "dev", "link", "resource", "system", "statistic", "monitor"}
	cmID := []string{"link", "lqpn", "qp-type", "state", "ps", "dev-type", "transport-type", "pid", "src-addr", "src-port", "dst-addr", "dst-port", "cm-idn", "dev", "comm"}
	for _, c := range []struct {
		word  string
		names []string
		want  string
	}{
		{"s", objects, "system"}, {"st", objects, "statistic"}, {"r", objects, "resource"}, {"h", objects, "help"},
		{"d", cmID, "dev-type"}, {"dev", cmID, "dev"}, {"s", cmID, "state"}, {"l", cmID, "link"}, {"dst", cmID, "dst-addr"},
		{"x", objects, ""}, {"", objects, ""}, {"systemd", objects, ""},
	} {
		got, ok := Abbrev(c.word, c.names)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Abbrev(%q) = %q, %v; want %q", c.word, got, ok, c.want)
		}
	}
}
