package verbsprobe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
)

// Connect to 10.0.0.1 over the RDMA CM, as `grdma probe peer 10.0.0.1 cm`
// does: the route picks the device; the result says what the CM chose,
// and a failure is the CM's event. (No output check: it needs an RDMA
// device and a peer, `grdma probe listen cm` or a responder with
// ResponderConfig.CM.)
func ExampleConnectWith_rdmaCM() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.ConnectWith(context.Background(), verbsprobe.Options{Sysfs: fsys, GIDIndex: verbsprobe.AutoGID},
		"10.0.0.1:18515", verbsprobe.ConnectConfig{Test: verbsprobe.Test{Kind: verbsprobe.TestConnect},
			Timeout: 5 * time.Second, Via: verbsprobe.TransportCM})
	if ci := r.Peer.CM; ci.Device != "" {
		fmt.Printf("%s/%d GID %d %s (%s), ToS %d\n", ci.Device, ci.Port, ci.GIDIndex, ci.GID, ci.RoCE, ci.TrafficClass)
		for _, s := range ci.Steps {
			fmt.Printf("  %s %v\n", s.Name, s.Duration)
		}
	}
	var ce *rdmacm.Error
	switch err := r.Err(); {
	case errors.As(err, &ce) && ce.Event == rdmacm.EventRejected:
		log.Fatalf("nothing listens, or refused: %v", err) // reason 8, 28
	case verbsprobe.IsBusy(err):
		log.Fatalf("the responder stayed busy: %v", err)
	case err != nil:
		log.Fatal(err)
	}
}

// Serve one probe over the RDMA CM on any device, as `grdma probe listen
// cm` does.
func ExampleServeCM() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.ServeCM(context.Background(), verbsprobe.Options{Sysfs: fsys, GIDIndex: verbsprobe.AutoGID},
		verbsprobe.ServeConfig{Timeout: time.Minute}, verbsprobe.CMListen{Addr: netip.MustParseAddrPort("0.0.0.0:18515")})
	fmt.Println(r.Device, r.OK(), r.Err())
}
