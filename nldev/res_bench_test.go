package nldev_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
)

// dumpMessageSize is how much of a dump the kernel packs into one message
// when user space reads with a large buffer (netlink's 32 KiB cap).
const dumpMessageSize = 32 << 10

// recordedQPEntry returns the attributes of QP 17 of a recorded QP dump
// of rxe0 (an RC QP of ibv_rc_pingpong in RTS, with pid, pdn and port),
// and the attributes before the message's table (the device handle).
func recordedQPEntry(tb testing.TB) (handle, entry []byte) {
	tb.Helper()
	msgs, err := nlfixture.Load(filepath.Join("..", "testdata", "nldev", "res", "6.12", "nl", "res_qp_dump_dev0.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	data := msgs[0].Data
	off, l := attrOffset(data, nldev.AttrResQP)
	if off < 0 {
		tb.Fatal("no QP table in the recording")
	}
	for table := data[off+4 : off+l]; len(table) >= 4; {
		el := int(binary.NativeEndian.Uint16(table))
		e := table[4:el]
		if o, _ := attrOffset(e, nldev.AttrResLQPN); o >= 0 && binary.NativeEndian.Uint32(e[o+4:]) == 17 {
			return data[:off], e
		}
		table = table[min((el+3)&^3, len(table)):]
	}
	tb.Fatal("no QP 17 in the recording")
	return nil, nil
}

// attrOffset finds the first attribute of type typ in b: its offset and
// length (header included), or -1.
func attrOffset(b []byte, typ nldev.Attr) (off, length int) {
	for off+4 <= len(b) {
		l := int(binary.NativeEndian.Uint16(b[off:]))
		if l < 4 {
			break
		}
		if nldev.Attr(binary.NativeEndian.Uint16(b[off+2:])&0x3fff) == typ {
			return off, l
		}
		off += (l + 3) &^ 3
	}
	return -1, 0
}

// syntheticQPDump replicates a recorded QP entry n times with LQPNs 1..n,
// in messages laid out as the kernel lays out a large dump.
func syntheticQPDump(tb testing.TB, n int) []netlink.Message {
	handle, entry := recordedQPEntry(tb)
	lqpnOff, _ := attrOffset(entry, nldev.AttrResLQPN)
	if lqpnOff < 0 {
		tb.Fatal("no LQPN in the entry")
	}
	lqpnOff += 4 // the value, after the header
	var msgs []netlink.Message
	var table []byte
	flush := func() {
		data := append([]byte{}, handle...)
		data = binary.NativeEndian.AppendUint16(data, uint16(4+len(table)))
		data = binary.NativeEndian.AppendUint16(data, uint16(nldev.AttrResQP))
		data = append(data, table...)
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Type: nldev.MessageType(nldev.CmdResQPGet), Flags: netlink.Multi},
			Data:   data,
		})
		table = table[:0]
	}
	for i := range n {
		if len(handle)+4+len(table)+4+len(entry) > dumpMessageSize {
			flush()
		}
		table = binary.NativeEndian.AppendUint16(table, uint16(4+len(entry)))
		table = binary.NativeEndian.AppendUint16(table, uint16(nldev.AttrResQPEntry))
		start := len(table)
		table = append(table, entry...)
		binary.NativeEndian.PutUint32(table[start+lqpnOff:], uint32(i+1))
	}
	flush()
	return append(msgs, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)})
}

// dumpKernel answers every request with msgs, stamped with the request's
// sequence number; the messages are built once, so the fake itself
// allocates nothing per object.
func dumpKernel(msgs []netlink.Message) *nldev.Client {
	return nldev.NewClient(nltest.Dial(func(req []netlink.Message) ([]netlink.Message, error) {
		for i := range msgs {
			msgs[i].Header.Sequence = req[0].Header.Sequence
			msgs[i].Header.PID = req[0].Header.PID
		}
		return msgs, nil
	}))
}

func TestSyntheticQPDumpDecodes(t *testing.T) {
	const n = 5000
	c := dumpKernel(syntheticQPDump(t, n))
	defer c.Close()
	var qp nldev.QP
	want := uint32(1)
	err := c.ResDump(nldev.ResQuery{DevIndex: 0}, &qp, func() error {
		if qp.LQPN != want || qp.Type != ib.QPTypeRC || qp.Device != "rxe0" || !qp.Has(nldev.AttrResPID) {
			return fmt.Errorf("object %d decoded as %+v", want, qp)
		}
		want++
		return nil
	})
	if err != nil || want != n+1 {
		t.Fatalf("decoded %d of %d QPs: %v", want-1, n, err)
	}
}

// BenchmarkResDumpQPs decodes a dump of many QPs through the streaming
// API. Allocations do not depend on the number of QPs: compare B/op and
// allocs/op of the sizes; peak-heap-B is the most the heap grew while
// streaming.
func BenchmarkResDumpQPs(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			c := dumpKernel(syntheticQPDump(b, n))
			defer c.Close()
			var qp nldev.QP
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base, peak := ms.HeapAlloc, uint64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				seen := 0
				err := c.ResDump(nldev.ResQuery{DevIndex: 0}, &qp, func() error {
					seen++
					if seen%(n/4) == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapAlloc-min(base, ms.HeapAlloc))
					}
					return nil
				})
				if err != nil || seen != n {
					b.Fatalf("decoded %d of %d: %v", seen, n, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(peak), "peak-heap-B")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/QP")
		})
	}
}
