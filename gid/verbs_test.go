package gid

import (
	"errors"
	"testing"

	"github.com/grdma/grdma/uverbs"
)

func TestFromVerbs(t *testing.T) {
	names := &ifnames{loaded: true, byIdx: map[uint32]string{3: "veth0"}}
	raw := uverbs.GIDEntry{Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2, NetdevIfindex: 3}
	copy(raw.GID[10:], []byte{0xff, 0xff, 10, 9, 0, 1})
	e, err := FromVerbs(raw, names.name)
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != "1 ::ffff:10.9.0.1 RoCE v2 veth0" || e.Port != 1 {
		t.Fatalf("entry %v", e)
	}
	ib := uverbs.GIDEntry{Index: 0, Port: 2, Type: uverbs.GIDTypeIB}
	ib.GID[0], ib.GID[1] = 0xfe, 0x80
	if e, err := FromVerbs(ib, names.name); err != nil || e.Type != TypeIB || e.Netdev != "" {
		t.Fatalf("IB entry %v, %v", e, err)
	}
	if _, err := FromVerbs(uverbs.GIDEntry{Type: 7}, names.name); !errors.Is(err, ErrUnknownType) {
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
