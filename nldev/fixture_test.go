package nldev_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"golang.org/x/sys/unix"
)

var kernels = []string{"6.1", "6.12"}

func recorded(kernel string) string { return filepath.Join("..", "testdata", "nldev", kernel) }

// rdmaJSON reads what iproute2 rdma printed for the recorded state.
func rdmaJSON(t *testing.T, kernel, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recorded(kernel), "rdma", name))
	if err != nil {
		t.Fatal(err)
	}
	var v []map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func client(t *testing.T, k *nlfixture.Kernel) *nldev.Client {
	c := nldev.NewClient(k.Conn())
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDevicesFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c := client(t, nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).Standard())
			devs, err := c.Devices()
			if err != nil {
				t.Fatal(err)
			}
			want := rdmaJSON(t, kv, "dev.json")
			if len(devs) != len(want) {
				t.Fatalf("%d devices, rdma showed %d", len(devs), len(want))
			}
			for i, d := range devs {
				w := want[i]
				if float64(d.Index) != w["ifindex"] || d.Name != w["ifname"] || d.NodeType.String() != w["node_type"] ||
					nldev.FormatGUID(d.NodeGUID) != w["node_guid"] || nldev.FormatGUID(d.SysImageGUID) != w["sys_image_guid"] {
					t.Errorf("device %d = %+v; rdma showed %v", i, d, w)
				}
				// rxe: one port, RoCE, no firmware version, DIM off.
				if d.NumPorts != 1 || d.Protocol != "roce" || d.Has(nldev.AttrFWVersion) || !d.Has(nldev.AttrDevDIM) || d.DIM != 0 {
					t.Errorf("device %s: ports %d protocol %q fw? %v dim %d", d.Name, d.NumPorts, d.Protocol, d.Has(nldev.AttrFWVersion), d.DIM)
				}
			}
			// The device reply of a doit is the same as its dump entry.
			one, err := c.Device(1)
			if err != nil {
				t.Fatal(err)
			}
			if one.Name != devs[1].Name || one.NodeGUID != devs[1].NodeGUID || one.CapFlags != devs[1].CapFlags {
				t.Errorf("doit %+v differs from dump %+v", one, devs[1])
			}
		})
	}
}

func TestPortsFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c := client(t, nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).Standard())
			want := rdmaJSON(t, kv, "link.json")
			for dev := range uint32(2) {
				ports, err := c.Ports(dev)
				if err != nil {
					t.Fatal(err)
				}
				if len(ports) != 1 {
					t.Fatalf("device %d: %d ports, want 1", dev, len(ports))
				}
				p, w := ports[0], want[dev]
				if p.Device != w["ifname"] || float64(p.Port) != w["port"] || p.State.String() != w["state"] ||
					p.PhysState.String() != w["physical_state"] || p.Netdev != w["netdev"] || float64(p.NetdevIndex) != w["netdev_index"] {
					t.Errorf("port %+v; rdma showed %v", p, w)
				}
				// RoCE ports carry no IB attributes.
				if p.Has(nldev.AttrLID) || p.Has(nldev.AttrCapFlags) || p.Has(nldev.AttrSubnetPrefix) {
					t.Errorf("RoCE port has IB attributes: %+v", p)
				}
				single, err := c.Port(dev, 1)
				if err != nil {
					t.Fatal(err)
				}
				if single.Netdev != p.Netdev || single.State != p.State {
					t.Errorf("doit %+v differs from dump %+v", single, p)
				}
			}
		})
	}
}

