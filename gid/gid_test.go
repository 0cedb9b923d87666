package gid

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
)

const (
	hcaRoot = "../sysfs/testdata/hca"
	rxeRoot = "../sysfs/testdata/rxe-6.12"
)

func mustParse(t testing.TB, s string) GID {
	t.Helper()
	g, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestParseAndFormat(t *testing.T) {
	tests := []struct {
		in, text, sysfs string
		ipv4            string
		linkLocal       bool
	}{
		{"fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "fe80::e42:a1ff:fe12:3456", "fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "", true},
		{"fe80::e42:a1ff:fe12:3456", "fe80::e42:a1ff:fe12:3456", "fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "", true},
		{"0000:0000:0000:0000:0000:ffff:0a09:0001", "::ffff:10.9.0.1", "0000:0000:0000:0000:0000:ffff:0a09:0001", "10.9.0.1", false},
		{"::ffff:10.9.0.1", "::ffff:10.9.0.1", "0000:0000:0000:0000:0000:ffff:0a09:0001", "10.9.0.1", false},
		{"FD00:0009:0000:0000:0000:0000:0000:0001", "fd00:9::1", "fd00:0009:0000:0000:0000:0000:0000:0001", "", false},
		{"2001:db8:10::1", "2001:db8:10::1", "2001:0db8:0010:0000:0000:0000:0000:0001", "", false},
		{"0000:0000:0000:0000:0000:0000:0000:0000", "::", "0000:0000:0000:0000:0000:0000:0000:0000", "", false},
	}
	for _, tt := range tests {
		g := mustParse(t, tt.in)
		if got := g.String(); got != tt.text {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.text)
		}
		if got := g.SysfsString(); got != tt.sysfs {
			t.Errorf("Parse(%q).SysfsString() = %q, want %q", tt.in, got, tt.sysfs)
		}
		ipv4, ok := g.IPv4()
		if ok != (tt.ipv4 != "") || (ok && ipv4.String() != tt.ipv4) || g.IsIPv4Mapped() != ok {
			t.Errorf("Parse(%q).IPv4() = %v, %v; want %q", tt.in, ipv4, ok, tt.ipv4)
		}
		if g.IsLinkLocal() != tt.linkLocal {
			t.Errorf("Parse(%q).IsLinkLocal() = %v", tt.in, !tt.linkLocal)
		}
	}
	for _, bad := range []string{"", "10.9.0.1", "fe80::1%eth0", "fe80:0000:0000:0000:0e42:a1ff:fe12", "fe80-0000-0000-0000-0e42-a1ff-fe12-3456", "xyz"} {
		if g, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, g)
		}
	}
}

func TestGIDParts(t *testing.T) {
	g := mustParse(t, "fe80:0000:0000:0000:0c42:a103:00ab:cdef")
	if g.SubnetPrefix() != 0xfe80000000000000 || g.InterfaceID() != 0x0c42a10300abcdef {
		t.Errorf("SubnetPrefix, InterfaceID = %#x, %#x", g.SubnetPrefix(), g.InterfaceID())
	}
	for s, empty := range map[string]bool{
		"::": true, "fe80::": true, "fe80::1": false, "::ffff:10.9.0.1": false, "fec0::": false,
	} {
		g := mustParse(t, s)
		if g.IsEmpty() != empty {
			t.Errorf("%s.IsEmpty() = %v, want %v", s, !empty, empty)
		}
		if g.IsZero() != (s == "::") {
			t.Errorf("%s.IsZero() = %v", s, g.IsZero())
		}
	}
}

