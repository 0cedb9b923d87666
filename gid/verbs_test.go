package gid

import (
	"errors"
	"testing"

	"github.com/grdma/grdma/uverbs"
)

func TestFromVerbs(t *testing.T) {
	names := NewNetdevs(mustFS(t, "../sysfs/testdata/rxe-6.12")) // veth0 is ifindex 3 there
	raw := uverbs.GIDEntry{Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2, NetdevIfindex: 3}
	copy(raw.GID[10:], []byte{0xff, 0xff, 10, 9, 0, 1})
	e, err := FromVerbs(raw, names.Name)
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != "1 ::ffff:10.9.0.1 RoCE v2 veth0" || e.Port != 1 {
		t.Fatalf("entry %v", e)
	}
	ib := uverbs.GIDEntry{Index: 0, Port: 2, Type: uverbs.GIDTypeIB}
	ib.GID[0], ib.GID[1] = 0xfe, 0x80
	if e, err := FromVerbs(ib, names.Name); err != nil || e.Type != TypeIB || e.Netdev != "" {
		t.Fatalf("IB entry %v, %v", e, err)
	}
	if _, err := FromVerbs(uverbs.GIDEntry{Type: 7}, names.Name); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("type 7: %v", err)
	}
}

// TestReadTablesVerbsFallsBack: without a usable uverbs device (the
// captured tree has no /dev), the tables come from sysfs, unchanged.
func TestReadTablesVerbsFallsBack(t *testing.T) {
	fsys := mustFS(t, "../sysfs/testdata/rxe-6.12")
	want, err := ReadTables(fsys, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTablesVerbs(fsys, "", 0, func(string) (uverbs.Node, error) {
		return uverbs.Node{Name: "uverbs0", Major: 231, Minor: 192, DriverID: 14}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d tables, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i].Entries) != len(want[i].Entries) {
			t.Fatalf("table %d: %d entries, want %d", i, len(got[i].Entries), len(want[i].Entries))
		}
	}
}

// TestNetdevs: told names win; an index it was not told is looked up in
// class/net, once.
func TestNetdevs(t *testing.T) {
	n := NewNetdevs(mustFS(t, "../sysfs/testdata/rxe-6.12"))
	n.Add(3, "told0")
	if got := n.Name(3); got != "told0" {
		t.Errorf("told index 3: %q", got)
	}
	if got := n.Name(2); got != "veth1" { // from class/net
		t.Errorf("index 2: %q, want veth1", got)
	}
	if got := n.Name(3); got != "told0" {
		t.Errorf("index 3 after the class/net walk: %q, want the told name", got)
	}
	if got := n.Name(99); got != "" {
		t.Errorf("index 99: %q, want none", got)
	}
}
