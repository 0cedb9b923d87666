package health

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
)

// mlx5Table is a ConnectX port's GID table: each address as a RoCE v1
// and v2 pair, v1 first (libfabric #12673).
func mlx5Table() []gid.Entry {
	ll, _ := gid.Parse("fe80::ba59:9fff:fe00:1")
	v4, _ := gid.Parse("::ffff:10.0.0.1")
	return []gid.Entry{
		{Port: 1, Index: 0, GID: ll, Type: gid.TypeRoCEv1, Netdev: "eth2"},
		{Port: 1, Index: 1, GID: ll, Type: gid.TypeRoCEv2, Netdev: "eth2"},
		{Port: 1, Index: 2, GID: v4, Type: gid.TypeRoCEv1, Netdev: "eth2"},
		{Port: 1, Index: 3, GID: v4, Type: gid.TypeRoCEv2, Netdev: "eth2"},
	}
}

func cmPort(gids []gid.Entry) node.Port {
	p := edrPort()
	p.DevIndex = 3
	return node.Port{Port: p, GIDs: gids}
}

func choice(index uint8, devIndex uint32) CMChoice {
	return CMChoice{Choice: rdmacm.Choice{Addr: netip.MustParseAddr("10.0.0.1"),
		Device: rdmacm.DevicePort{Index: devIndex, NodeGUID: 1, Port: 1}, SGIDIndex: index}}
}

func TestCMResults(t *testing.T) {
	v1 := cmconfig.Defaults{Device: "mlx5_0", Port: 1, RoCEMode: gid.TypeRoCEv1}
	v2 := cmconfig.Defaults{Device: "mlx5_0", Port: 1, RoCEMode: gid.TypeRoCEv2}
	onlyV2 := []gid.Entry{mlx5Table()[1], mlx5Table()[3]}
	tests := []struct {
		name   string
		in     CMPort
		sel    gid.Criteria
		status Status
		msg    string
	}{
		{"v2 agreed", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(3, 3)}, Defaults: v2}, gid.Criteria{}, Pass,
			"the RDMA CM binds 10.0.0.1: GID index 3 (RoCE v2) to mlx5_0/1, RoCE v2 default"},
		{"gid show -q picks v1", CMPort{Port: cmPort(mlx5Table()), Choices: []CMChoice{choice(3, 3)}, Defaults: v2}, gid.Criteria{}, Warn,
			"gid show -q picks GID index 2 (RoCE v1), the RDMA CM uses RoCE v2 GIDs (index 3 for 10.0.0.1): jobs given a GID index and jobs connecting by IP speak different RoCE versions; pick the CM's: grdma gid show mlx5_0/1 type v2 -q"},
		{"gid show -q with type v2", CMPort{Port: cmPort(mlx5Table()), Choices: []CMChoice{choice(3, 3)}, Defaults: v2},
			gid.Criteria{Type: gid.TypeRoCEv2}, Pass, "GID index 3 (RoCE v2)"},
		{"v1 default", CMPort{Port: cmPort(mlx5Table()), Choices: []CMChoice{choice(2, 3)}, Defaults: v1}, gid.Criteria{}, Warn,
			"the port's default RoCE mode is v1, which cannot cross IP routers and which peers defaulting to v2 do not answer: grdma cm set mlx5_0/1 roce-mode v2"},
		{"CM disagrees with the mode", CMPort{Port: cmPort(mlx5Table()), Choices: []CMChoice{choice(2, 3)}, Defaults: v2}, gid.Criteria{}, Fail,
			"the RDMA CM uses GID index 2 (RoCE v1) for 10.0.0.1 though the port's default RoCE mode is RoCE v2"},
		{"another device", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(3, 7)}, Defaults: v2}, gid.Criteria{}, Fail,
			"the RDMA CM binds connections over 10.0.0.1 to RDMA device 7 port 1, not mlx5_0/1 (index 3)"},
		{"cannot connect", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{{Choice: rdmacm.Choice{Addr: netip.MustParseAddr("10.0.0.1")},
			Err: errors.New("resolve address 10.0.0.1:0: RDMA_CM_EVENT_ADDR_ERROR (no such device)")}}, Defaults: v2}, gid.Criteria{}, Fail,
			"the RDMA CM cannot connect over 10.0.0.1: resolve address"},
		{"mode unreadable", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(3, 3)}, DefaultsErr: errors.New("needs root")}, gid.Criteria{}, Warn,
			"cannot read the port's default RoCE mode: needs root"},
		{"rxe's CQ limit", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(3, 3)}, Defaults: v2, MaxCQE: 32767}, gid.Criteria{}, Warn,
			"mlx5_0's completion queues hold at most 32767 entries (max_cqe): libfabric's verbs;ofi_rxm asks 65536 by default ((128 + 128) × FI_UNIVERSE_SIZE 256) and fails with \"Unable to create verbs CQ\" (EINVAL): run such jobs with FI_UNIVERSE_SIZE=127 or less"},
		{"a ConnectX's CQs", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(3, 3)}, Defaults: v2, MaxCQE: 4194303}, gid.Criteria{}, Pass, "GID index 3"},
		{"unknown index", CMPort{Port: cmPort(onlyV2), Choices: []CMChoice{choice(9, 3)}, Defaults: v2}, gid.Criteria{}, Warn,
			"the RDMA CM uses GID index 9 for 10.0.0.1, which the GID table read has not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := CMResults([]CMPort{tt.in}, tt.sel)
			if len(res) != 1 || res[0].Status != tt.status || !strings.Contains(res[0].Message, tt.msg) || res[0].Subject != "mlx5_0/1" || res[0].Name != "cm" {
				t.Fatalf("got %+v\nwant %s with %q", res, tt.status, tt.msg)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	p := cmPort(mlx5Table())
	global, _ := gid.Parse("2001:db8::1")
	tentative, _ := gid.Parse("2001:db8::2")
	p.GIDs = append(p.GIDs, gid.Entry{Index: 4, GID: global, Type: gid.TypeRoCEv2},
		gid.Entry{Index: 5, GID: tentative, Type: gid.TypeRoCEv2, State: gid.AddrTentative})
	got := Addresses(p)
	if len(got) != 2 || got[0] != netip.MustParseAddr("10.0.0.1") || got[1] != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("addresses %v; want 10.0.0.1 and 2001:db8::1 (not link-local, not tentative)", got)
	}
}

