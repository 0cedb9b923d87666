package gid

import (
	"errors"
	"os"
	"testing"
)

// The selector prefers usable addresses to tentative ones, then routable
// to link-local, and never picks a DAD-failed one.
func TestSelectAddrStates(t *testing.T) {
	ll := mustParse(t, "fe80::4c9c:e2ff:fed0:bcea")
	global := mustParse(t, "fd00:9::1")
	v4 := mustParse(t, "::ffff:10.9.0.1")
	entry := func(index int, g GID, s AddrState) Entry {
		return Entry{Port: 1, Index: index, GID: g, Type: TypeRoCEv2, Netdev: "veth0", State: s}
	}
	v2 := Criteria{Type: TypeRoCEv2}
	for _, tt := range []struct {
		name    string
		entries []Entry
		c       Criteria
		want    int // index; -1: no match
	}{
		{"usable link-local before tentative global", []Entry{entry(0, ll, AddrUsable), entry(1, global, AddrTentative)}, v2, 0},
		{"usable global before usable link-local", []Entry{entry(0, ll, AddrUsable), entry(1, global, AddrUsable)}, v2, 1},
		{"only tentative: still chosen", []Entry{entry(0, ll, AddrTentative)}, v2, 0},
		{"tentative global before tentative link-local", []Entry{entry(0, ll, AddrTentative), entry(1, global, AddrTentative)}, v2, 1},
		{"DAD-failed never", []Entry{entry(0, ll, AddrDADFailed)}, v2, -1},
		{"DAD-failed skipped", []Entry{entry(0, global, AddrDADFailed), entry(1, ll, AddrTentative)}, v2, 1},
		{"IPv4 is usable whatever", []Entry{entry(0, ll, AddrTentative), entry(1, v4, AddrUsable)}, Criteria{Type: TypeRoCEv2, Family: IPv4}, 1},
	} {
		got, err := Select(tt.entries, tt.c)
		var none *NoMatchError
		switch {
		case tt.want < 0 && !errors.As(err, &none):
			t.Errorf("%s: got %v, %v; want no match", tt.name, got, err)
		case tt.want >= 0 && (err != nil || got.Index != tt.want):
			t.Errorf("%s: got %v, %v; want index %d", tt.name, got, err, tt.want)
		}
	}
	none := &NoMatchError{Criteria: v2, Entries: []Entry{entry(0, ll, AddrDADFailed)}}
	if got := none.Error(); got != "no RoCE v2 GID; the table has: 0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0 (dadfailed)" {
		t.Errorf("no match names the state: %q", got)
	}
}

// ParseIfInet6 on the kernel's file: right after `rdma link add` on a
// fresh veth, its link-local address is tentative (flags c0: permanent +
// tentative); once DAD is over it is permanent (80) only.
func TestParseIfInet6(t *testing.T) {
	during, err := os.ReadFile("../sysfs/testdata/rxe-tentative/proc/net/if_inet6")
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile("../sysfs/testdata/rxe-tentative/if_inet6-after.txt")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ReadTable(mustFS(t, "../sysfs/testdata/rxe-tentative"), "rxe9", 1)
	if err != nil || len(table) != 1 {
		t.Fatalf("captured table: %v, %v", table, err)
	}
	if table[0].State != AddrTentative || !table[0].GID.IsLinkLocal() || table[0].Netdev != "vt0" {
		t.Errorf("ReadTable during DAD: %v, want the link-local GID of vt0 tentative", table[0])
	}
	e := table[0]
	for _, tt := range []struct {
		name string
		data []byte
		want AddrState
	}{
		{"during DAD", during, AddrTentative},
		{"after DAD", after, AddrUsable},
	} {
		states, err := ParseIfInet6(tt.data)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := states.Of(e); got != tt.want {
			t.Errorf("%s: %v is %v, want %v", tt.name, e.GID, got, tt.want)
		}
		other := e
		other.Netdev = "lo"
		if got := states.Of(other); got != AddrUsable {
			t.Errorf("%s: the same address on another netdev is %v, want usable (unknown)", tt.name, got)
		}
	}
	for _, bad := range []string{"fe80 05 40 20 c0 vt0\n", "zz800000000000000000000000000001 05 40 20 c0 vt0\n", "fe800000000000000000000000000001 05 40 20 xx vt0\n"} {
		if _, err := ParseIfInet6([]byte(bad)); err == nil {
			t.Errorf("ParseIfInet6(%q): no error", bad)
		}
	}
	// No IPv6 in the kernel: no file, nothing tentative.
	states, err := ReadAddrStates(mustFS(t, rxeRoot))
	if err != nil || states.Of(e) != AddrUsable {
		t.Errorf("without %s: %v, %v", IfInet6Path, states, err)
	}
}

func FuzzParseIfInet6(f *testing.F) {
	for _, name := range []string{"../sysfs/testdata/rxe-tentative/proc/net/if_inet6", "../sysfs/testdata/rxe-tentative/if_inet6-after.txt"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		states, err := ParseIfInet6(data)
		if err != nil && states != nil {
			t.Fatal("states with an error")
		}
		for _, s := range states {
			if s == AddrUsable {
				t.Fatal("a usable address kept")
			}
		}
	})
}
