package nldev_test

import (
	"encoding/json"
	"errors"
	"net/netip"
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

// The resource recordings (testdata/nldev/res) hold two rxe devices with
// live objects: on rxe0 an ibv_rc_pingpong pair and an rping pair frozen
// after traffic, and an rping listener on 0.0.0.0; on rxe1 waiting
// servers of ibv_rc_pingpong, ibv_srq_pingpong (an SRQ with QPs 18-33)
// and ibv_ud_pingpong.

func resRecorded(kernel string) string {
	return filepath.Join("..", "testdata", "nldev", "res", kernel)
}

func resClient(t *testing.T, kv string) (*nldev.Client, *nlfixture.Kernel) {
	k := nlfixture.NewKernel(filepath.Join(resRecorded(kv), "nl")).Standard().Res()
	return client(t, k), k
}

// rdmaResJSON reads a JSON output of rdma from the resource recordings.
func rdmaResJSON(t *testing.T, kv, args string) []map[string]any {
	t.Helper()
	cmds, err := os.ReadFile(filepath.Join(resRecorded(kv), "rdma", "commands.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cmds), "\n") {
		file, rest, _ := strings.Cut(line, " ")
		if _, a, _ := strings.Cut(rest, " "); a == args {
			b, err := os.ReadFile(filepath.Join(resRecorded(kv), "rdma", file+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			var v []map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("rdma %s was not recorded", args)
	return nil
}

func TestResSummaryFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c, _ := resClient(t, kv)
			sums, err := c.ResSummaries()
			if err != nil {
				t.Fatal(err)
			}
			want := rdmaResJSON(t, kv, "-j res show")
			if len(sums) != len(want) {
				t.Fatalf("%d devices, rdma showed %d", len(sums), len(want))
			}
			for i, s := range sums {
				var names []string
				for _, cnt := range s.Counts {
					names = append(names, cnt.Name)
					if float64(cnt.Curr) != want[i][cnt.Name] {
						t.Errorf("%s %s = %d, rdma showed %v", s.Device, cnt.Name, cnt.Curr, want[i][cnt.Name])
					}
				}
				if got := strings.Join(names, " "); got != "pd cq qp cm_id mr ctx srq" || s.Device != want[i]["ifname"] {
					t.Errorf("device %s counts %s", s.Device, got)
				}
				// The doit (rdma's way) says the same; rxe has no
				// driver-internal objects to add with -dd.
				for _, dd := range []bool{false, true} {
					one, err := c.ResSummary(s.DevIndex, dd)
					if err != nil || !reflect.DeepEqual(one, s) {
						t.Errorf("doit (dd %v) %+v, %v; dump %+v", dd, one, err, s)
					}
				}
			}
		})
	}
}

// dumpAll collects the objects of one type on one device; copy makes a
// snapshot of the reused object.
func dumpAll[T any](t *testing.T, c *nldev.Client, q nldev.ResQuery, obj *T, copyOf func(*T) T) []T {
	t.Helper()
	var out []T
	err := c.ResDump(q, any(obj).(nldev.ResObject), func() error {
		out = append(out, copyOf(obj))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func plain[T any](p *T) T { return *p }

// TestResDumpsFromRealKernel decodes every object of the recordings and
// checks what each kind of object carries (and lacks).
func TestResDumpsFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c, _ := resClient(t, kv)
			sums, err := c.ResSummaries()
			if err != nil {
				t.Fatal(err)
			}
			count := func(dev uint32, name string) int {
				for _, cnt := range sums[dev].Counts {
					if cnt.Name == name {
						return int(cnt.Curr)
					}
				}
				return -1
			}
			var qps []nldev.QP
			var cms []nldev.CMID
			var cqs []nldev.CQ
			var srqs []nldev.SRQ
			for dev := range uint32(2) {
				q := nldev.ResQuery{DevIndex: dev}
				devQPs := dumpAll(t, c, q, new(nldev.QP), plain)
				devCMs := dumpAll(t, c, q, new(nldev.CMID), plain)
				devCQs := dumpAll(t, c, q, new(nldev.CQ), plain)
				devSRQs := dumpAll(t, c, q, new(nldev.SRQ), func(s *nldev.SRQ) nldev.SRQ {
					cp := *s
					cp.QPs = append([]nldev.QPRange(nil), s.QPs...)
					return cp
				})
				for name, n := range map[string]int{
					"qp": len(devQPs), "cm_id": len(devCMs), "cq": len(devCQs), "srq": len(devSRQs),
					"mr":  len(dumpAll(t, c, q, new(nldev.MR), plain)),
					"pd":  len(dumpAll(t, c, q, new(nldev.PD), plain)),
					"ctx": len(dumpAll(t, c, q, new(nldev.Ctx), plain)),
				} {
					if n != count(dev, name) {
						t.Errorf("device %d: %d %s objects listed, %d counted", dev, n, name, count(dev, name))
					}
				}
				qps, cms, cqs, srqs = append(qps, devQPs...), append(cms, devCMs...), append(cqs, devCQs...), append(srqs, devSRQs...)
			}

			for _, q := range qps {
				if !q.Has(nldev.AttrPortIndex) || q.Port != 1 || q.Device != []string{"rxe0", "rxe1"}[q.DevIndex] {
					t.Errorf("QP %d: port %d (present %v) on %s/%d", q.LQPN, q.Port, q.Has(nldev.AttrPortIndex), q.Device, q.DevIndex)
				}
				rcLike := q.Type == ib.QPTypeRC
				switch {
				case q.Type == ib.QPTypeGSI:
					if !q.IsKernel() || q.KernName != "ib_core" || q.LQPN != 1 || q.Has(nldev.AttrResPDN) || q.Has(nldev.AttrResRQPN) || q.Has(nldev.AttrResPathMigState) {
						t.Errorf("GSI QP %+v", q)
					}
				case q.IsKernel() || !q.Has(nldev.AttrResPID) || !q.Has(nldev.AttrResPDN):
					t.Errorf("user QP without owner or PD: %+v", q)
				}
				if q.Has(nldev.AttrResRQPN) != rcLike || q.Has(nldev.AttrResRQPSN) != rcLike || q.Has(nldev.AttrResPathMigState) != rcLike {
					t.Errorf("%s QP %d: rqpn/rq-psn/path-mig-state presence %v %v %v", q.Type, q.LQPN,
						q.Has(nldev.AttrResRQPN), q.Has(nldev.AttrResRQPSN), q.Has(nldev.AttrResPathMigState))
				}
			}
			// rxe0: two pingpong and two rping QPs, GSI; rxe1: pingpong,
			// 16 SRQ pingpong QPs, UD pingpong, GSI. The GSI QP comes
			// last: the kernel numbers it 1 | port<<24.
			if want := strings.Repeat("RC ", 4) + "GSI " + strings.Repeat("RC ", 17) + "UD GSI"; typesOf(qps) != want {
				t.Errorf("QP types in kernel order: %s, want %s", typesOf(qps), want)
			}

			var listeners, connected int
			for _, cm := range cms {
				switch cm.State {
				case nldev.CMStateListen:
					listeners++
					wildcard := cm.SrcAddr == netip.MustParseAddrPort("0.0.0.0:7175")
					if wildcard == cm.Has(nldev.AttrPortIndex) || cm.Has(nldev.AttrResLQPN) || cm.PS != nldev.PSTCP {
						t.Errorf("listener %+v: a wildcard one is bound to no port, one on 192.168.77.1 to port 1", cm)
					}
				case nldev.CMStateConnect:
					connected++
					if !cm.Has(nldev.AttrResLQPN) || cm.QPType != ib.QPTypeRC || cm.SrcAddr.Addr() != netip.MustParseAddr("192.168.77.1") ||
						cm.DstAddr.Addr() != cm.SrcAddr.Addr() || cm.SrcFamily != unix.AF_INET || cm.Port != 1 {
						t.Errorf("connected CM ID %+v", cm)
					}
				default:
					t.Errorf("CM ID in state %s", cm.State)
				}
			}
			if listeners != 3 || connected != 2 {
				t.Errorf("%d listening and %d connected CM IDs, want 3 and 2", listeners, connected)
			}

			for _, cq := range cqs {
				if cq.IsKernel() {
					// rdma prints this one as WORKQUEUE: its names predate 5.8.
					if cq.PollCtx != nldev.PollUnboundWorkqueue || cq.PollCtx.String() != "UNBOUND_WORKQUEUE" || cq.Has(nldev.AttrResCtxN) {
						t.Errorf("kernel CQ %+v", cq)
					}
				} else if cq.Has(nldev.AttrResPollCtx) || !cq.Has(nldev.AttrResCtxN) || !cq.Has(nldev.AttrDevDIM) {
					t.Errorf("user CQ %+v", cq)
				}
			}

			// The SRQ's QP table is a nest with NLA_F_NESTED set: the
			// flag must be masked off to find it.
			if len(srqs) != 1 {
				t.Fatalf("%d SRQs, want 1", len(srqs))
			}
			s := srqs[0]
			if s.Device != "rxe1" || s.Type != nldev.SRQTypeBasic || !reflect.DeepEqual(s.QPs, []nldev.QPRange{{First: 18, Last: 33}}) ||
				!s.Has(nldev.AttrResQP) || s.Has(nldev.AttrResCQN) || !s.Has(nldev.AttrResPID) {
				t.Errorf("SRQ %+v", s)
			}
		})
	}
}

func typesOf(qps []nldev.QP) string {
	var s []string
	for _, q := range qps {
		s = append(s, q.Type.String())
	}
	return strings.Join(s, " ")
}

// TestResGetFromRealKernel: a lookup by number returns what the dump
// lists; a missing object is ENOENT.
func TestResGetFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c, _ := resClient(t, kv)
			var cq nldev.CQ
			if err := c.ResGet(nldev.ResQuery{DevIndex: 0}, 0, &cq); err != nil {
				t.Fatal(err)
			}
			if dumped := dumpAll(t, c, nldev.ResQuery{DevIndex: 0}, new(nldev.CQ), plain)[0]; !reflect.DeepEqual(cq, dumped) {
				t.Errorf("lookup %+v, dump %+v", cq, dumped)
			}
			var qp nldev.QP
			if err := c.ResGet(nldev.ResQuery{DevIndex: 0, Port: 1}, 17, &qp); err != nil {
				t.Fatal(err)
			}
			if dumped := dumpAll(t, c, nldev.ResQuery{DevIndex: 0}, new(nldev.QP), plain)[0]; !reflect.DeepEqual(qp, dumped) {
				t.Errorf("lookup %+v, dump %+v", qp, dumped)
			}
			// The kernel numbers the GSI QP 1 | port<<24, not 1.
			if err := c.ResGet(nldev.ResQuery{DevIndex: 0, Port: 1}, 1, &qp); !errors.Is(err, unix.ENOENT) {
				t.Errorf("GSI QP by its QPN: %v, want ENOENT", err)
			}
			for _, obj := range []nldev.ResObject{new(nldev.CQ), new(nldev.MR), new(nldev.PD), new(nldev.Ctx), new(nldev.SRQ)} {
				err := c.ResGet(nldev.ResQuery{DevIndex: 1}, nlfixture.ResMissingID, obj)
				if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "no such "+obj.ResType().String()+" object") {
					t.Errorf("missing %s: %v", obj.ResType(), err)
				}
			}
			var ia *nldev.InvalidArgumentError
			if err := c.ResGet(nldev.ResQuery{DevIndex: 0}, 17, &qp); !errors.As(err, &ia) {
				t.Errorf("QP lookup without a port: %v", err)
			}
		})
	}
}