func TestJSON(t *testing.T) {
	in := struct{ GID GID }{mustParse(t, "::ffff:10.9.0.1")}
	data, err := json.Marshal(in)
	if err != nil || string(data) != `{"GID":"::ffff:10.9.0.1"}` {
		t.Errorf("json.Marshal = %s, %v", data, err)
	}
	var out struct{ GID GID }
	if err := json.Unmarshal(data, &out); err != nil || out != in {
		t.Errorf("json.Unmarshal = %v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"GID":"nope"}`), &out); err == nil {
		t.Error("json.Unmarshal of a bad GID succeeded")
	}
}

func TestTypes(t *testing.T) {
	tests := []struct {
		sysfs, linkLayer string
		want             Type
		name, version    string
	}{
		{"IB/RoCE v1", "InfiniBand", TypeIB, "IB", "v1"},
		{"IB/RoCE v1", "Ethernet", TypeRoCEv1, "RoCE v1", "v1"},
		{"RoCE v2", "Ethernet", TypeRoCEv2, "RoCE v2", "v2"},
	}
	for _, tt := range tests {
		got, err := ParseSysfsType(tt.sysfs, ib.ParseLinkLayer(tt.linkLayer))
		if err != nil || got != tt.want || got.String() != tt.name || got.Version() != tt.version {
			t.Errorf("ParseSysfsType(%q, %q) = %v (%s), %v", tt.sysfs, tt.linkLayer, got, got.Version(), err)
		}
	}
	if _, err := ParseSysfsType("RoCE v3", ib.LinkLayerEthernet); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseSysfsType(RoCE v3) = %v, want ErrUnknownType", err)
	}
	for in, want := range map[string]Type{"ib": TypeIB, "IB": TypeIB, "v1": TypeRoCEv1, "V2": TypeRoCEv2, "RoCE v2": TypeRoCEv2} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseType("v3"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseType(v3) = %v, want ErrUnknownType", err)
	}
}