// TestPortsOfFromRealKernel: PortsOf asks a one-port device for port 1
// (the recorded doit reply) and gets what the dump gives.
func TestPortsOfFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			k := nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).Standard()
			c := client(t, k)
			devs, err := c.Devices()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range devs {
				dump, err := c.Ports(d.Index)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.PortsOf(d)
				if err != nil {
					t.Fatal(err)
				}
				if d.NumPorts != 1 || len(got) != 1 || !reflect.DeepEqual(got, dump) {
					t.Errorf("%s (%d ports): PortsOf %+v, dump %+v", d.Name, d.NumPorts, got, dump)
				}
			}
			// A device that vanished answers as the dump does: not found.
			k.On(nlfixture.Request{Cmd: nldev.CmdPortGet, Dev: 1, Port: 1}, "get_doit_bad_index.bin")
			if _, err := c.PortsOf(devs[1]); !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.EINVAL) {
				t.Errorf("vanished device: %v", err)
			}
		})
	}
}

func TestSystemFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c := client(t, nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).Standard())
			s, err := c.System()
			if err != nil {
				t.Fatal(err)
			}
			// rdma 6.1 printed "netns shared copy-on-fork on"; both Debian
			// kernels also carry the privileged-qkey backport (off), and
			// 6.12.117 the monitor one (on): version numbers do not tell.
			if s.NetNSMode != nldev.NetNSShared || !s.CopyOnFork || s.PrivilegedQKey || !s.Has(nldev.AttrSysPrivilegedQKeyMode) {
				t.Errorf("system %+v", s)
			}
			if got, want := s.Monitor, kv == "6.12"; got != want || s.Has(nldev.AttrSysMonitorMode) != want {
				t.Errorf("monitor = %v (present %v), want %v", got, s.Has(nldev.AttrSysMonitorMode), want)
			}
		})
	}
}

func TestEmptyKernel(t *testing.T) {
	k := nlfixture.NewKernel(filepath.Join(recorded("6.12"), "nl-empty")).Standard()
	c := client(t, k)
	devs, err := c.Devices()
	if err != nil || len(devs) != 0 {
		t.Fatalf("devices %v, error %v; want none", devs, err)
	}
	err = c.DeleteLink("rxe0")
	var nf *ib.NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "there are no RDMA devices") {
		t.Fatalf("error %v, want NotFoundError saying there are no devices", err)
	}
}

// TestRealErrorReplies decodes the kernel's actual NEWLINK error replies.
func TestRealErrorReplies(t *testing.T) {
	tests := []struct {
		file, name, typ, netdev string
		errno                   unix.Errno
		want                    string
	}{
		{"newlink_rxe9.bin", "rxe9", "rxe", "eth9", unix.ENODEV, "link add rxe9: netdev eth9 not found"},
		{"newlink_rxe0.bin", "rxe0", "rxe", "veth2", unix.ENFILE, "link add rxe0: an RDMA device named rxe0 already exists"},
		{"newlink_rxe5.bin", "rxe5", "rxe", "veth0", unix.EEXIST, "link add rxe5: netdev veth0 already has an rxe device"},
		{"newlink_rxe6.bin", "rxe6", "foo", "veth2", unix.EINVAL, "link add rxe6: link type foo is not available"},
	}
	for _, kv := range kernels {
		for _, tt := range tests {
			t.Run(kv+"/"+tt.file, func(t *testing.T) {
				k := nlfixture.NewKernel(filepath.Join(recorded(kv), "nl")).
					On(nlfixture.Request{Cmd: nldev.CmdNewLink, Dev: -1, Port: -1}, tt.file)
				err := client(t, k).AddLink(tt.name, tt.typ, tt.netdev)
				if !errors.Is(err, tt.errno) {
					t.Fatalf("error %v, want errno %v", err, tt.errno)
				}
				if !strings.HasPrefix(err.Error(), tt.want) {
					t.Fatalf("error %q, want it to start with %q", err, tt.want)
				}
			})
		}
	}
}

func TestBadIndexFromRealKernel(t *testing.T) {
	k := nlfixture.NewKernel(filepath.Join(recorded("6.12"), "nl")).
		On(nlfixture.Request{Cmd: nldev.CmdGet, Dev: 4242, Port: -1}, "get_doit_bad_index.bin")
	_, err := client(t, k).Device(4242)
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "no RDMA device has this index") {
		t.Fatalf("error %v", err)
	}
}
