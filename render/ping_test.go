package render

import (
	"bytes"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/udping"
)

// A UD ping's lines, made by hand: a reply, a timeout, an echo lost, and
// the summary, as text and as JSON lines; a peer's escape is escaped.
func TestPing(t *testing.T) {
	responder := udping.Address{GID: gid.GID{10: 0xff, 11: 0xff, 12: 10, 13: 30, 14: 0, 15: 2}, QPN: 0x11, QKey: 0x1234, MTU: ib.MTU1024}
	sent := time.Unix(1000, 0)
	results := []udping.Result{
		{Target: "node2:18515", Seq: 1, Size: 64, Sent: sent, Responder: responder, Outcome: udping.OutcomeReply,
			RTT: 312 * time.Microsecond, Delay: 24 * time.Microsecond, DelayKnown: true, Timestamps: udping.Software},
		{Target: "node2:18515", Seq: 2, Size: 512, Sent: sent, Responder: responder, Outcome: udping.OutcomeTimeout,
			Err: udping.ErrTimeout, Timestamps: udping.Software},
		{Target: "node2:18515", Seq: 3, Size: 1024, Sent: sent, Responder: responder, Outcome: udping.OutcomeEchoLost,
			Err: udping.ErrEchoLost, Timestamps: udping.Software},
		{Target: "node2:18515", Seq: 4, Size: 64, Sent: sent, Responder: responder, Outcome: udping.OutcomeReply,
			RTT: 500 * time.Microsecond, Timestamps: udping.Software},
	}
	s := &udping.Summary{Target: "node2:18515"}
	var text, js bytes.Buffer
	tp, jp := output.New(&text, output.Options{}), output.New(&js, output.Options{JSON: true})
	PingHeader(tp, "node2:18515", "rxe0/1", responder, 1024, []int{64, 512, 1024}, udping.Software)
	PingHeader(jp, "node2:18515", "rxe0/1", responder, 1024, []int{64, 512, 1024}, udping.Software)
	for _, r := range results {
		s.Add(r)
		PingResult(tp, r)
		PingResult(jp, r)
	}
	PingSummary(tp, s, responder, 3*time.Second)
	PingSummary(jp, s, responder, 3*time.Second)
	tp.Flush()
	jp.Flush()
	want := `PING node2:18515 from rxe0/1: UD qpn 0x000011 gid ::ffff:10.30.0.2 qkey 0x1234, path MTU 1024, sizes 64 512 1024, software timestamps
64 bytes from node2:18515: seq=1 rtt=0.312 ms network=0.288 ms responder=0.024 ms
node2:18515: seq=2 (512 bytes): no reply within the timeout
node2:18515: seq=3 (1024 bytes): the echo was lost: the responder's report came
64 bytes from node2:18515: seq=4 rtt=0.500 ms network=0.500 ms responder=?
--- node2:18515 UD ping statistics ---
4 probes transmitted, 2 received, 50% loss, 1 echo lost (the responder's report came), time 3.00s
network rtt min/avg/max/mdev = 0.288/0.394/0.500/0.106 ms (responder delay removed; software timestamps)
rtt min/avg/max/mdev = 0.312/0.406/0.500/0.094 ms; responder delay min/avg/max/mdev = 0.024/0.024/0.024/0.000 ms
`
	if text.String() != want {
		t.Errorf("text\n%s\nwant\n%s", text.String(), want)
	}
	wantJSON := `{"target":"node2:18515","seq":1,"size":64,"result":"reply","rtt_usec":312,"network_usec":288,"delay_usec":24,"timestamps":"software"}
{"target":"node2:18515","seq":2,"size":512,"result":"timeout","error":"no reply within the timeout","timestamps":"software"}
{"target":"node2:18515","seq":3,"size":1024,"result":"echo_lost","error":"the echo was lost: the responder's report came","timestamps":"software"}
{"target":"node2:18515","seq":4,"size":64,"result":"reply","rtt_usec":500,"network_usec":500,"timestamps":"software"}
{"target":"node2:18515","responder":{"gid":"::ffff:10.30.0.2","qpn":17,"qkey":4660,"mtu":1024},"transmitted":4,"received":2,"echo_lost":1,"loss_percent":50,"time_usec":3000000,"network_rtt":{"min_usec":288,"avg_usec":394,"max_usec":500,"mdev_usec":106},"rtt":{"min_usec":312,"avg_usec":406,"max_usec":500,"mdev_usec":94},"delay":{"min_usec":24,"avg_usec":24,"max_usec":24,"mdev_usec":0},"timestamps":"software"}
`
	if js.String() != wantJSON {
		t.Errorf("JSON\n%s\nwant\n%s", js.String(), wantJSON)
	}
	var esc bytes.Buffer
	ep := output.New(&esc, output.Options{})
	PingResult(ep, udping.Result{Target: "evil\x1b[2J", Seq: 1, Outcome: udping.OutcomeResolve, Err: &udping.ResolveError{Target: "x", Err: errString("\x1b]0;pwned\x07")}})
	ep.Flush()
	if bytes.ContainsAny(esc.Bytes(), "\x1b\x07") {
		t.Errorf("a peer's control characters printed: %q", esc.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }
