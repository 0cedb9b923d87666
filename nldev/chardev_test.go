package nldev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

func TestChardev(t *testing.T) {
	var req netlink.Message
	c := fakeKernel(t, func(reqs []netlink.Message) ([]netlink.Message, error) {
		req = reqs[0]
		data := nla(AttrChardev, binary.NativeEndian.AppendUint64(nil, 0xe7c0))
		data = append(data, nla(AttrChardevABI, binary.NativeEndian.AppendUint64(nil, 1))...)
		data = append(data, nla(AttrChardevName, strz("uverbs0"))...)
		data = append(data, nla(AttrUverbsDriverID, u32b(14))...)
		return []netlink.Message{{Header: netlink.Header{Type: MessageType(CmdGetChardev), Sequence: req.Header.Sequence, PID: req.Header.PID}, Data: data}}, nil
	})
	ch, err := c.Chardev(3, "uverbs")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name != "uverbs0" || ch.ABI != 1 || ch.Dev != 0xe7c0 || ch.DriverID != 14 {
		t.Fatalf("chardev %+v", ch)
	}
	// GET_CHARDEV (15) doit, no ACK: DEV_INDEX then CHARDEV_TYPE.
	want := append(nla(AttrDevIndex, u32b(3)), nla(AttrChardevType, strz("uverbs"))...)
	if req.Header.Type != MessageType(CmdGetChardev) || req.Header.Flags != netlink.Request || !bytes.Equal(req.Data, want) {
		t.Fatalf("request %+v\n got % x\nwant % x", req.Header, req.Data, want)
	}
}

func TestChardevMissing(t *testing.T) {
	c := fakeKernel(t, func(reqs []netlink.Message) ([]netlink.Message, error) { return nltest.Error(int(unix.EINVAL), reqs) })
	_, err := c.Chardev(3, "uverbs")
	if !errors.Is(err, unix.EINVAL) || err.Error() != "get uverbs device of RDMA device 3: no uverbs device (is its module, e.g. ib_uverbs, loaded?)" {
		t.Fatalf("error %v", err)
	}
}
