package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/udping"
)

// What grdma probe DEV peer HOST ping prints: as ping does, a line
// before the first probe, one per probe, and a summary; with -j one JSON
// object a line, for each probe and for the summary.

// PingHeader is the first line of a UD ping (text only):
//
//	PING 10.0.0.2:18515 from rxe0/1: UD qpn 0x000011 gid ::ffff:10.0.0.2 qkey 0x1234abcd, path MTU 1024, sizes 64 512 1024, software timestamps
func PingHeader(p *output.Printer, target, from string, responder udping.Address, mtu int, sizes []int, ts udping.TimestampSource) {
	if p.JSON() {
		return
	}
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = fmt.Sprint(n)
	}
	p.Text(fmt.Sprintf("PING %s from %s: UD %s qkey %#x, path MTU %d, sizes %s, %s timestamps\n",
		output.Escape(target), from, responder, responder.QKey, mtu, strings.Join(s, " "), ts))
}

// PingResult prints one probe's line:
//
//	512 bytes from 10.0.0.2:18515: seq=2 rtt=0.312 ms network=0.288 ms responder=0.024 ms
//	10.0.0.2:18515: seq=3 (1024 bytes): no reply within the timeout
//	{"target":"10.0.0.2:18515","seq":2,"size":512,"result":"reply","rtt_usec":312.0,"network_usec":288.0,"delay_usec":24.0,"timestamps":"software"}
func PingResult(p *output.Printer, r udping.Result) {
	if p.JSON() {
		p.StartPlain()
		p.OpenObject("")
		p.String(output.JSONOnly, "target", "", output.Escape(r.Target))
		p.Uint(output.JSONOnly, "seq", "", r.Seq)
		p.Uint(output.JSONOnly, "size", "", uint64(r.Size))
		p.String(output.JSONOnly, "result", "", string(r.Outcome))
		if r.Outcome == udping.OutcomeReply {
			p.Float(output.JSONOnly, "rtt_usec", "", usec(r.RTT), 1)
			p.Float(output.JSONOnly, "network_usec", "", usec(r.Network()), 1)
			if r.DelayKnown {
				p.Float(output.JSONOnly, "delay_usec", "", usec(r.Delay), 1)
			}
		}
		if r.Err != nil {
			p.String(output.JSONOnly, "error", "", output.Escape(r.Err.Error()))
		}
		p.String(output.JSONOnly, "timestamps", "", string(r.Timestamps))
		p.CloseObject()
		p.EndPlain()
		return
	}
	target := output.Escape(r.Target)
	if r.Outcome != udping.OutcomeReply {
		p.Text(fmt.Sprintf("%s: seq=%d (%d bytes): %s\n", target, r.Seq, r.Size, output.Escape(r.Err.Error())))
		return
	}
	delay := "responder=?"
	if r.DelayKnown {
		delay = "responder=" + ms(r.Delay)
	}
	p.Text(fmt.Sprintf("%d bytes from %s: seq=%d rtt=%s network=%s %s\n", r.Size, target, r.Seq, ms(r.RTT), ms(r.Network()), delay))
}

// PingSummary prints the summary:
//
//	--- 10.0.0.2:18515 UD ping statistics ---
//	4 probes transmitted, 3 received, 25% loss, 1 echo lost, time 3.00s
//	network rtt min/avg/max/mdev = 0.288/0.290/0.292/0.002 ms (responder delay removed; software timestamps)
//	rtt min/avg/max/mdev = ...; responder delay min/avg/max/mdev = ...
func PingSummary(p *output.Printer, s *udping.Summary, responder udping.Address, elapsed time.Duration) {
	if p.JSON() {
		p.StartPlain()
		p.OpenObject("")
		p.String(output.JSONOnly, "target", "", output.Escape(s.Target))
		if responder.QPN != 0 {
			p.OpenObject("responder")
			p.String(output.JSONOnly, "gid", "", responder.GID.String())
			p.Uint(output.JSONOnly, "qpn", "", uint64(responder.QPN))
			p.Uint(output.JSONOnly, "qkey", "", uint64(responder.QKey))
			p.Uint(output.JSONOnly, "mtu", "", uint64(responder.MTU.Bytes()))
			p.CloseObject()
		}
		p.Uint(output.JSONOnly, "transmitted", "", uint64(s.Sent))
		p.Uint(output.JSONOnly, "received", "", uint64(s.Replies))
		p.Uint(output.JSONOnly, "echo_lost", "", uint64(s.EchoLost))
		p.Float(output.JSONOnly, "loss_percent", "", s.Loss(), 1)
		p.Float(output.JSONOnly, "time_usec", "", usec(elapsed), 1)
		for _, x := range []struct {
			key    string
			spread udping.Spread
		}{{"network_rtt", s.Network}, {"rtt", s.RTT}, {"delay", s.Delay}} {
			if x.spread.N == 0 {
				continue
			}
			p.OpenObject(x.key)
			p.Float(output.JSONOnly, "min_usec", "", usec(x.spread.Min), 1)
			p.Float(output.JSONOnly, "avg_usec", "", usec(x.spread.Avg), 1)
			p.Float(output.JSONOnly, "max_usec", "", usec(x.spread.Max), 1)
			p.Float(output.JSONOnly, "mdev_usec", "", usec(x.spread.Mdev), 1)
			p.CloseObject()
		}
		if s.Timestamps != "" {
			p.String(output.JSONOnly, "timestamps", "", string(s.Timestamps))
		}
		p.CloseObject()
		p.EndPlain()
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s UD ping statistics ---\n", output.Escape(s.Target))
	fmt.Fprintf(&b, "%d probes transmitted, %d received, %s%% loss", s.Sent, s.Replies, trimFloat(s.Loss()))
	if s.EchoLost > 0 {
		fmt.Fprintf(&b, ", %d echo lost (the responder's report came)", s.EchoLost)
	}
	fmt.Fprintf(&b, ", time %s\n", Duration(elapsed))
	if s.Network.N > 0 {
		fmt.Fprintf(&b, "network rtt min/avg/max/mdev = %s ms (responder delay removed; %s timestamps)\n", spreadMS(s.Network), s.Timestamps)
		fmt.Fprintf(&b, "rtt min/avg/max/mdev = %s ms", spreadMS(s.RTT))
		if s.Delay.N > 0 {
			fmt.Fprintf(&b, "; responder delay min/avg/max/mdev = %s ms", spreadMS(s.Delay))
		}
		b.WriteString("\n")
	}
	p.Text(b.String())
}

// ms is d in milliseconds, 3 decimals, as ping prints.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func spreadMS(s udping.Spread) string {
	f := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
	return f(s.Min) + "/" + f(s.Avg) + "/" + f(s.Max) + "/" + f(s.Mdev)
}

// trimFloat prints a percentage as ping does: no decimals when whole.
func trimFloat(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}
