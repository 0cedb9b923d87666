package uverbs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

// newObjectKernel is newFakeContext's kernel extended to the commands
// without a response (DEALLOC_PD, DEREG_MR, MODIFY_QP), which carry no
// response address.
func newObjectKernel(t *testing.T) (*Context, *fakeKernel) {
	c, k := newFakeContext(t)
	kernelOf(t, c).write = func(b []byte) (int, error) {
		if binary.NativeEndian.Uint16(b[6:]) != 0 {
			return k.write(b)
		}
		k.got = append(k.got, bytes.Clone(b))
		if int(binary.NativeEndian.Uint16(b[4:]))*4 != len(b) {
			return 0, unix.EINVAL
		}
		if errno := k.errno[binary.NativeEndian.Uint32(b)]; errno != 0 {
			return 0, errno
		}
		return len(b), nil
	}
	return c, k
}

// wantCommand compares the last command written with want, hex with
// spaces for readability; RESP stands for the response address, which is
// in the context's arena.
func wantCommand(t *testing.T, c *Context, k *fakeKernel, name, want string) {
	t.Helper()
	if len(k.got) == 0 {
		t.Fatalf("%s: nothing written", name)
	}
	var resp [8]byte
	binary.LittleEndian.PutUint64(resp[:], uint64(uintptr(unsafe.Pointer(&c.arena[arenaSize-maxResponse]))))
	want = strings.ReplaceAll(want, "RESP", hex.EncodeToString(resp[:]))
	if got, w := k.got[len(k.got)-1], unhex(t, want); !bytes.Equal(got, w) {
		t.Errorf("%s wrote\n% x\nwant\n% x", name, got, w)
	}
}

func skipUnlessLittleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected bytes are little-endian")
	}
}

