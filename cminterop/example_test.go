package cminterop_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/grdma/grdma/cminterop"
	"github.com/grdma/grdma/verbsprobe"
)

// Pings an rping server (rping -s -a 10.0.0.2 -S 100) five times, by IP
// address: the RDMA CM chooses the device, port and GID.
func Example() {
	cfg := cminterop.Config{Addr: netip.MustParseAddrPort("10.0.0.2:7174"), Count: 5, Size: 100}
	r := cminterop.Run(context.Background(), cminterop.Rping, cminterop.Client, cfg)
	if r.Err != nil {
		fmt.Println(r.Err) // wraps *rdmacm.Error for the CM's steps (REJECTED, UNREACHABLE, ...)
		return
	}
	fmt.Printf("%d pings via %s/%d, GID %d (%s), ToS %d\n", r.Count, r.CM.Device, r.CM.Port, r.CM.GIDIndex, r.CM.RoCE, r.CM.TrafficClass)
}

// Serves one ucmatose client (ucmatose -s 10.0.0.1 -C 10 -S 300) on
// every device.
func Example_server() {
	cfg := cminterop.Config{Count: 10, Size: 300}
	r := cminterop.Run(context.Background(), cminterop.Ucmatose, cminterop.Server, cfg)
	fmt.Println(r.OK(), r.Count)
}

// Measures RDMA WRITE bandwidth against ib_write_bw -R on 10.0.0.2
// (perftest's default port 18515, 64 KiB × 5000 unless told), as
// ib_write_bw -R 10.0.0.2 would.
func Example_perftest() {
	cfg := cminterop.Config{Addr: netip.MustParseAddrPort("10.0.0.2:0"), Test: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite}
	r := cminterop.Run(context.Background(), cminterop.Perftest, cminterop.Client, cfg)
	if r.Err != nil {
		fmt.Println(r.Err)
		return
	}
	fmt.Printf("%.2f Gb/s against perftest %s\n", r.Measurement.BWGbps(), r.PeerVersion)
}
