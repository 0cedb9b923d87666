package gid_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/sysfs"
)

// Select answers "which GID index should this job use?" (NCCL_IB_GID_INDEX,
// UCX_IB_GID_INDEX): the first RoCE v2 IPv4 GID on eth0, say. The table is
// read from a captured GPU node's sysfs here; "/" on a live machine.
func ExampleSelect() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/hca")
	if err != nil {
		fmt.Println(err)
		return
	}
	table, err := gid.ReadTable(fsys, "mlx5_0", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range table {
		fmt.Println(e)
	}
	for _, c := range []gid.Criteria{
		{Type: gid.TypeRoCEv2, Family: gid.IPv4},
		{Type: gid.TypeRoCEv2, Family: gid.IPv4, Netdev: "ens1f0np0.100"}, // the VLAN
		{Type: gid.TypeRoCEv2, Netdev: "eth9"},
	} {
		e, err := gid.Select(table, c)
		var none *gid.NoMatchError
		if errors.As(err, &none) {
			fmt.Printf("%s: none\n", none.Criteria)
			continue
		}
		fmt.Printf("%s: NCCL_IB_GID_INDEX=%d\n", c, e.Index)
	}
	// Output:
	// 0 fe80::e42:a1ff:fe12:3456 RoCE v1 ens1f0np0
	// 1 fe80::e42:a1ff:fe12:3456 RoCE v2 ens1f0np0
	// 2 ::ffff:192.168.10.1 RoCE v1 ens1f0np0
	// 3 ::ffff:192.168.10.1 RoCE v2 ens1f0np0
	// 6 2001:db8:10::1 RoCE v1 ens1f0np0
	// 7 2001:db8:10::1 RoCE v2 ens1f0np0
	// 8 fe80::e42:a1ff:fe12:3456 RoCE v1 ens1f0np0.100
	// 9 fe80::e42:a1ff:fe12:3456 RoCE v2 ens1f0np0.100
	// 10 ::ffff:10.100.0.1 RoCE v1 ens1f0np0.100
	// 11 ::ffff:10.100.0.1 RoCE v2 ens1f0np0.100
	// RoCE v2 IPv4 GID: NCCL_IB_GID_INDEX=3
	// RoCE v2 IPv4 GID on netdev ens1f0np0.100: NCCL_IB_GID_INDEX=11
	// RoCE v2 GID on netdev eth9: none
}

func ExampleParse() {
	for _, s := range []string{"fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "::ffff:10.9.0.1"} {
		g, err := gid.Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s (sysfs %s) link-local %v", g, g.SysfsString(), g.IsLinkLocal())
		if ip4, ok := g.IPv4(); ok {
			fmt.Printf(" IPv4 %s", ip4)
		}
		fmt.Println()
	}
	// Output:
	// fe80::e42:a1ff:fe12:3456 (sysfs fe80:0000:0000:0000:0e42:a1ff:fe12:3456) link-local true
	// ::ffff:10.9.0.1 (sysfs 0000:0000:0000:0000:0000:ffff:0a09:0001) link-local false IPv4 10.9.0.1
}

// Filter keeps the entries that match, in table order: here the IPv6 GIDs
// of a Soft-RoCE device captured in the e2e guest (Debian 6.12).
func ExampleFilter() {
	fsys, _ := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	table, err := gid.ReadTable(fsys, "rxe0", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range gid.Filter(table, gid.Criteria{Family: gid.IPv6}) {
		fmt.Println(e)
	}
	// Output:
	// 0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0
	// 2 fd00:9::1 RoCE v2 veth0
}

// A Watcher reports when the GID a job would use changes on a port, as
// `grdma gid watch` does: here the recorded rxe tables, then the same
// tables once rxe0's IPv4 address is gone (its GID leaves the table). A
// program reads the live tables (gid.ReadTables(fsys, "", 0)) and wakes
// the watcher with gid.AddressEvents.
func ExampleWatcher() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	before, err := gid.ReadTables(fsys, "", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	var after []gid.Table
	for _, t := range before {
		kept := gid.Table{Device: t.Device, Port: t.Port}
		for _, e := range t.Entries {
			if _, v4 := e.IPv4(); !v4 || t.Device != "rxe0" {
				kept.Entries = append(kept.Entries, e)
			}
		}
		after = append(after, kept)
	}
	reads := [][]gid.Table{before, after}
	events := make(chan struct{}, 1)
	events <- struct{}{} // an address event
	w := gid.Watcher{
		Read: func() ([]gid.Table, error) {
			t := reads[0]
			if len(reads) > 1 {
				reads = reads[1:]
			}
			return t, nil
		},
		Criteria: gid.Criteria{Type: gid.TypeRoCEv2},
		Events:   events,
	}
	done := errors.New("done")
	err = w.Run(context.Background(), func(c gid.Change) error {
		fmt.Printf("%s/%d: index %d (%s) -> index %d (%s)\n", c.Device, c.Port, c.Old.Index, c.Old.GID, c.New.Index, c.New.GID)
		return done
	})
	fmt.Println(err == done)
	// Output:
	// rxe0/1: index 1 (::ffff:10.9.0.1) -> index 2 (fd00:9::1)
	// true
}
