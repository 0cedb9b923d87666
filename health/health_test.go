package health

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/ports"
)

// edrPort is a healthy 4X EDR RoCE port.
func edrPort() ports.Port {
	return ports.Port{Device: "mlx5_0", Port: 1, State: ib.PortActive, PhysState: ib.PhysLinkUp,
		LinkLayer: ib.LinkLayerEthernet, RateDeciGbps: 1000, ActiveMTU: ib.MTU4096, MTUSource: ports.MTUFromVerbs,
		Netdev: "eth2", NetdevMTU: 9000}
}

func TestCheckPorts(t *testing.T) {
	v2, _ := gid.ParseType("v2")
	v2GID := []gid.Entry{{Port: 1, Index: 3, Type: v2, Netdev: "eth2"}}
	down := edrPort()
	down.State, down.PhysState = ib.PortDown, ib.PhysDisabled
	tests := []struct {
		name   string
		port   ports.Port
		gids   []gid.Entry
		exp    Expect
		status Status
		msg    string
	}{
		{"healthy", edrPort(), v2GID, Expect{MinRateGbps: 100, ActiveMTU: 4096, GIDType: v2, NetdevMTU: 9000}, Pass, "ACTIVE LINK_UP, 100 Gb/s, MTU 4096 on eth2"},
		{"down", down, nil, Expect{}, Fail, "state DOWN, expected ACTIVE; physical state DISABLED, expected LINK_UP"},
		{"down expected", down, nil, Expect{State: ib.PortDown}, Pass, "DOWN DISABLED"},
		{"slow", edrPort(), nil, Expect{MinRateGbps: 200}, Fail, "rate 100 Gb/s, expected at least 200"},
		{"mtu", edrPort(), nil, Expect{ActiveMTU: 1024}, Fail, "active MTU 4096, expected 1024"},
		{"netdev mtu", edrPort(), nil, Expect{NetdevMTU: 1500}, Fail, "netdev eth2 MTU 9000, expected 1500"},
		{"no v2 gid", edrPort(), nil, Expect{GIDType: v2}, Fail, "no RoCE v2 GID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PortResults([]node.Port{{Port: tt.port, GIDs: tt.gids}}, tt.exp)
			if len(res) != 1 || res[0].Status != tt.status || !strings.Contains(res[0].Message, tt.msg) || res[0].Subject != "mlx5_0/1" {
				t.Fatalf("got %+v, want %s with %q", res, tt.status, tt.msg)
			}
		})
	}
	if res := PortResults(nil, Expect{}); len(res) != 1 || res[0].Status != Fail || res[0].Message != "no RDMA ports" {
		t.Fatalf("no ports: %+v", res)
	}
}

func TestCheckDevices(t *testing.T) {
	in := []node.Device{
		{Name: "rxe0", Verbs: "/dev/infiniband/uverbs0"},
		{Name: "rxe1", Verbs: "/dev/infiniband/uverbs1", VerbsErr: errors.New("permission denied")},
		{Name: "rxe2"},
	}
	res := DeviceResults(in, Expect{DeviceCount: 4, DeviceNames: []string{"rxe0", "mlx5_0"}})
	want := []struct {
		status          Status
		subject, msgHas string
	}{
		{Fail, "node", "3 RDMA devices (rxe0, rxe1, rxe2), expected 4"},
		{Fail, "mlx5_0", "expected RDMA device mlx5_0 not found"},
		{Pass, "rxe0", "present and accessible"},
		{Fail, "rxe1", "/dev/infiniband/uverbs1 not accessible: permission denied"},
		{Fail, "rxe2", "no uverbs device (load ib_uverbs)"},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results: %+v", len(res), res)
	}
	for i, w := range want {
		if res[i].Status != w.status || res[i].Subject != w.subject || !strings.Contains(res[i].Message, w.msgHas) {
			t.Errorf("result %d = %+v, want %v", i, res[i], w)
		}
	}
	if r := DeviceResults(nil, Expect{}); len(r) != 1 || r[0].Message != "no RDMA devices" {
		t.Errorf("no devices: %+v", r)
	}
}

