package grammar_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
)

func TestParseCheck(t *testing.T) {
	checks, exp, err := grammar.ParseCheck(strings.Fields("po st armed min 100 mtu 4096 gid-type v2 gid-index 3 type v2 ipv4 netdev-mtu 9000"))
	if err != nil || !slices.Equal(checks, []string{"ports"}) || exp.State != ib.PortArmed || exp.MinRateGbps != 100 ||
		exp.ActiveMTU != 4096 || exp.GIDType != gid.TypeRoCEv2 || exp.GIDIndex == nil || *exp.GIDIndex != 3 ||
		exp.GIDSelect != (gid.Criteria{Type: gid.TypeRoCEv2, Family: gid.IPv4}) || exp.NetdevMTU != 9000 {
		t.Errorf("ParseCheck = %q, %+v, %v", checks, exp, err)
	}
	checks, exp, err = grammar.ParseCheck(strings.Fields("devices device-count 2 device-names rxe0,rxe1"))
	if err != nil || !slices.Equal(checks, []string{"devices"}) || exp.DeviceCount != 2 || !slices.Equal(exp.DeviceNames, []string{"rxe0", "rxe1"}) {
		t.Errorf("ParseCheck(devices) = %q, %+v, %v", checks, exp, err)
	}
	if checks, _, err := grammar.ParseCheck(nil); err != nil || !slices.Equal(checks, grammar.CheckNames) {
		t.Errorf("ParseCheck() = %q, %v; want every check", checks, err)
	}
	for line, want := range map[string]string{
		"ports mtu 1000":            "mtu must be an IB MTU",
		"ports min-rate NaN":        `min-rate must be a positive number of Gb/s, not "NaN"`,
		"ports min-rate +Inf":       `not "+Inf"`,
		"ports gid-type v3":         `unknown gid-type "v3"`,
		"ports state UP":            `unknown port state "UP"`,
		"frob":                      `unknown check or expectation "frob"`,
		"devices device-count 0":    "device-count must be a positive number",
		"ports gid-index x1":        "gid-index must be a GID table index",
		"ports type v2":             "give gid-index",
		"ports gid-index 1 type v9": `unknown GID type "v9"`,
		"ports mtu":                 "missing mtu value",
	} {
		_, _, err := grammar.ParseCheck(strings.Fields(line))
		var usage *cmdline.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a usage error saying %q", line, err, want)
		}
	}
}
