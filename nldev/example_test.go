package nldev_test

import (
	"errors"
	"fmt"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
)

// recordedKernel stands in for the kernel in these examples: it answers
// with the replies a Debian 6.12 kernel sent for two rxe devices (rxe0 on
// veth0, rxe1 on veth1), recorded under testdata/nldev/6.12. A program
// talks to the real kernel with nldev.Dial(nil) instead.
func recordedKernel(dir string) *nldev.Client {
	return nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/" + dir).Standard().Conn())
}

// List devices and their ports, as `rdma dev` and `rdma link` do.
func Example() {
	c := recordedKernel("nl") // a program: c, err := nldev.Dial(nil)
	defer c.Close()

	devs, err := c.Devices()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range devs {
		fmt.Printf("%d: %s node_type %s node_guid %s ports %d\n", d.Index, d.Name, d.NodeType, nldev.FormatGUID(d.NodeGUID), d.NumPorts)
		ports, err := c.Ports(d.Index)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, p := range ports {
			fmt.Printf("   port %d state %s physical_state %s netdev %s\n", p.Port, p.State, p.PhysState, p.Netdev)
		}
	}
	// Output:
	// 0: rxe0 node_type ca node_guid 5cbf:41ff:fe21:5769 ports 1
	//    port 1 state ACTIVE physical_state LINK_UP netdev veth0
	// 1: rxe1 node_type ca node_guid 90ef:2dff:fe5e:73a9 ports 1
	//    port 1 state ACTIVE physical_state LINK_UP netdev veth1
}

// Dial opens the kernel's RDMA netlink. A machine whose kernel has no RDMA
// (ib_core not loaded) is told apart from other failures.
func ExampleDial() {
	c, err := nldev.Dial(nil)
	if errors.Is(err, nldev.ErrNoRDMANetlink) {
		fmt.Println("no RDMA on this machine")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	devs, err := c.Devices()
	fmt.Println(len(devs), "devices", err)
}

// A Config with NetNS talks to the RDMA netlink of another network
// namespace, as grdma -n NAME does: in exclusive netns mode each namespace
// sees only its own devices.
// The namespace is a name in /run/netns, a path, or a PID, as for rdma -n.
func ExampleDialNetNS() {
	c, err := nldev.DialNetNS("blue")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	devs, _ := c.Devices()
	fmt.Println(len(devs), "devices in blue")
}

// FindDevice picks a device by name from a listing; its error lists the
// devices there are.
func ExampleFindDevice() {
	c := recordedKernel("nl")
	defer c.Close()
	devs, _ := c.Devices()
	d, err := nldev.FindDevice(devs, "rxe1")
	fmt.Println(d.Index, d.Name, d.Protocol, err)
	_, err = nldev.FindDevice(devs, "mlx5_0")
	fmt.Println(err)
	// Output:
	// 1 rxe1 roce <nil>
	// RDMA device mlx5_0 not found (devices: rxe0, rxe1)
}

func ExampleClient_System() {
	c := recordedKernel("nl")
	defer c.Close()
	s, err := c.System()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exclusive netns:", s.NetNSMode == nldev.NetNSExclusive)
	fmt.Println("copy-on-fork:", s.CopyOnFork)
	fmt.Println("monitor events:", s.Monitor) // Linux 6.13+, and Debian's 6.12
	// Output:
	// exclusive netns: false
	// copy-on-fork: true
	// monitor events: true
}

// PortCounters reads the hardware counters of a port, as
// `rdma statistic show link rxe0/1` does.
func ExampleClient_PortCounters() {
	c := recordedKernel("stat/nl")
	defer c.Close()
	pc, err := c.PortCounters(0, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ctr := range pc.Counters[:4] {
		fmt.Printf("%s/%d %s %d\n", pc.Device, pc.Port, ctr.Name, ctr.Value)
	}
	// Output:
	// rxe0/1 sent_pkts 502
	// rxe0/1 rcvd_pkts 502
	// rxe0/1 duplicate_request 1
	// rxe0/1 out_of_seq_request 0
}

// Read the counters of every port, as `rdma statistic show` does; with a
// device name, SelectPorts picks its ports (and names the devices there
// are when it is not there).
func ExampleClient_PortCountersOf() {
	c := recordedKernel("stat/nl")
	defer c.Close()
	devs, err := c.Devices()
	if err != nil {
		fmt.Println(err)
		return
	}
	refs, _ := nldev.SelectPorts(devs, "", 0)
	counters, err := c.PortCountersOf(refs, func(r nldev.DevicePort) { fmt.Printf("%s/%d has no counters\n", r.Device.Name, r.Port) })
	for _, pc := range counters {
		fmt.Printf("%s/%d: %d counters\n", pc.Device, pc.Port, len(pc.Counters))
	}
	_, err = nldev.SelectPorts(devs, "rxe0", 2)
	fmt.Println(err)
	// Output:
	// rxe0/1: 15 counters
	// rxe1/1: 15 counters
	// RDMA device rxe0 has no port 2 (it has 1)
}

// DecodeEvents decodes RDMA monitor notifications, here the ones Debian's
// 6.12 kernel sent while rxe0 was added on veth0, renamed to rxe_a and
// deleted (that kernel sends no RENAME). Client.Monitor receives them
// live, where System().Monitor is true (Linux 6.13+, or a backport).
func ExampleDecodeEvents() {
	msgs, err := nlfixture.Load("../testdata/nldev/6.12/monitor/monitor.bin")
	if err != nil {
		fmt.Println(err)
		return
	}
	events, err := nldev.DecodeEvents(msgs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range events {
		fmt.Printf("%s dev %d %s", e.Type, e.DevIndex, e.Device)
		if e.Has(nldev.AttrNetdevName) {
			fmt.Printf(" port %d netdev %s", e.Port, e.Netdev)
		}
		fmt.Println()
	}
	// Output:
	// REGISTER dev 0 rxe0
	// NETDEV_ATTACH dev 0 rxe0 port 1 netdev veth0
	// UNREGISTER dev 0 rxe_a
}

// List the RC queue pairs in state RTS of port 1 of rxe0, as `rdma res
// show qp link rxe0/1 type RC state RTS` does (package grammar reads
// such a selection from the words of a command line). ResList picks a
// single lookup or a dump, in rdma's port order.
func ExampleClient_ResList() {
	c := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/res/6.12/nl").Standard().Res().Conn())
	defer c.Close()

	sel := nldev.ResSelect{Type: nldev.ResQP, Device: "rxe0", Port: 1, Filters: []nldev.ResFilter{
		{Field: nldev.FieldQPType, Words: []string{"RC"}},
		{Field: nldev.FieldState, Words: []string{"RTS"}},
	}}
	err := c.ResList(sel, nil, func(o nldev.ResObject) error {
		qp := o.(*nldev.QP)
		fmt.Printf("%s/%d lqpn %d rqpn %d %s %s pid %d\n", qp.Device, qp.Port, qp.LQPN, qp.RQPN, qp.Type, qp.State, qp.PID)
		return nil
	}, nil)
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// rxe0/1 lqpn 17 rqpn 18 RC RTS pid 262
	// rxe0/1 lqpn 18 rqpn 17 RC RTS pid 264
	// rxe0/1 lqpn 19 rqpn 20 RC RTS pid 268
	// rxe0/1 lqpn 20 rqpn 19 RC RTS pid 265
}