// TestCheckCMSkips: ports down, InfiniBand or without addresses are not
// the CM check's, and then nothing is opened.
func TestCheckCMSkips(t *testing.T) {
	down := cmPort(mlx5Table())
	down.Port.State = ib.PortDown
	noAddr := cmPort(nil)
	s := &node.Snapshot{Ports: []node.Port{down, noAddr, {Port: ports.Port{Device: "mlx5_1", Port: 1, State: ib.PortActive, LinkLayer: ib.LinkLayerInfiniBand}}}}
	opened := false
	res := CheckCM(t.Context(), s, CMSource{Sysfs: sysfsRoot(t), OpenCM: func() (*rdmacm.Channel, error) { opened = true; return nil, errors.New("no") }})
	if len(res) != 0 || opened {
		t.Errorf("results %+v, channel opened %v; want none", res, opened)
	}
	s.Ports = append(s.Ports, cmPort(mlx5Table()))
	res = CheckCM(t.Context(), s, CMSource{Sysfs: sysfsRoot(t), OpenCM: func() (*rdmacm.Channel, error) {
		return nil, errors.New("open /dev/infiniband/rdma_cm: no such file or directory")
	}})
	if len(res) != 1 || res[0].Status != Warn || !strings.Contains(res[0].Message, "the RDMA CM is not available") {
		t.Errorf("without rdma_ucm: %+v", res)
	}
}

func sysfsRoot(t *testing.T) sysfs.FS {
	fsys, err := sysfs.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}
