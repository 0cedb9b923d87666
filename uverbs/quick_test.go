package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// quickKernel is a Kernel that writes some commands quickly
// (quickWriter), and says which.
type quickKernel struct {
	Kernel
	quick []uint32 // the commands written by WriteQuick
}

func (k *quickKernel) WriteQuick(b []byte) (int, error) {
	k.quick = append(k.quick, binary.NativeEndian.Uint32(b))
	return k.Write(b)
}

// The data path's commands (arming a CQ, the send doorbell) are raw
// system calls where the kernel can make them; the others are not.
func TestDataPathWritesQuick(t *testing.T) {
	c, k := newObjectKernel(t)
	ch, _ := newPipeChannel(t, c, k)
	k.responses[cmdCreateCQ] = unhex(t, "07000000 3f000000")
	cq, err := c.CreateCQWith(CQInit{CQE: 32, Channel: ch}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	qk := &quickKernel{Kernel: c.kernel}
	c.kernel = qk
	if err := c.ReqNotifyCQ(cq, false); err != nil {
		t.Fatal(err)
	}
	wantCommand(t, c, k, "REQ_NOTIFY_CQ", "17000000 0400 0000 07000000 00000000")
	if err := c.RingSendDoorbell(QP{Handle: 5}); err != nil {
		t.Fatal(err)
	}
	k.responses[cmdDestroyCQ] = unhex(t, "00000000 00000000")
	if _, err := c.DestroyCQEvents(cq); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{cmdReqNotifyCQ, cmdPostSend}; !slices.Equal(qk.quick, want) {
		t.Errorf("written quickly: %v, want %v (REQ_NOTIFY_CQ, POST_SEND)", qk.quick, want)
	}
	// Without quickWriter they are written as every command is.
	c.kernel = qk.Kernel
	n := len(k.got)
	if err := c.RingSendDoorbell(QP{Handle: 5}); err != nil || len(k.got) != n+1 {
		t.Errorf("doorbell through Write: %v, %d commands written", err, len(k.got)-n)
	}
}

// The device file's quick write is write(2): the bytes arrive whole, and
// its errors are the errno.
func TestDeviceFileWriteQuick(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	d := deviceFile{fd: fds[1]}
	msg := []byte{0x17, 0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}
	if n, err := d.WriteQuick(msg); n != len(msg) || err != nil {
		t.Fatalf("WriteQuick: %d, %v", n, err)
	}
	got := make([]byte, 64)
	n, err := unix.Read(fds[0], got)
	if err != nil || !bytes.Equal(got[:n], msg) {
		t.Errorf("read back % x, %v; want % x", got[:n], err, msg)
	}
	if n, err := d.WriteQuick(nil); n != 0 || err != nil {
		t.Errorf("WriteQuick(nil): %d, %v", n, err)
	}
	unix.Close(fds[1])
	if _, err := d.WriteQuick(msg); !errors.Is(err, unix.EBADF) {
		t.Errorf("WriteQuick on a closed descriptor: %v, want EBADF", err)
	}
}