// TestObjectCommandEncoding checks every byte each object command writes:
// the header's words (the request with the header, the response buffer
// with the driver's room), the core request and the driver data, as
// ib_uverbs_write expects them.
func TestObjectCommandEncoding(t *testing.T) {
	skipUnlessLittleEndian(t)
	c, k := newObjectKernel(t)
	pd, cq, qp := PD{Handle: 1}, CQ{Handle: 2, CQE: 63}, QP{Handle: 3, QPN: 17}

	c.AllocPD()
	wantCommand(t, c, k, "ALLOC_PD", "03000000 0400 0500 RESP")
	c.DeallocPD(pd)
	wantCommand(t, c, k, "DEALLOC_PD", "04000000 0300 0000 01000000")

	// The user handle numbers the context's CQs: events name them by it.
	c.CreateCQ(32, nil, make([]byte, 16))
	wantCommand(t, c, k, "CREATE_CQ", `12000000 0a00 0600 RESP
		0100000000000000 20000000 00000000 ffffffff 00000000`)
	c.CreateCQ(32, []byte{1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, 8))
	wantCommand(t, c, k, "CREATE_CQ with driver data", `12000000 0c00 0400 RESP
		0200000000000000 20000000 00000000 ffffffff 00000000 0102030405060708`)
	c.DestroyCQ(cq)
	wantCommand(t, c, k, "DESTROY_CQ", "14000000 0600 0200 RESP 02000000 00000000")

	init := QPInit{PD: pd, SendCQ: cq, RecvCQ: cq, Type: ib.QPTypeRC, SignalAll: true,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
	c.CreateQP(init, nil, make([]byte, 32))
	wantCommand(t, c, k, "CREATE_QP", `18000000 1000 1000 RESP 0000000000000000
		01000000 02000000 02000000 00000000 10000000 10000000 01000000 01000000 00000000 01 02 00 00`)

	c.ModifyQP(qp, &QPAttr{State: ib.QPStateInit, PortNum: 1, AccessFlags: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead},
		QPAttrsResetToInit)
	wantCommand(t, c, k, "MODIFY_QP RESET→INIT", `1a000000 1e00 0000`+zeros(64)+`03000000 39000000
		00000000 00000000 00000000 00000000 07000000 0000 0000 01 00 00 00 00 00 00 00 01 00 00 00 00 00 0000`)
	rtr := QPAttr{State: ib.QPStateRTR, PathMTU: ib.MTU1024, DestQPN: 17, RQPSN: 0x123456, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AV: AddressVector{DGID: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 77, 15: 1},
			SGIDIndex: 1, HopLimit: 64, IsGlobal: 1, PortNum: 1}}
	c.ModifyQP(qp, &rtr, QPAttrsInitToRTR)
	wantCommand(t, c, k, "MODIFY_QP INIT→RTR", `1a000000 1e00 0000
		00000000000000000000ffffc0a84d01 00000000 0000 0000 01 40 00 00 00 00 01 01`+zeros(32)+`
		03000000 81911200 00000000 56341200 00000000 11000000 00000000 0000 0000
		02 00 03 00 00 00 01 0c 00 00 00 00 00 00 0000`)
	c.ModifyQP(qp, &QPAttr{State: ib.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 3, SQPSN: 0x123456, MaxRdAtomic: 1},
		QPAttrsRTRToRTS)
	wantCommand(t, c, k, "MODIFY_QP RTR→RTS", `1a000000 1e00 0000`+zeros(64)+`03000000 012e0100
		00000000 00000000 56341200 00000000 00000000 0000 0000 03 00 00 00 00 01 00 00 00 0e 07 03 00 00 0000`)
	c.QueryQP(qp, QPAttrAll)
	wantCommand(t, c, k, "QUERY_QP", "19000000 0600 2000 RESP 03000000 ffff1f00")
	c.RingSendDoorbell(qp)
	wantCommand(t, c, k, "POST_SEND doorbell", "1c000000 0800 0100 RESP 03000000 00000000 00000000 80000000")
	c.DestroyQP(qp)
	wantCommand(t, c, k, "DESTROY_QP", "1b000000 0600 0100 RESP 03000000 00000000")

	buf, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeBuffer(buf)
	var addr [8]byte
	binary.LittleEndian.PutUint64(addr[:], bufferAddr(buf))
	a := hex.EncodeToString(addr[:])
	c.RegMR(pd, buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	wantCommand(t, c, k, "REG_MR", "09000000 0c00 0700 RESP "+a+" 0010000000000000 "+a+" 01000000 07000000")
	c.DeregMR(MR{Handle: 9})
	wantCommand(t, c, k, "DEREG_MR", "0d000000 0300 0000 09000000")
}

func zeros(n int) string { return " " + strings.Repeat("00", n) + " " }

// The transition masks are what ib_modify_qp_is_ok requires (the values
// ibv_rc_pingpong uses).
func TestTransitionMasks(t *testing.T) {
	for _, m := range []struct {
		mask QPAttrMask
		want uint32
		text string
	}{
		{QPAttrsResetToInit, 0x39, "STATE|ACCESS_FLAGS|PKEY_INDEX|PORT"},
		{QPAttrsInitToRTR, 0x129181, "STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"},
		{QPAttrsRTRToRTS, 0x12e01, "STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN"},
		{QPAttrAll, 0x1fffff, ""},
	} {
		if uint32(m.mask) != m.want || (m.text != "" && m.mask.String() != m.text) {
			t.Errorf("mask %#x %q, want %#x %q", uint32(m.mask), m.mask, m.want, m.text)
		}
	}
	if s := (QPAttrState | 1<<25).String(); s != "STATE|0x2000000" {
		t.Errorf("unknown bits: %q", s)
	}
}

// TestObjectResponses decodes what the kernel answers.
func TestObjectResponses(t *testing.T) {
	c, k := newObjectKernel(t)
	k.responses[cmdAllocPD] = unhex(t, "05000000")
	if pd, err := c.AllocPD(); err != nil || pd.Handle != 5 {
		t.Errorf("AllocPD() = %+v, %v", pd, err)
	}
	k.responses[cmdCreateCQ] = unhex(t, "02000000 3f000000 0010000000000000 00200000 00000000")
	out := make([]byte, 16)
	if cq, err := c.CreateCQ(32, nil, out); err != nil || cq.Handle != 2 || cq.CQE != 63 || cq.Channel() != nil ||
		!bytes.Equal(out, unhex(t, "0010000000000000 00200000 00000000")) {
		t.Errorf("CreateCQ() = %+v, %v, driver data % x", cq, err, out)
	}
	k.responses[cmdCreateQP] = unhex(t, "03000000 11000000 1f000000 1f000000 01000000 01000000 00000000 00000000")
	if qp, err := c.CreateQP(QPInit{}, nil, make([]byte, 32)); err != nil ||
		qp != (QP{Handle: 3, QPN: 17, Cap: QPCap{MaxSendWR: 31, MaxRecvWR: 31, MaxSendSGE: 1, MaxRecvSGE: 1}}) {
		t.Errorf("CreateQP() = %+v, %v", qp, err)
	}
	k.responses[cmdRegMR] = unhex(t, "04000000 1a020000 1b020000")
	buf, _ := AllocBuffer(1)
	defer FreeBuffer(buf)
	if mr, err := c.RegMR(PD{}, buf, AccessLocalWrite); err != nil || mr.Handle != 4 || mr.LKey != 0x21a ||
		mr.RKey != 0x21b || mr.Addr != bufferAddr(buf) || mr.Length != uint64(len(buf)) {
		t.Errorf("RegMR() = %+v, %v", mr, err)
	}
	if _, err := c.RegMR(PD{}, nil, 0); err == nil {
		t.Error("RegMR of no memory succeeded")
	}

	// QUERY_QP of the probe's queue pair in RTS, as 6.12's rxe answered.
	resp := make([]byte, 128)
	copy(resp, unhex(t, "00000000000000000000ffffc0a84d01 00000000 0000 0000 01 40 00 00 00 00 01 01"))
	copy(resp[64:], unhex(t, `1f000000 1f000000 01000000 01000000 00000000 00000000 56341200 56341200
		11000000 07000000 0000 0000 03 03 03 00 00 01 01 0c 01 0e 07 03 00 00 01`))
	k.responses[cmdQueryQP] = resp
	attr, err := c.QueryQP(QP{Handle: 3}, QPAttrAll)
	if err != nil {
		t.Fatal(err)
	}
	want := QPAttr{State: ib.QPStateRTS, CurState: ib.QPStateRTS, PathMTU: ib.MTU1024, RQPSN: 0x123456, SQPSN: 0x123456,
		DestQPN: 17, AccessFlags: 7, MaxRdAtomic: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12, PortNum: 1,
		Timeout: 14, RetryCnt: 7, RNRRetry: 3, SQSigAll: 1,
		AV:  AddressVector{DGID: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 77, 15: 1}, SGIDIndex: 1, HopLimit: 64, IsGlobal: 1, PortNum: 1},
		Cap: QPCap{MaxSendWR: 31, MaxRecvWR: 31, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if attr != want {
		t.Errorf("QueryQP() =\n%+v\nwant\n%+v", attr, want)
	}
	if attr.State.String() != "RTS" || ib.QPState(9).String() != "UNKNOWN" {
		t.Errorf("state names %q %q", attr.State, ib.QPState(9))
	}
}

func TestObjectCommandErrors(t *testing.T) {
	c, k := newObjectKernel(t)
	k.errno[cmdRegMR] = unix.ENOMEM
	k.errno[cmdModifyQP] = unix.EINVAL
	buf, _ := AllocBuffer(1)
	defer FreeBuffer(buf)
	_, err := c.RegMR(PD{}, buf, AccessLocalWrite)
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "REG_MR" || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("RegMR = %v, want a REG_MR *CommandError wrapping ENOMEM", err)
	}
	if err := c.ModifyQP(QP{}, &QPAttr{}, QPAttrState); !errors.Is(err, unix.EINVAL) ||
		err.Error() != "uverbs9 (fake0): MODIFY_QP: invalid argument" {
		t.Errorf("ModifyQP = %v", err)
	}
}

func TestWCNames(t *testing.T) {
	for s, want := range map[WCStatus]string{WCSuccess: "success", WCWRFlushErr: "Work Request Flushed Error",
		WCRetryExcErr: "transport retry counter exceeded", WCGeneralErr: "general error", 40: "unknown status 40"} {
		if s.String() != want {
			t.Errorf("status %d = %q, want %q", uint32(s), s, want)
		}
	}
	if WCRecv.String() != "RECV" || WCOpcode(7).String() != "opcode 7" {
		t.Errorf("opcode names %q %q", WCRecv, WCOpcode(7))
	}
}
