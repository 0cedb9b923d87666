package nldev

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"

	"github.com/grdma/grdma/ib"
)

// rxe reports no driver attributes and has no raw form, so these tests
// lay out what drivers that do (mlx5, hns, erdma) send, the way the
// kernel's rdma_nl_put_driver_*() and nla_put(RES_RAW) write it.

func u64b(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

// driverTuples is a DRIVER nest: flat {key, [print type], value} tuples.
func driverTuples() []byte {
	var b []byte
	b = append(b, nla(AttrDriverString, strz("sq_wqe_cnt"))...)
	b = append(b, nla(AttrDriverU32, u32b(64))...)
	b = append(b, nla(AttrDriverString, strz("qp_flags"))...)
	b = append(b, nla(AttrDriverPrintType, []byte{1})...)
	b = append(b, nla(AttrDriverU32, u32b(0xdeadbeef))...)
	b = append(b, nla(AttrDriverString, strz("delta"))...)
	b = append(b, nla(AttrDriverS32, u32b(uint32(0xfffffffe)))...) // -2
	b = append(b, nla(AttrDriverString, strz("db_addr"))...)
	b = append(b, nla(AttrDriverPrintType, []byte{1})...)
	b = append(b, nla(AttrDriverU64, u64b(0x1_0000_0000))...)
	b = append(b, nla(AttrDriverString, strz("name"))...)
	b = append(b, nla(AttrDriverString, strz("hw_qp"))...)
	// A value without a key ends the tuples, as in rdma.
	b = append(b, nla(AttrDriverU32, u32b(1))...)
	b = append(b, nla(AttrDriverString, strz("after"))...)
	b = append(b, nla(AttrDriverU32, u32b(2))...)
	return b
}

func TestDriverAttributes(t *testing.T) {
	var in interner
	got := decodeDriverAttrs(nil, driverTuples(), &in)
	want := []DriverAttr{
		{Key: "sq_wqe_cnt", Kind: AttrDriverU32, Num: 64},
		{Key: "qp_flags", Kind: AttrDriverU32, Hex: true, Num: 0xdeadbeef},
		{Key: "delta", Kind: AttrDriverS32, Num: uint64(1<<64 - 2)},
		{Key: "db_addr", Kind: AttrDriverU64, Hex: true, Num: 0x1_0000_0000},
		{Key: "name", Kind: AttrDriverString, Str: "hw_qp"},
	}
	// "after" follows a keyless value: decoding stopped before it.
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if got[2].Int() != -2 {
		t.Errorf("S32 -2 reads as %d", got[2].Int())
	}
}

// resReply is one RES_QP_GET dump message of device 3 "mlx5_0" holding
// the given entries.
func resReply(req netlink.Message, cmd Command, table Attr, entries ...[]byte) netlink.Message {
	var tb []byte
	for _, e := range entries {
		tb = append(tb, e...)
	}
	data := nla(AttrDevIndex, u32b(3))
	data = append(data, nla(AttrDevName, strz("mlx5_0"))...)
	// The kernel nests tables without NLA_F_NESTED; set it anyway, as for
	// SRQ QP lists, to check that it is masked off.
	data = append(data, nla(table|0x8000, tb)...)
	return netlink.Message{Header: netlink.Header{Type: MessageType(cmd), Flags: netlink.Multi,
		Sequence: req.Header.Sequence, PID: req.Header.PID}, Data: data}
}

func TestDriverAndUnknownAttributesInDump(t *testing.T) {
	entry := nla(AttrResQPEntry, concat(
		nla(AttrPortIndex, u32b(1)),
		nla(AttrResLQPN, u32b(465)),
		nla(AttrResType, []byte{0xff}),
		nla(AttrResSubtype, strz("REG_UMR")),
		nla(200, u32b(7)), // an attribute of a newer kernel
		nla(AttrResState, []byte{3}),
		nla(AttrResSQPSN, u32b(0)),
		nla(AttrResKernName, strz("mlx5_ib")),
		nla(AttrDriver, driverTuples()),
	))
	var reqs []netlink.Message
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		reqs = append(reqs, req...)
		return nltest.Multipart([]netlink.Message{resReply(req[0], CmdResQPGet, AttrResQP, entry, entry), {Header: req[0].Header}})
	})
	var qp QP
	n := 0
	err := c.ResDump(ResQuery{DevIndex: 3, DriverDetails: true}, &qp, func() error {
		n++
		if qp.Device != "mlx5_0" || qp.LQPN != 465 || qp.Type != ib.QPTypeDriver || qp.Subtype != "REG_UMR" ||
			qp.State != ib.QPStateRTS || qp.KernName != "mlx5_ib" || !qp.IsKernel() || len(qp.Driver) != 5 || !qp.Has(AttrDriver) {
			t.Errorf("decoded %+v", qp)
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("%d objects, %v", n, err)
	}
	// What rdma -dd sends: DRIVER_DETAILS 1, the device, a dump.
	want := concat(nla(AttrDriverDetails, []byte{1}), nla(AttrDevIndex, u32b(3)))
	if r := reqs[0]; r.Header.Type != MessageType(CmdResQPGet) || r.Header.Flags&netlink.Dump != netlink.Dump || string(r.Data) != string(want) {
		t.Errorf("request %+v % x", r.Header, r.Data)
	}
}

func TestRawDump(t *testing.T) {
	raw := []byte{0x95, 0, 0, 0, 0x1f, 0xff}
	entry := nla(AttrResCQEntry, nla(AttrResRaw, raw))
	c := fakeKernel(t, func(req []netlink.Message) ([]netlink.Message, error) {
		return nltest.Multipart([]netlink.Message{resReply(req[0], CmdResCQGetRaw, AttrResCQ, entry), {Header: req[0].Header}})
	})
	var got [][]byte
	err := c.ResDumpRaw(ResCQ, ResQuery{DevIndex: 3}, func(e *RawEntry) error {
		if e.Device != "mlx5_0" || e.DevIndex != 3 || e.Has(AttrPortIndex) {
			t.Errorf("entry %+v", e)
		}
		got = append(got, append([]byte(nil), e.Data...))
		return nil
	})
	if err != nil || len(got) != 1 || string(got[0]) != string(raw) {
		t.Fatalf("raw %v, %v", got, err)
	}
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// FuzzResDecode feeds arbitrary bytes to the resource decoders, seeded
// with the recorded dumps: none may panic.
func FuzzResDecode(f *testing.F) {
	for _, kv := range []string{"6.1", "6.12"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", "res", kv, "nl", "res_*.bin"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil && len(b) > 16 {
				f.Add(b[16:])
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in interner
		for _, obj := range []ResObject{new(QP), new(CMID), new(CQ), new(MR), new(PD), new(Ctx), new(SRQ)} {
			_ = resTable(b, obj.ResType().kind(), &in, func(dev uint32, name string, entry []byte) error {
				return decodeResEntry(obj, dev, name, entry, &in)
			})
			_ = decodeObject(obj, b, &in)
		}
		var e RawEntry
		_ = e.decode(0, "", b, &in)
		var s ResSummary
		_ = s.decode(b, &in)
	})
}
