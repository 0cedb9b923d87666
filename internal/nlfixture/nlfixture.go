// Package nlfixture replays RDMA netlink replies recorded from a real kernel
// (by internal/cmd/nlcapture, stored under testdata/nldev) to an nltest
// connection, so unit tests decode exactly what a kernel sent.
package nlfixture

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/grdma/grdma/nldev"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
)

// Parse splits recorded reply datagrams into netlink messages.
func Parse(b []byte) ([]netlink.Message, error) {
	var msgs []netlink.Message
	for len(b) > 0 {
		if len(b) < 16 {
			return nil, fmt.Errorf("trailing %d bytes are not a netlink message", len(b))
		}
		l := int(binary.NativeEndian.Uint32(b))
		if l < 16 || l > len(b) {
			return nil, fmt.Errorf("bad netlink message length %d (%d bytes left)", l, len(b))
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:l]); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
		b = b[min((l+3)&^3, len(b)):]
	}
	return msgs, nil
}

// Load reads and parses one recorded file.
func Load(path string) ([]netlink.Message, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Request identifies what a request asked for: its command, whether it is
// a dump, and the device and port it names (-1 when absent).
type Request struct {
	Cmd  nldev.Command
	Dump bool
	Dev  int64
	Port int64
	// StatMode is set when a STAT request carries STAT_MODE (a mode query
	// or change rather than counters).
	StatMode bool
	// StatMR is set when a STAT_GET asks for MR counters (STAT_RES is
	// RES_MR); ID is then the RES_MRN asked for, if HasID.
	StatMR bool
	// ChardevType is GET_CHARDEV's CHARDEV_TYPE ("uverbs", "umad", ...).
	ChardevType string
	// Resource requests (RES_GET, RES_*_GET): the object number asked for
	// (HasID, ID) and whether driver details (-dd) were asked for.
	HasID         bool
	ID            uint32
	DriverDetails bool
}

// Kernel answers requests from a directory of recordings. Requests that
// match no recording get EOPNOTSUPP, so a test notices what it missed.
type Kernel struct {
	dir     string
	replies map[Request]string
	// Seen lists every request received, in order.
	Seen []Request
	// mu guards Seen: like the kernel, it answers several sockets at once
	// (concurrent scrapes).
	mu sync.Mutex
}

// NewKernel serves recordings from dir (e.g. testdata/nldev/6.12/nl).
func NewKernel(dir string) *Kernel {
	return &Kernel{dir: dir, replies: map[Request]string{}}
}

// On answers requests matching r with the recorded file name.
func (k *Kernel) On(r Request, file string) *Kernel {
	k.replies[r] = file
	return k
}

// Standard routes the files internal/cmd/nlcapture records for devices 0 and 1.
func (k *Kernel) Standard() *Kernel {
	k.On(Request{Cmd: nldev.CmdGet, Dump: true, Dev: -1, Port: -1}, "get_dump.bin")
	k.On(Request{Cmd: nldev.CmdSysGet, Dev: -1, Port: -1}, "sys_get.bin")
	for dev := int64(0); dev < 2; dev++ {
		k.On(Request{Cmd: nldev.CmdGet, Dev: dev, Port: -1}, fmt.Sprintf("get_doit_dev%d.bin", dev))
		k.On(Request{Cmd: nldev.CmdPortGet, Dump: true, Dev: dev, Port: -1}, fmt.Sprintf("port_dump_dev%d.bin", dev))
		k.On(Request{Cmd: nldev.CmdPortGet, Dev: dev, Port: 1}, fmt.Sprintf("port_doit_dev%d_port1.bin", dev))
		k.On(Request{Cmd: nldev.CmdStatGet, Dev: dev, Port: 1}, fmt.Sprintf("stat_get_dev%d_port1.bin", dev))
		k.On(Request{Cmd: nldev.CmdStatGet, Dump: true, Dev: dev, Port: 1}, fmt.Sprintf("stat_qp_dump_dev%d_port1.bin", dev))
		k.On(Request{Cmd: nldev.CmdStatGetStatus, Dev: dev, Port: 1}, fmt.Sprintf("stat_status_dev%d_port1.bin", dev))
		k.On(Request{Cmd: nldev.CmdStatGet, Dev: dev, Port: 1, StatMode: true}, fmt.Sprintf("stat_qp_mode_dev%d_port1.bin", dev))
	}
	return k
}

// Conn returns an nltest connection answered by the kernel.
func (k *Kernel) Conn() *netlink.Conn { return nltest.Dial(k.answer) }

func (k *Kernel) answer(reqs []netlink.Message) ([]netlink.Message, error) {
	req := reqs[0]
	r, err := Describe(req)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.Seen = append(k.Seen, r)
	k.mu.Unlock()
	file, ok := k.replies[r]
	if !ok {
		return nltest.Error(int(95), reqs) // EOPNOTSUPP
	}
	msgs, err := Load(filepath.Join(k.dir, file))
	if err != nil {
		return nil, err
	}
	for i := range msgs {
		msgs[i].Header.Sequence = req.Header.Sequence
		msgs[i].Header.PID = req.Header.PID
	}
	return msgs, nil
}

// Describe decodes what a request asks for.
func Describe(m netlink.Message) (Request, error) {
	r := Request{Cmd: nldev.Command(uint16(m.Header.Type) & 0x3ff), Dump: m.Header.Flags&netlink.Dump == netlink.Dump, Dev: -1, Port: -1}
	ad, err := netlink.NewAttributeDecoder(m.Data)
	if err != nil {
		return r, err
	}
	for ad.Next() {
		switch nldev.Attr(ad.Type()) {
		case nldev.AttrDevIndex:
			r.Dev = int64(ad.Uint32())
		case nldev.AttrPortIndex:
			r.Port = int64(ad.Uint32())
		case nldev.AttrStatMode:
			r.StatMode = true
		case nldev.AttrStatRes:
			r.StatMR = ad.Uint32() == uint32(nldev.AttrResMR)
		case nldev.AttrResMRN:
			if r.Cmd == nldev.CmdStatGet {
				r.HasID, r.ID = true, ad.Uint32()
			}
		case nldev.AttrStatCounterID:
			if r.Cmd == nldev.CmdStatGet {
				r.HasID, r.ID = true, ad.Uint32()
			}
		case nldev.AttrChardevType:
			r.ChardevType = ad.String()
		}
		describeRes(&r, ad)
	}
	return r, ad.Err()
}
