package grammar_test

import (
	"fmt"
	"log"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
)

// Accept the words of `grdma probe` in a Go program: the same keywords,
// abbreviations, defaults and usage errors.
func ExampleParseProbe() {
	req, err := grammar.ParseProbe([]string{"rxe0", "peer", "hosta", "bw", "read", "it", "200"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(req.Options.Device, req.PeerAddr, req.Test.Kind, req.Test.Op, req.Test.Iters, req.TwoHost())
	_, err = grammar.ParseProbe([]string{"rxe0", "bw"})
	fmt.Println(err)
	// Output:
	// rxe0 hosta:18515 bw read 200 true
	// bw needs a peer: probe DEV listen on one host, probe DEV peer HOST bw on the other
}

// Accept the words of `grdma check` in a Go program: the checks to run
// and what the ports must meet, with the same abbreviations and usage
// errors.
func ExampleParseCheck() {
	checks, exp, err := grammar.ParseCheck([]string{"ports", "min-rate", "100", "mtu", "4096"})
	fmt.Println(checks, exp.MinRateGbps, exp.ActiveMTU, err)
	_, _, err = grammar.ParseCheck([]string{"ports", "mtu", "1000"})
	fmt.Println(err)
	// Output:
	// [ports] 100 4096 <nil>
	// mtu must be an IB MTU (256, 512, 1024, 2048, 4096), not 1000
}

// Accept the words of `grdma gid show` in a Go program: the port to look
// at and the criteria Select chooses a GID by.
func ExampleParseGID() {
	port, c, err := grammar.ParseGID([]string{"rxe0/1", "type", "v2", "ipv4"})
	fmt.Println(port.Device, port.Port, c.Type, c.Family == gid.IPv4, err)
	// Output: rxe0 1 RoCE v2 true <nil>
}

// The words of `grdma res show qp ...` as the nldev.ResSelect that
// nldev.Client.ResList runs: keys abbreviated as rdma abbreviates them
// ("st" is state), values checked against the field's names.
func ExampleParseResSelect() {
	t, _ := grammar.ParseResType("q")
	sel, err := grammar.ParseResSelect(t, []string{"link", "rxe0/1", "type", "RC", "st", "rts"})
	fmt.Println(sel.Type, sel.Device, sel.Port, len(sel.Filters), err)
	for _, f := range sel.Filters {
		fmt.Println(f.Field == nldev.FieldQPType, f.Field == nldev.FieldState, f.Words)
	}
	_, err = grammar.ParseResSelect(t, []string{"state", "UP"})
	fmt.Println(err)
	// Output:
	// qp rxe0 1 2 <nil>
	// true false [rc]
	// false true [rts]
	// bad state filter: unknown value "UP" (expected RESET, INIT, RTR, RTS, SQD, SQE, ERR)
}
