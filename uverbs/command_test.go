package uverbs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The header's words include the header itself for the request
// (in_words) and count the response buffer (out_words), as verify_hdr
// checks: GET_CONTEXT 4/2, QUERY_DEVICE 4/44, QUERY_PORT 6/10 plus driver
// data. Little-endian, as on amd64 and arm64.
func TestEncodeCommand(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected bytes are little-endian")
	}
	const resp = 0x00007f1122334000
	tests := []struct {
		name     string
		command  uint32
		req      any
		driverIn []byte
		respSize int
		want     string
	}{{
		name: "GET_CONTEXT", command: cmdGetContext,
		req: &getContextReq{Response: resp}, respSize: 8 + driverOutRoom,
		want: "00000000 0400 0201  0040332211 7f0000",
	}, {
		name: "QUERY_DEVICE", command: cmdQueryDevice,
		req: &queryDeviceReq{Response: resp}, respSize: 176,
		want: "01000000 0400 2c00  0040332211 7f0000",
	}, {
		name: "QUERY_PORT", command: cmdQueryPort,
		req: &queryPortReq{Response: resp, PortNum: 1}, respSize: 40,
		want: "02000000 0600 0a00  0040332211 7f0000  01 00000000000000",
	}, {
		name: "GET_CONTEXT with driver data", command: cmdGetContext,
		req: &getContextReq{Response: resp}, driverIn: []byte{16, 0, 0, 0, 4, 0, 0, 0}, respSize: 8 + 72,
		want: "00000000 0600 1400  0040332211 7f0000  10000000 04000000",
	}}
	for _, tt := range tests {
		got, err := encodeCommand(tt.command, tt.req, tt.driverIn, tt.respSize)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if want := unhex(t, tt.want); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, got, want)
		}
	}
	if _, err := encodeCommand(cmdGetContext, &getContextReq{}, []byte{1, 2}, 8); err == nil {
		t.Error("driver data of 2 bytes encoded; want an error: the header counts 32-bit words")
	}
}

// fakeKernel answers commands written to a Context like the kernel's
// ib_uverbs_write: it checks the header and copies a canned response to
// the address in the request.
type fakeKernel struct {
	t         *testing.T
	c         *Context
	responses map[uint32][]byte // by command
	errno     map[uint32]unix.Errno
	got       [][]byte // the commands written
}

func newFakeContext(t *testing.T) (*Context, *fakeKernel) {
	tk := &testKernel{}
	c, err := newContext("uverbs9 (fake0)", tk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	k := &fakeKernel{t: t, c: c, responses: map[uint32][]byte{}, errno: map[uint32]unix.Errno{}}
	tk.write = k.write
	return c, k
}

// testKernel is a Kernel made of functions, for tests that stand in for a
// few commands; what a test leaves nil fails with ENOSYS.
type testKernel struct {
	write  func([]byte) (int, error)
	ioctl  func([]byte) error
	mmap   func(offset int64, length int) ([]byte, error)
	munmap func([]byte) error
}

func (k *testKernel) Write(b []byte) (int, error) {
	if k.write == nil {
		return 0, unix.ENOSYS
	}
	return k.write(b)
}

func (k *testKernel) Ioctl(msg []byte) error {
	if k.ioctl == nil {
		return unix.ENOSYS
	}
	return k.ioctl(msg)
}

func (k *testKernel) Mmap(offset int64, length int) ([]byte, error) {
	if k.mmap == nil {
		return nil, unix.ENOSYS
	}
	return k.mmap(offset, length)
}

func (k *testKernel) Munmap(b []byte) error {
	if k.munmap == nil {
		return unix.ENOSYS
	}
	return k.munmap(b)
}

func (k *testKernel) Close() error { return nil }

// kernelOf returns the testKernel of a context newFakeContext made.
func kernelOf(t *testing.T, c *Context) *testKernel {
	t.Helper()
	k, ok := c.kernel.(*testKernel)
	if !ok {
		t.Fatalf("context %s has no test kernel", c.name)
	}
	return k
}

func (k *fakeKernel) write(b []byte) (int, error) {
	k.got = append(k.got, bytes.Clone(b))
	command := binary.NativeEndian.Uint32(b)
	inWords, outWords := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint16(b[6:])
	if int(inWords)*4 != len(b) {
		return 0, unix.EINVAL
	}
	if errno := k.errno[command]; errno != 0 {
		return 0, errno
	}
	// The response address must lie in the context's arena.
	addr := uintptr(binary.NativeEndian.Uint64(b[8:]))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(k.c.arena)))
	if addr < base || addr+uintptr(outWords)*4 > base+arenaSize {
		k.t.Errorf("response address %#x outside the arena %#x+%d", addr, base, arenaSize)
		return 0, unix.EFAULT
	}
	out := k.c.arena[addr-base:][:int(outWords)*4]
	copy(out, k.responses[command])
	return len(b), nil
}

