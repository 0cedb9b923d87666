package ports_test

import (
	"fmt"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/sysfs"
)

// A Reader with only sysfs reads every port from /sys/class/infiniband.
// Here the root is a captured GPU node with two RoCE ports and an
// InfiniBand one; on a live machine it is "/". A RoCE port's MTU, without
// the uverbs device, is derived from its netdev's MTU as the kernel does.
func ExampleReader() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/hca")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := &ports.Reader{Sysfs: fsys}
	all, err := r.Read("", 0) // every device, every port
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range all {
		mtu := "?" // InfiniBand: negotiated, only verbs know it
		if p.MTUSource != ports.MTUUnknown {
			mtu = p.ActiveMTU.String()
		}
		fmt.Printf("%s/%d %s %s %s %s %g Gb/s mtu %s (%s)\n", p.Device, p.Port, p.State, p.LinkLayer,
			p.Width, p.Speed, p.RateGbps(), mtu, p.MTUSource)
	}
	// Output:
	// mlx5_0/1 ACTIVE Ethernet 4X EDR 100 Gb/s mtu 4096 (derived)
	// mlx5_1/1 DOWN Ethernet 4X QDR 40 Gb/s mtu 1024 (derived)
	// mlx5_2/1 ACTIVE InfiniBand 4X HDR 200 Gb/s mtu ? (unknown)
}

// With Netlink set, the device list, states and netdevs come from RDMA
// netlink, and ports of devices outside the caller's network namespace are
// not shown. Here netlink answers from recordings of a Debian 6.12 kernel
// with two rxe devices, and sysfs is the same kernel's, captured; a
// program would pass the *nldev.Client of nldev.Dial(nil) and the root "/".
func ExampleReader_netlink() {
	nl := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/nl").Standard().Conn())
	defer nl.Close()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := &ports.Reader{Sysfs: fsys, Netlink: nl}
	rxe0, err := r.Read("rxe0", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := rxe0[0]
	fmt.Printf("%s/%d %s %s netdev %s (mtu %d) active_mtu %s (%s)\n", p.Device, p.Port, p.State, p.PhysState, p.Netdev, p.NetdevMTU, p.ActiveMTU, p.MTUSource)
	_, err = r.Read("mlx5_0", 0)
	fmt.Println(err)
	// Output:
	// rxe0/1 ACTIVE LINK_UP netdev veth0 (mtu 1500) active_mtu 1024 (derived)
	// RDMA device mlx5_0 not found
}

// DeriveRoCEActiveMTU is the kernel's choice of a RoCE port's active MTU
// for a netdev MTU: the largest IB MTU that fits with the RoCE headers,
// which rxe counts as 80 bytes and the hardware drivers as 96 (with no MTU
// at all, 0, below 352 bytes).
func ExampleDeriveRoCEActiveMTU() {
	fmt.Println("netdev mlx5 rxe")
	for _, mtu := range []int{300, 1110, 1500, 9000} {
		fmt.Println(mtu, ports.DeriveRoCEActiveMTU("mlx5", mtu).Bytes(), ports.DeriveRoCEActiveMTU("rxe", mtu).Bytes())
	}
	// Output:
	// netdev mlx5 rxe
	// 300 0 256
	// 1110 512 1024
	// 1500 1024 1024
	// 9000 4096 4096
}