// TestCheckGDR maps the verdicts of the gpudirect fixtures to statuses.
func TestCheckGDR(t *testing.T) {
	unlimited := gpudirect.MemlockUnlimited
	tests := []struct {
		fixture string
		status  Status
		msg     string
	}{
		{"peermem-proprietary", Pass, "GPUDirect RDMA via peer_mem"},
		{"mofed-peermem", Pass, "via peer_mem"},
		{"open-dmabuf", Warn, "GPUDirect RDMA via dma-buf; memory:"}, // its IOMMU and memlock warn
		{"no-gpu", Warn, "no NVIDIA driver loaded, GPUDirect RDMA does not apply (kernel: dma-buf import yes, PeerDirect no)"},
		{"old-kernel", Fail, "no GPUDirect RDMA"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			rep := gpudirect.Check(os.DirFS(filepath.Join("..", "gpudirect", "testdata", tt.fixture)), gpudirect.Options{MemlockLimit: &unlimited})
			r := CheckGDR(rep)
			if r.Status != tt.status || !strings.Contains(r.Message, tt.msg) || r.Detail.(*GDRDetail).PeerMem == nil || r.Detail.(*GDRDetail).DMABuf == nil {
				t.Fatalf("got %s %q, want %s with %q", r.Status, r.Message, tt.status, tt.msg)
			}
		})
	}
}

func TestNewSummary(t *testing.T) {
	if r := NewSummary([]Result{{Status: Pass}, {Status: Warn}}); !r.OK {
		t.Error("warnings failed the node")
	}
	if r := NewSummary([]Result{{Status: Pass}, {Status: Fail}}); r.OK {
		t.Error("a failure passed the node")
	}
	if r := NewSummary(nil); !r.OK || r.Checks == nil {
		t.Errorf("empty: %+v (checks must be [] in JSON, not null)", r)
	}
}

// TestNodeCheck: a node whose listing failed fails both checks as a whole;
// a device whose ports could not be read fails the ports check by name
// while the other ports are checked.
func TestNodeChecks(t *testing.T) {
	failed := &node.Snapshot{DevicesErr: errors.New("netlink: permission denied"), PortsErr: errors.New("netlink: permission denied")}
	res := append(CheckDevices(failed, Expect{}), CheckPorts(failed, Expect{})...)
	if len(res) != 2 || res[0].Name != "devices" || res[1].Name != "ports" || res[0].Status != Fail || res[1].Message != "netlink: permission denied" {
		t.Fatalf("listing failed: %+v", res)
	}
	partial := &node.Snapshot{
		Ports:  []node.Port{{Port: edrPort()}},
		Errors: []node.ReadError{{Device: "mlx5_1", What: "ports", Err: errors.New("read rate: is a directory")}},
	}
	res = CheckPorts(partial, Expect{})
	if len(res) != 2 || res[0].Status != Pass || res[1].Status != Fail || res[1].Subject != "mlx5_1" ||
		res[1].Message != "mlx5_1: ports: read rate: is a directory" {
		t.Fatalf("one device unreadable: %+v", res)
	}
	only := &node.Snapshot{Errors: partial.Errors}
	if res = CheckPorts(only, Expect{}); len(res) != 1 || res[0].Subject != "mlx5_1" {
		t.Fatalf("no readable port: %+v (want only the read error, not also 'no RDMA ports')", res)
	}
}

// TestResultJSON: a result's Detail joins its keys, after the result's
// own (the JSON grdma check -j printed before Detail existed).
func TestResultJSON(t *testing.T) {
	yes := true
	r := Result{Name: "gdr", Status: Pass, Subject: "node", Message: "m", Facts: []Fact{{"a", "b"}},
		Detail: &GDRDetail{PeerMem: &gpudirect.Verdict{Supported: &yes, Reason: "r"}, DMABuf: &gpudirect.Verdict{Reason: "s"}}}
	b, err := json.Marshal(r)
	want := `{"name":"gdr","status":"PASS","subject":"node","message":"m","signals":[{"name":"a","value":"b"}],` +
		`"peer_mem":{"supported":true,"reason":"r","kernel_support":null,"signals":null},"dmabuf":{"supported":null,"reason":"s","kernel_support":null,"signals":null}}`
	if err != nil || string(b) != want {
		t.Errorf("%s %v\nwant %s", b, err, want)
	}
	r.Detail = nil
	if b, _ := json.Marshal(r); !strings.HasSuffix(string(b), `"signals":[{"name":"a","value":"b"}]}`) {
		t.Errorf("no detail: %s", b)
	}
	r.Detail = []int{1}
	if _, err := json.Marshal(r); err == nil {
		t.Error("a detail that is no object was encoded")
	}
}