// rxePort is QUERY_PORT's response for the captured rxe0 port 1
// on 6.12 (testdata ibv_devinfo -v, and TestLiveDevices in the guest):
// cap flags 0x10000, max_msg_sz 0x80000000, 1024 GIDs, 1 P_Key, ACTIVE,
// max MTU 4096, active MTU 1024, 1X, 10 Gb/s (FDR10, 8), LinkUp, Ethernet,
// GRH required.
const rxePort = `00000100 00000080 00000000 00000000 00040000 0100 0000 0000
	04 05 03 00 01 00 00 00 01 08 05 02 01 00`

func TestQueryPort(t *testing.T) {
	c, k := newFakeContext(t)
	k.responses[cmdQueryPort] = unhex(t, rxePort)
	attr, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	want := PortAttr{PortCapFlags: 0x10000, MaxMsgSz: 0x80000000, GIDTblLen: 1024, PKeyTblLen: 1,
		State: 4, MaxMTU: ib.MTU4096, ActiveMTU: ib.MTU1024, MaxVLNum: 1, ActiveWidth: 1, ActiveSpeed: 8,
		PhysState: 5, LinkLayer: ib.LinkLayerEthernet, Flags: 1}
	if attr != want {
		t.Errorf("QueryPort(1) = %+v\nwant %+v", attr, want)
	}
	if len(k.got) != 1 || k.got[0][16] != 1 {
		t.Errorf("QueryPort(1) wrote %x, want port 1 at byte 16", k.got)
	}
}

func TestQueryDevice(t *testing.T) {
	c, k := newFakeContext(t)
	resp := make([]byte, 176)
	copy(resp[8:], unhex(t, "ec1566fffeb60665")) // node_guid, big-endian
	binary.NativeEndian.PutUint32(resp[40:], 0xffffff)
	resp[171] = 1 // phys_port_cnt
	k.responses[cmdQueryDevice] = resp
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.NodeGUID.Uint64() != 0xec1566fffeb60665 || attr.VendorID != 0xffffff || attr.PhysPortCnt != 1 {
		t.Errorf("QueryDevice() = %+v", attr)
	}
}

func TestGetContext(t *testing.T) {
	c, k := newFakeContext(t)
	k.responses[cmdGetContext] = unhex(t, "07000000 02000000")
	if err := c.getContext(); err != nil {
		t.Fatal(err)
	}
	if c.asyncFD != 7 || c.NumCompVectors != 2 {
		t.Errorf("asyncFD, NumCompVectors = %d, %d; want 7, 2", c.asyncFD, c.NumCompVectors)
	}
	c.asyncFD = -1 // not ours to close
}

func TestCommandError(t *testing.T) {
	c, k := newFakeContext(t)
	k.errno[cmdQueryPort] = unix.EINVAL
	_, err := c.QueryPort(9)
	var ce *CommandError
	if !errors.As(err, &ce) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("QueryPort(9) = %v, want a *CommandError wrapping EINVAL", err)
	}
	if got, want := err.Error(), "uverbs9 (fake0): QUERY_PORT: invalid argument"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	c.Close()
	if _, err := c.QueryPort(1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("QueryPort after Close = %v, want os.ErrClosed", err)
	}
}

// A regular file where the char device should be is refused before any
// command is written to it.
func TestOpenChecksTheDeviceNumber(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(root+"/dev/infiniband", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+"/dev/infiniband/uverbs0", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := Open(root, "rxe0", rxe0Node)
	if err == nil || !strings.Contains(err.Error(), "is not character device 231:192") {
		t.Errorf("Open with a regular file = %v, want a device number error", err)
	}
	if _, err := Open(t.TempDir(), "rxe0", rxe0Node); !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "/dev/infiniband/uverbs0") {
		t.Errorf("Open without dev/ = %v, want ENOENT naming /dev/infiniband/uverbs0", err)
	}
	if _, err := Open(root, "rxe0", Node{Name: "../uverbs0"}); err == nil || !strings.Contains(err.Error(), "not a uverbs device name") {
		t.Errorf("Open(../uverbs0) = %v, want the name refused", err)
	}
}
