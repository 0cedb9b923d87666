package grammar_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
)

func TestParseGID(t *testing.T) {
	for line, want := range map[string]struct {
		dp ib.PortRef
		c  gid.Criteria
	}{
		"":                         {},
		"rxe0/1 type v2 ipv4":      {ib.PortRef{Device: "rxe0", Port: 1}, gid.Criteria{Type: gid.TypeRoCEv2, Family: gid.IPv4}},
		"ty v1 ipv6 net veth0":     {c: gid.Criteria{Type: gid.TypeRoCEv1, Family: gid.IPv6, Netdev: "veth0"}},
		"t":                        {dp: ib.PortRef{Device: "t"}}, // one letter: a device named t
		"rxe1 netdev eth0 type ib": {ib.PortRef{Device: "rxe1"}, gid.Criteria{Type: gid.TypeIB, Netdev: "eth0"}},
	} {
		dp, c, err := grammar.ParseGID(strings.Fields(line))
		if err != nil || dp != want.dp || c != want.c {
			t.Errorf("%q: %+v %+v %v; want %+v %+v", line, dp, c, err, want.dp, want.c)
		}
	}
	for line, want := range map[string]string{
		"rxe0 type v3": `unknown GID type "v3"`,
		"rxe0 vlan 5":  `unknown gid show parameter "vlan"`,
		"rxe0 netdev":  "missing netdev name",
		"rxe0/0":       `invalid port "0"`,
		"ipv4 rxe0":    `unknown gid show parameter "rxe0"`,
	} {
		_, _, err := grammar.ParseGID(strings.Fields(line))
		var usage *cmdline.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want a usage error saying %q", line, err, want)
		}
	}
}
