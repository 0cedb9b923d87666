package verbsprobe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/verbsprobe"
)

// Probe rxe0's port 1 with traffic and print each step, as
// `grdma probe rxe0 traffic` does. (No output check: it needs an RDMA
// device.)
func ExampleRun() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.Run(context.Background(), verbsprobe.Options{
		Sysfs: fsys, Device: "rxe0", Port: 1, GIDIndex: verbsprobe.AutoGID, Traffic: true,
	})
	for _, s := range r.Steps {
		fmt.Printf("%-15s ok=%v %v %s\n", s.Name, s.OK, s.Duration, s.Detail)
	}
	if err := r.Err(); err != nil {
		// e.g. "query_port: port rxe0/1 is DOWN, not ACTIVE", with the
		// cause "network device veth0 is down or has no carrier ..."
		var se *verbsprobe.StepError
		if errors.As(err, &se) && se.Cause != "" {
			log.Fatalf("%v (likely cause: %s)", err, se.Cause)
		}
		log.Fatal(err)
	}
}

// Time 100 probes of the control path and print the median of each step.
func ExampleRepeat() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	series := verbsprobe.Repeat(context.Background(), verbsprobe.Options{
		Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID,
	}, 100)
	fmt.Printf("%d of %d passed\n", series.Passed, series.Runs)
	steps, total := series.Timings()
	for _, t := range append(steps, total) {
		fmt.Printf("%-15s %v\n", t.Name, t.Median)
	}
}

// A probe that fails names the step, the error and its likely cause. Here
// the root is a sysfs captured in the e2e guest, without /dev: the probe
// finds rxe0's uverbs device in sysfs but cannot open it.
func ExampleStepError() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.Run(context.Background(), verbsprobe.Options{Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID})
	fmt.Println("driver", r.Driver, "verbs device", r.VerbsDevice, "ok", r.OK())
	var se *verbsprobe.StepError
	if errors.As(r.Err(), &se) {
		fmt.Printf("step %s: %v\ncause: %s\n", se.Step, se.Err, se.Cause)
	}
	// Output:
	// driver rxe verbs device uverbs0 ok false
	// step open: open /dev/infiniband/uverbs0: no such file or directory
	// cause: /dev/infiniband/uverbs0 does not exist: /dev has no devtmpfs, or a container lacks the device
}

// Measure RDMA WRITE bandwidth to a peer host that runs Serve (`grdma
// probe rxe0 listen`), as `grdma probe rxe0 peer hosta bw write` does.
// (No output check: it needs two hosts.)
func ExampleConnect() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	addr, err := verbsprobe.PeerAddress("hosta") // hosta:18515
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.Connect(context.Background(),
		verbsprobe.Options{Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID},
		addr, verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite}, 0)
	if err := r.Err(); err != nil {
		// A failure of the peer is a *RemoteFailure naming its step;
		// ports that cannot talk, an *IncompatibleError naming both.
		log.Fatal(err)
	}
	for _, m := range r.Peer.Measurements {
		fmt.Printf("%s: %.2f Gb/s, %.3f Mmsg/s\n", r.Peer.Test, m.BWGbps(), m.MsgRateMpps())
	}
}

// Serve one peer on TCP 18515 of one address: a grdma Connect, or an
// ibv_rc_pingpong client (`ibv_rc_pingpong -g 1 hostb`), from 10.0.0.0/24
// only, asking for messages of 1 MiB at most. Connections that are not
// a valid peer are logged and closed; the first valid one is served.
func ExampleServe() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "10.0.0.1:18515")
	if err != nil {
		log.Fatal(err)
	}
	r := verbsprobe.Serve(context.Background(),
		verbsprobe.Options{Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID},
		ln, verbsprobe.ServeConfig{
			Timeout:   time.Minute,
			Limits:    verbsprobe.Limits{MaxSize: 1 << 20},
			Allow:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
			OnRefused: func(r verbsprobe.Refusal) { log.Printf("refused %s: %s", r.Peer, r.Reason) },
		})
	fmt.Println(r.OK(), r.Peer.Host)
}

// Run a responder on rxe0 (`grdma probe rxe0 serve 10.0.0.1 peers 32 from
// 10.0.0.0/16 auth /etc/grdma/probe.key`) until SIGTERM, printing one line
// per peer served; then probe it from another host with the same key, as
// `grdma probe rxe0 peer hosta bw auth /etc/grdma/probe.key` does. (No
// output check: it needs two hosts.)
func ExampleRespond() {
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	key, err := verbsprobe.LoadKey("/etc/grdma/probe.key") // ≥ 16 bytes, mode 600
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	dev, res := verbsprobe.OpenDevice(ctx, verbsprobe.Options{Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID})
	if err := res.Err(); err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ln, err := net.Listen("tcp", "10.0.0.1:18515")
	if err != nil {
		log.Fatal(err)
	}
	err = verbsprobe.Respond(ctx, dev, ln, verbsprobe.ResponderConfig{
		ServeConfig: verbsprobe.ServeConfig{
			Allow:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")},
			Key:       key,
			OnRefused: func(r verbsprobe.Refusal) { log.Printf("%s: refused: %s", r.Peer, r.Reason) },
		},
		MaxPeers: 32,
		OnPeer:   func(r *verbsprobe.Result) { fmt.Println(r.Peer.Host, r.Peer.Test, r.OK()) },
	}) // returns when ctx ends, after the running peers' grace, with everything released
	if err != nil {
		log.Fatal(err)
	}

	// On another host:
	r := verbsprobe.ConnectWith(context.Background(),
		verbsprobe.Options{Sysfs: fsys, Device: "rxe0", GIDIndex: verbsprobe.AutoGID},
		"hosta:18515", verbsprobe.ConnectConfig{
			Test: verbsprobe.Test{Kind: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite},
			Key:  key,
		})
	if verbsprobe.IsBusy(r.Err()) {
		log.Fatal("the responder served its peers limit until the timeout")
	}
}