func mustFS(t testing.TB, root string) sysfs.FS {
	t.Helper()
	f, err := sysfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadTable(t *testing.T) {
	ll := mustParse(t, "fe80::e42:a1ff:fe12:3456")
	v4 := mustParse(t, "::ffff:192.168.10.1")
	v6 := mustParse(t, "2001:db8:10::1")
	vlan4 := mustParse(t, "::ffff:10.100.0.1")
	const p0, vlan = "ens1f0np0", "ens1f0np0.100"
	tests := []struct {
		root, dev string
		want      []Entry
	}{{
		root: hcaRoot, dev: "mlx5_0",
		want: []Entry{
			{1, 0, ll, TypeRoCEv1, p0, AddrUsable}, {1, 1, ll, TypeRoCEv2, p0, AddrUsable},
			{1, 2, v4, TypeRoCEv1, p0, AddrUsable}, {1, 3, v4, TypeRoCEv2, p0, AddrUsable},
			{1, 6, v6, TypeRoCEv1, p0, AddrUsable}, {1, 7, v6, TypeRoCEv2, p0, AddrUsable},
			{1, 8, ll, TypeRoCEv1, vlan, AddrUsable}, {1, 9, ll, TypeRoCEv2, vlan, AddrUsable},
			{1, 10, vlan4, TypeRoCEv1, vlan, AddrUsable}, {1, 11, vlan4, TypeRoCEv2, vlan, AddrUsable},
		},
	}, {
		root: hcaRoot, dev: "mlx5_2",
		want: []Entry{{1, 0, mustParse(t, "fe80::c42:a103:ab:cdef"), TypeIB, "", AddrUsable}},
	}, {
		// captured: rxe has only RoCE v2 GIDs, here 3 of 1024 slots used
		root: rxeRoot, dev: "rxe0",
		want: []Entry{
			{1, 0, mustParse(t, "fe80::4c9c:e2ff:fed0:bcea"), TypeRoCEv2, "veth0", AddrUsable},
			{1, 1, mustParse(t, "::ffff:10.9.0.1"), TypeRoCEv2, "veth0", AddrUsable},
			{1, 2, mustParse(t, "fd00:9::1"), TypeRoCEv2, "veth0", AddrUsable},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.dev, func(t *testing.T) {
			got, err := ReadTable(mustFS(t, tt.root), tt.dev, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadTable(%s, 1) mismatch (-want +got):\n%s", tt.dev, diff)
			}
			tables, err := ReadTables(mustFS(t, tt.root), tt.dev, 0)
			if want := []Table{{tt.dev, 1, got}}; err != nil || !cmp.Equal(tables, want) {
				t.Errorf("ReadTables(%s) = %v, %v; want %v", tt.dev, tables, err, want)
			}
		})
	}
}

func TestReadTables(t *testing.T) {
	fsys := mustFS(t, hcaRoot)
	tables, err := ReadTables(fsys, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tb := range tables {
		got = append(got, fmt.Sprintf("%s/%d:%d", tb.Device, tb.Port, len(tb.Entries)))
	}
	// mlx5_3 vanished after being listed
	if want := []string{"mlx5_0/1:10", "mlx5_1/1:2", "mlx5_2/1:1"}; !cmp.Equal(got, want) {
		t.Errorf("ReadTables() = %v, want %v", got, want)
	}
	var nf *ib.NotFoundError
	for _, tt := range []struct {
		dev  string
		port uint32
		want string
	}{
		{"mlx5_3", 0, "RDMA device mlx5_3 not found"},
		{"mlx5_9", 1, "RDMA device mlx5_9 not found"},
		{"mlx5_0", 2, "RDMA device mlx5_0 has no port 2"},
	} {
		if _, err := ReadTables(fsys, tt.dev, tt.port); !errors.As(err, &nf) || err.Error() != tt.want {
			t.Errorf("ReadTables(%s, %d) = %v, want %q", tt.dev, tt.port, err, tt.want)
		}
	}
}

func TestEntryIPv4(t *testing.T) {
	e := Entry{GID: mustParse(t, "::ffff:10.9.0.1"), Type: TypeRoCEv2}
	if ip, ok := e.IPv4(); !ok || ip != "10.9.0.1" {
		t.Errorf("IPv4() = %q, %v", ip, ok)
	}
	e.Type = TypeIB // an IB GID is not an address
	if ip, ok := e.IPv4(); ok {
		t.Errorf("IB IPv4() = %q, want none", ip)
	}
}

func TestSelect(t *testing.T) {
	table, err := ReadTable(mustFS(t, hcaRoot), "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		c     Criteria
		index int
	}{
		{Criteria{Type: TypeRoCEv2, Family: IPv4}, 3},
		{Criteria{Type: TypeRoCEv1, Family: IPv4}, 2},
		{Criteria{Type: TypeRoCEv2, Family: IPv6}, 7}, // global before link-local 1
		{Criteria{Type: TypeRoCEv2}, 3},               // routable before link-local 1
		{Criteria{Type: TypeRoCEv2, Family: IPv4, Netdev: "ens1f0np0.100"}, 11},
		{Criteria{Type: TypeRoCEv2, Family: IPv6, Netdev: "ens1f0np0.100"}, 9}, // only link-local there
		{Criteria{}, 2},
	}
	for _, tt := range tests {
		got, err := Select(table, tt.c)
		if err != nil || got.Index != tt.index {
			t.Errorf("Select(%s) = %v, %v; want index %d", tt.c, got, err, tt.index)
		}
	}

	ib, err := ReadTable(mustFS(t, hcaRoot), "mlx5_2", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Select(ib, Criteria{Type: TypeIB}); err != nil || got.Index != 0 {
		t.Errorf("Select(IB) = %v, %v; want index 0", got, err)
	}
	if _, err := Select(ib, Criteria{Family: IPv6}); err == nil {
		t.Error("Select(IPv6) on an IB table succeeded, want an error: IB GIDs are not addresses")
	}
}

func TestSelectNoMatch(t *testing.T) {
	table, err := ReadTable(mustFS(t, rxeRoot), "rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Select(table, Criteria{Type: TypeRoCEv1, Family: IPv4, Netdev: "veth0"})
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("Select = %v, want a *NoMatchError", err)
	}
	want := "no RoCE v1 IPv4 GID on netdev veth0; the table has: " +
		"0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0, 1 ::ffff:10.9.0.1 RoCE v2 veth0, 2 fd00:9::1 RoCE v2 veth0"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	_, err = Select(nil, Criteria{Type: TypeRoCEv2})
	if err == nil || err.Error() != "no RoCE v2 GID: the GID table is empty" {
		t.Errorf("Select(empty) = %v", err)
	}
}

func TestFilter(t *testing.T) {
	table, err := ReadTable(mustFS(t, hcaRoot), "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	var indexes []int
	for _, e := range Filter(table, Criteria{Type: TypeRoCEv2, Netdev: "ens1f0np0"}) {
		indexes = append(indexes, e.Index)
	}
	if want := []int{1, 3, 7}; !cmp.Equal(indexes, want) {
		t.Errorf("Filter(v2 on ens1f0np0) = %v, want %v", indexes, want)
	}
	if got := Filter(table, Criteria{Netdev: "eth9"}); len(got) != 0 {
		t.Errorf("Filter(eth9) = %v, want none", got)
	}
}

func Example() {
	fsys, err := sysfs.NewFS("../sysfs/testdata/hca")
	if err != nil {
		panic(err)
	}
	table, err := ReadTable(fsys, "mlx5_0", 1)
	if err != nil {
		panic(err)
	}
	e, err := Select(table, Criteria{Type: TypeRoCEv2, Family: IPv4, Netdev: "ens1f0np0"})
	if err != nil {
		panic(err)
	}
	fmt.Println("NCCL_IB_GID_INDEX =", e.Index, "for", e.GID)
	// Output: NCCL_IB_GID_INDEX = 3 for ::ffff:192.168.10.1
}

func ExampleParse() {
	g, _ := Parse("0000:0000:0000:0000:0000:ffff:0a09:0001")
	ipv4, _ := g.IPv4()
	fmt.Println(g, ipv4, g.SysfsString())
	// Output: ::ffff:10.9.0.1 10.9.0.1 0000:0000:0000:0000:0000:ffff:0a09:0001
}

// writeBigDevice writes a device with ports ports of slots GID slots each,
// a quarter of them populated, as real files under root.
func writeBigDevice(tb testing.TB, root string, ports, slots int) {
	tb.Helper()
	dev := filepath.Join(root, "sys/devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0")
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for p := 1; p <= ports; p++ {
		dir := filepath.Join(dev, "ports", strconv.Itoa(p))
		write(filepath.Join(dir, "link_layer"), "Ethernet")
		for i := range slots {
			index := strconv.Itoa(i)
			if i%4 != 0 {
				write(filepath.Join(dir, "gids", index), sysfs.ZeroGID)
				continue
			}
			write(filepath.Join(dir, "gids", index), fmt.Sprintf("0000:0000:0000:0000:0000:ffff:0a%02x:%04x", p, i))
			write(filepath.Join(dir, "gid_attrs/types", index), "RoCE v2")
			write(filepath.Join(dir, "gid_attrs/ndevs", index), "eth"+strconv.Itoa(p))
		}
	}
	link := filepath.Join(root, "sys/class/infiniband/mlx5_0")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink("../../devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0", link); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkReadTables reads the GID tables of a 4-port device with 256 GID
// slots per port (64 populated), the size of a ConnectX RoCE table.
func BenchmarkReadTables(b *testing.B) {
	root := b.TempDir()
	writeBigDevice(b, root, 4, 256)
	fsys := mustFS(b, root)
	b.ReportAllocs()
	for b.Loop() {
		tables, err := ReadTables(fsys, "mlx5_0", 0)
		if err != nil || len(tables) != 4 || len(tables[3].Entries) != 64 {
			b.Fatalf("ReadTables = %v, %v", tables, err)
		}
	}
}

func TestBigDevice(t *testing.T) {
	root := t.TempDir()
	writeBigDevice(t, root, 4, 256)
	tables, err := ReadTables(mustFS(t, root), "mlx5_0", 0)
	if err != nil || len(tables) != 4 {
		t.Fatalf("ReadTables = %d tables, %v; want 4", len(tables), err)
	}
	last := tables[3].Entries[len(tables[3].Entries)-1]
	if last.Port != 4 || last.Index != 252 || last.Netdev != "eth4" || !strings.HasSuffix(last.GID.String(), "10.4.0.252") {
		t.Errorf("last entry = %v", last)
	}
}

// BenchmarkReadTablesLive reads every GID table of the running kernel
// (rxe: 1024 slots per port); skipped where there is no RDMA device.
func BenchmarkReadTablesLive(b *testing.B) {
	fsys := mustFS(b, "/")
	if names, _ := fsys.DeviceNames(); len(names) == 0 {
		b.Skip("no RDMA device on this machine")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadTables(fsys, "", 0); err != nil {
			b.Fatal(err)
		}
	}
}
