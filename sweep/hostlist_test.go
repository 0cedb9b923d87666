package sweep

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
)

// Examples from Slurm's documentation (the hostlist functions' man page,
// Slurm::Hostlist, srun/sbatch node lists) and the cases its parser
// handles: zero padding, several bracket groups, text after the last.
func TestExpandHostlist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"linux[1-3,6]", "linux1 linux2 linux3 linux6"},
		{"node1,node[2-5,12]", "node1 node2 node3 node4 node5 node12"},
		{"node21,node[27-34]", "node21 node27 node28 node29 node30 node31 node32 node33 node34"},
		{"tux[0-5,12,20-25]", "tux0 tux1 tux2 tux3 tux4 tux5 tux12 tux20 tux21 tux22 tux23 tux24 tux25"},
		{"node[01-04,07],gpu-[1-3]", "node01 node02 node03 node04 node07 gpu-1 gpu-2 gpu-3"},
		{"lx[08-11]", "lx08 lx09 lx10 lx11"},
		{"lx[8-11]", "lx8 lx9 lx10 lx11"},
		{"n[001-3]", "n001 n002 n003"},
		{"n[98-101]", "n98 n99 n100 n101"},
		{"n[09-10]", "n09 n10"},
		{"rack[1-2]-node[01-02]", "rack1-node01 rack1-node02 rack2-node01 rack2-node02"},
		{"a[1-2]b[3,5]c", "a1b3c a1b5c a2b3c a2b5c"},
		{"gpu[1-2]-ib", "gpu1-ib gpu2-ib"},
		{"grdma-sweep-[0-3].grdma-sweep", "grdma-sweep-0.grdma-sweep grdma-sweep-1.grdma-sweep grdma-sweep-2.grdma-sweep grdma-sweep-3.grdma-sweep"},
		{"node5", "node5"},
		{"a b\tc,d", "a b c d"},
		{"x[3]", "x3"},
		{"", ""},
		{",,", ""},
	} {
		got, err := ExpandHostlist(tc.in)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", tc.in, strings.Join(got, " "), err, tc.want)
		}
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"node[1-3", "'[' without ']'"},
		{"node1-3]", "']' without '['"},
		{"node[1-[2]]", "do not nest"},
		{"node[]", "empty brackets"},
		{"node[5-1]", "goes down"},
		{"node[a-b]", "decimal numbers"},
		{"node[-1]", "decimal numbers"},
		{"node[1--2]", "decimal numbers"},
		{"node[1-2-3]", "decimal numbers"},
		{"bgl[123x456]", "3-D box"},
		{"node[0-70000]", "more than 65536"},
		{"a[0-300]b[0-300]", "more than 65536"},
		{"node[1, 2]", "space inside brackets"},
		{"n[99999999999999999999]", "out of range"},
	} {
		_, err := ExpandHostlist(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ExpandHostlist(%q): %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
}

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Host
	}{
		{"node01", Host{Name: "node01"}},
		{"node01.cluster.example", Host{Name: "node01.cluster.example"}},
		{"10.0.0.1", Host{Name: "10.0.0.1"}},
		{"10.0.0.1:18600", Host{Name: "10.0.0.1", Port: 18600}},
		{"rack_1-n2:7", Host{Name: "rack_1-n2", Port: 7}},
		{"fe80::1", Host{Name: "fe80::1"}},
		{"[fe80::1]", Host{Name: "fe80::1"}},
		{"[fe80::1%eth0]:18600", Host{Name: "fe80::1%eth0", Port: 18600}},
	} {
		got, err := ParseHost(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseHost(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParseHost(got.String()); err != nil || back != got {
			t.Errorf("%q: String %q does not parse back: %+v %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "node:0", "node:70000", "node:x", "-node", "node-", "no de", "a..b",
		"[node]", "[fe80::1", "fe80::zz", "n\x1b[31m", strings.Repeat("a", 64), strings.Repeat("a.", 130)} {
		if h, err := ParseHost(bad); err == nil {
			t.Errorf("ParseHost(%q) = %+v, want an error", bad, h)
		}
	}
	if a := (Host{Name: "fe80::1"}).Addr(18516); a != "[fe80::1]:18516" {
		t.Errorf("Addr = %q", a)
	}
	if a := (Host{Name: "n1", Port: 7}).Addr(18516); a != "n1:7" {
		t.Errorf("Addr = %q", a)
	}
}

func TestReadHosts(t *testing.T) {
	in := `# the fleet
node[01-03]   # rack 1
node04, node05
10.0.0.9:18600 [fe80::1]:18600

`
	hosts, err := ReadHosts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hosts {
		got = append(got, h.String())
	}
	want := []string{"node01", "node02", "node03", "node04", "node05", "10.0.0.9:18600", "[fe80::1]:18600"}
	if !slices.Equal(got, want) {
		t.Errorf("ReadHosts = %q, want %q", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{"node1\nnode2\nnode1\n", "node1 is listed twice (positions 0 and 2)"},
		{"node[1-3] node2", "node2 is listed twice"},
		{"NODE1 node1", "listed twice"},
		{"a:1 a:1", "listed twice"},
		{"node[1-3\n", "line 1"},
		{"node1", "needs at least two"},
		{"# nothing\n", "needs at least two"},
		{"node1 node_$x", "not allowed"},
	} {
		_, err := ReadHosts(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadHosts(%q): %v, want %q", tc.in, err, tc.want)
		}
	}
	// The same name on two ports is two nodes (several per host).
	if hs, err := ReadHosts(strings.NewReader("a:1 a:2")); err != nil || len(hs) != 2 {
		t.Errorf("two ports of one host: %v %v", hs, err)
	}
}

func TestRank(t *testing.T) {
	hosts, _ := Hosts([]string{"node[01-04]"})
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	self := Self{Names: []string{"node03.cluster.example"}, Addrs: []net.IP{net.ParseIP("10.0.0.3")}}
	for _, tc := range []struct {
		name     string
		explicit int
		env      map[string]string
		self     Self
		want     int
		from     string
		err      string
	}{
		{"explicit", 1, nil, self, 1, "rank", ""},
		{"explicit outside", 4, nil, self, 0, "", "rank is 4, outside the host list (4 hosts: ranks 0 to 3)"},
		{"srun", -1, map[string]string{"SLURM_PROCID": "2", "JOB_COMPLETION_INDEX": "0"}, self, 2, "SLURM_PROCID", ""},
		{"indexed job", -1, map[string]string{"JOB_COMPLETION_INDEX": "0"}, Self{}, 0, "JOB_COMPLETION_INDEX", ""},
		{"mpirun", -1, map[string]string{"OMPI_COMM_WORLD_RANK": "3"}, Self{}, 3, "OMPI_COMM_WORLD_RANK", ""},
		{"pmix", -1, map[string]string{"PMIX_RANK": "1"}, Self{}, 1, "PMIX_RANK", ""},
		{"srun outside", -1, map[string]string{"SLURM_PROCID": "7"}, self, 0, "", "SLURM_PROCID is 7, outside"},
		{"not a number", -1, map[string]string{"SLURM_PROCID": "x"}, self, 0, "", `SLURM_PROCID="x" is not a rank`},
		{"srun and list disagree", -1, map[string]string{"SLURM_PROCID": "0"}, self, 0, "", "this host is node03, rank 2"},
		{"position by short name", -1, nil, self, 2, "host list", ""},
		{"position by address", -1, nil, Self{Names: []string{"other"}, Addrs: []net.IP{net.ParseIP("10.0.0.4")}}, 3, "host list", ""},
		{"not in the list", -1, nil, Self{Names: []string{"elsewhere"}}, 0, "", "not in the host list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := [][]net.IP{{net.ParseIP("10.0.0.1")}, {net.ParseIP("10.0.0.2")}, {net.ParseIP("10.0.0.3")}, {net.ParseIP("10.0.0.4")}}
			got, from, err := Rank(hosts, tc.explicit, env(tc.env), tc.self, addrs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Rank = %d, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || from != tc.from {
				t.Fatalf("Rank = %d from %q, %v; want %d from %q", got, from, err, tc.want, tc.from)
			}
		})
	}
	// Two entries of this host (two ports): ambiguous.
	two, _ := Hosts([]string{"10.0.0.1:1", "10.0.0.1:2"})
	_, _, err := Rank(two, -1, env(nil), Self{Addrs: []net.IP{net.ParseIP("10.0.0.1")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "give rank N") {
		t.Errorf("two entries of this host: %v", err)
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[01-04,07],gpu-[1-3]", "a[1-2]b[3-4]c", "x[", "[]", "a[0-9]b[0-9]c[0-9]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(hosts) > MaxHosts {
			t.Fatalf("%q: %d hosts", s, len(hosts))
		}
		for _, h := range hosts {
			if strings.ContainsAny(h, "[], \t") {
				t.Fatalf("%q expanded to %q", s, h)
			}
		}
	})
}

func ExampleExpandHostlist() {
	hosts, _ := ExpandHostlist("node[01-03,07],gpu-[1-2]-ib")
	fmt.Println(strings.Join(hosts, " "))
	// Output: node01 node02 node03 node07 gpu-1-ib gpu-2-ib
}