// TestResRawFromRealKernel: rxe has no raw form of its objects; the kernel
// says EINVAL, which grdma explains (rxe1 has objects of every kind).
func TestResRawFromRealKernel(t *testing.T) {
	for _, kv := range kernels {
		c, _ := resClient(t, kv)
		for _, typ := range []nldev.ResType{nldev.ResQP, nldev.ResCQ, nldev.ResMR, nldev.ResSRQ} {
			err := c.ResDumpRaw(typ, nldev.ResQuery{DevIndex: 1}, func(*nldev.RawEntry) error { return nil })
			if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "list raw "+typ.String()+" data of RDMA device 1: its driver has no raw form") {
				t.Errorf("%s raw %s: %v", kv, typ, err)
			}
		}
		var ia *nldev.InvalidArgumentError
		if err := c.ResDumpRaw(nldev.ResPD, nldev.ResQuery{}, nil); !errors.As(err, &ia) {
			t.Errorf("raw PDs: %v", err)
		}
	}
}

// TestResDumpPortOrder: rdma lists the CM IDs bound to no port before
// those of port 1. The kernel's order differs; grdma reorders one dump,
// or, past its memory bound, asks port by port.
func TestResDumpPortOrder(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			c, k := resClient(t, kv)
			q := nldev.ResQuery{DevIndex: 0}
			ids := func(cms []nldev.CMID) (s []uint32) {
				for _, cm := range cms {
					s = append(s, cm.ID)
				}
				return s
			}
			kernelOrder := dumpAll(t, c, q, new(nldev.CMID), plain)
			var portless, bound []uint32
			for _, cm := range kernelOrder {
				if cm.Has(nldev.AttrPortIndex) {
					bound = append(bound, cm.ID)
				} else {
					portless = append(portless, cm.ID)
				}
			}
			want := append(portless, bound...)
			if reflect.DeepEqual(ids(kernelOrder), want) {
				t.Fatalf("the recording does not exercise reordering: %v", ids(kernelOrder))
			}
			for _, limit := range []int{1 << 20, 0} {
				restore := nldev.SetReorderLimit(limit)
				k.Seen = nil
				var got []uint32
				var cm nldev.CMID
				if err := c.ResDumpPortOrder(q, &cm, func() error { got = append(got, cm.ID); return nil }); err != nil {
					t.Fatal(err)
				}
				restore()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("limit %d: order %v, want %v (kernel's %v)", limit, got, want, ids(kernelOrder))
				}
				var ports []int64
				for _, r := range k.Seen {
					ports = append(ports, r.Port)
				}
				if wantPorts := map[int][]int64{1 << 20: {-1}, 0: {-1, 1}}[limit]; !reflect.DeepEqual(ports, wantPorts) {
					t.Errorf("limit %d: dumps of ports %v, want %v", limit, ports, wantPorts)
				}
			}
		})
	}
}
