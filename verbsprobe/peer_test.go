package verbsprobe

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
)

func TestPingpongAddress(t *testing.T) {
	g, err := gid.Parse("::ffff:10.9.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a := PingpongAddress{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: g}
	b, err := a.MarshalBinary()
	// What ibv_rc_pingpong writes: "%04x:%06x:%06x:%s" and a NUL, the GID
	// as the hex of its bytes in order (gid_to_wire_gid on little endian).
	if err != nil || string(b) != "0000:000011:abcdef:00000000000000000000ffff0a090001\x00" || len(b) != 52 {
		t.Fatalf("MarshalBinary = %q, %v", b, err)
	}
	var back PingpongAddress
	if err := back.UnmarshalBinary(b); err != nil || back != a {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{
		"0000:000011:abcdef:00000000000000000000ffff0a090001",        // no NUL
		"0000:000011:abcdef:00000000000000000000ffff0a09000\x00\x00", // short GID
		"00g0:000011:abcdef:00000000000000000000ffff0a090001\x00",    // not hex
		`{"type":"hello","grdma_probe":1,"test":{"kind":"bw"}}` + "\x00",
	} {
		if err := back.UnmarshalBinary([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not an ibv_rc_pingpong address") {
			t.Errorf("UnmarshalBinary(%q) = %v", bad, err)
		}
	}
	if _, err := (PingpongAddress{QPN: 1 << 24}).MarshalBinary(); err == nil {
		t.Error("a 25-bit QPN was marshalled")
	}
}

func FuzzPingpongAddress(f *testing.F) {
	f.Add([]byte("0000:000011:abcdef:00000000000000000000ffff0a090001\x00"))
	f.Add([]byte("ffff:ffffff:ffffff:fe800000000000000000000000000001\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a PingpongAddress
		if a.UnmarshalBinary(b) != nil {
			return
		}
		again, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed %q but cannot write it back: %v", b, err)
		}
		var b2 PingpongAddress
		if err := b2.UnmarshalBinary(again); err != nil || b2 != a {
			t.Fatalf("%q: round trip %+v != %+v (%v)", b, b2, a, err)
		}
	})
}

func TestPeerAddress(t *testing.T) {
	for in, want := range map[string]string{
		"hosta":           "hosta:18515",
		"hosta:18600":     "hosta:18600",
		"10.0.0.1":        "10.0.0.1:18515",
		"[fe80::1%eth0]":  "[fe80::1%eth0]:18515",
		"[2001:db8::1]:9": "[2001:db8::1]:9",
	} {
		if got, err := PeerAddress(in); err != nil || got != want {
			t.Errorf("PeerAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":18515", "hosta:0", "hosta:65536", "hosta:x"} {
		if got, err := PeerAddress(bad); err == nil {
			t.Errorf("PeerAddress(%q) = %q, want an error", bad, got)
		}
	}
	for in, want := range map[string]string{"": ":18515", ":18600": "0.0.0.0:18600", "10.0.0.1": "10.0.0.1:18515"} {
		if got, err := ListenAddress(in); err != nil || got != want {
			t.Errorf("ListenAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestTestDefaults(t *testing.T) {
	for _, tt := range []struct {
		in   Test
		want Test
	}{
		{Test{}, Test{Kind: TestConnect, Size: payloadSize}},
		{Test{Kind: TestBandwidth}, Test{Kind: TestBandwidth, Op: OpWrite, Size: 65536, Iters: 5000}},
		{Test{Kind: TestLatency, Op: OpRead}, Test{Kind: TestLatency, Op: OpRead, Size: 2, Iters: 1000}},
		{Test{Kind: TestPingpong, Iters: 10}, Test{Kind: TestPingpong, Size: 4096, Iters: 10}},
		{Test{Kind: TestBandwidth, Duration: time.Second}, Test{Kind: TestBandwidth, Op: OpWrite, Size: 65536, Iters: 5000, Duration: time.Second}},
	} {
		got := tt.in.WithDefaults()
		if got != tt.want || got.Validate() != nil {
			t.Errorf("%+v.WithDefaults() = %+v (%v), want %+v", tt.in, got, got.Validate(), tt.want)
		}
	}
	for _, bad := range []Test{
		{Kind: "bulk", Size: 1},
		{Kind: TestBandwidth, Op: "atomic", Size: 1},
		{Kind: TestTraffic, Op: OpWrite, Size: 1},
		{Kind: TestLatency, Op: OpWrite, Size: 0},
		{Kind: TestLatency, Op: OpWrite, Size: MaxTestSize + 1},
		{Kind: TestPingpong, Size: 1, Duration: time.Second},
		{Kind: TestTraffic, Size: 1, Duration: time.Second},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
}

func TestCompatible(t *testing.T) {
	v4, _ := gid.Parse("::ffff:10.0.0.1")
	v6, _ := gid.Parse("fe80::1")
	roce := func(g gid.GID, typ string) Endpoint {
		return Endpoint{Ifname: "rxe0", Port: 1, LinkLayer: ib.LinkLayerEthernet, GIDIndex: 1, GID: g, GIDType: typ}
	}
	ibEnd := Endpoint{Ifname: "mlx5_0", Port: 1, LinkLayer: ib.LinkLayerInfiniBand, GIDIndex: -1, LID: 7}
	for _, tt := range []struct {
		local, remote Endpoint
		want          string // "" compatible
	}{
		{roce(v4, "RoCE v2"), roce(v4, "RoCE v2"), ""},
		{ibEnd, ibEnd, ""},
		{roce(v4, "RoCE v2"), ibEnd, "link layers differ: this side's rxe0/1 Ethernet, the peer's mlx5_0/1 InfiniBand"},
		{roce(v4, "RoCE v2"), roce(v4, "RoCE v1"), "GID types differ: this side's rxe0/1 GID 1 ::ffff:10.0.0.1 (RoCE v2), the peer's rxe0/1 GID 1 ::ffff:10.0.0.1 (RoCE v1)"},
		{roce(v4, "RoCE v2"), roce(v6, "RoCE v2"), "address families differ"},
		{ibEnd, Endpoint{Ifname: "mlx5_1", Port: 1, LinkLayer: ib.LinkLayerInfiniBand, GIDIndex: -1}, "has no usable LID"},
	} {
		err := compatible(tt.local, tt.remote)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("compatible(%s, %s) = %v, want %q", tt.local.LinkLayer, tt.remote.LinkLayer, err, tt.want)
		}
	}
	if got := pathMTU(ib.MTU4096, 1024); got.Bytes() != 1024 {
		t.Errorf("path MTU of 4096 and 1024: %v", got)
	}
	if got := pathMTU(ib.MTU1024, 0); got.Bytes() != 1024 {
		t.Errorf("path MTU with an unknown peer MTU: %v", got)
	}
}

// The recorder's memory does not grow past maxLatencySamples; count,
// minimum, average and maximum stay exact.
func TestLatencyRecorder(t *testing.T) {
	var r latencyRecorder
	if r.stats() != nil {
		t.Fatal("stats without samples")
	}
	const n = 3 * maxLatencySamples
	for i := 1; i <= n; i++ {
		r.add(time.Duration(i))
	}
	st := r.stats()
	if len(r.kept) != maxLatencySamples || cap(r.kept) > 2*maxLatencySamples {
		t.Errorf("kept %d samples (cap %d)", len(r.kept), cap(r.kept))
	}
	if st.Samples != n || st.Min != 1 || st.Max != n || st.Avg != (n+1)/2 {
		t.Errorf("stats %+v", st)
	}
	// The reservoir is uniform: its median is near the true one.
	if d := st.Median - n/2; d < -n/50 || d > n/50 {
		t.Errorf("median %v, true median %v", st.Median, n/2)
	}
}

func BenchmarkLatencyRecorder(b *testing.B) {
	var r latencyRecorder
	b.ReportAllocs()
	for i := range b.N {
		r.add(time.Duration(i))
	}
}

// A session's messages, a peer's reported failure, a silent peer and a
// closed connection.
func TestSessionMessages(t *testing.T) {
	a, b := net.Pipe()
	ctx := context.Background()
	client := &session{role: RoleClient, host: "server:18515", timeout: time.Second}
	server := &session{role: RoleServer, host: "client:40000", timeout: 200 * time.Millisecond}
	client.attach(ctx, a)
	server.attach(ctx, b)
	defer client.close()
	defer server.close()

	go client.send(wireMessage{Type: msgHello, Protocol: ProtocolVersion, Test: &Test{Kind: TestTraffic}})
	m, err := server.expect(msgHello, "reading the hello of")
	if err != nil || m.Test.Kind != TestTraffic || m.Protocol != ProtocolVersion {
		t.Fatalf("hello: %+v, %v", m, err)
	}
	go server.reportFailure(StepCreateQP, errors.New("CREATE_QP: no memory"))
	_, err = client.expect(msgWelcome, "waiting for the queue pair of")
	var remote *RemoteFailure
	if !errors.As(err, &remote) || err.Error() != "the peer failed at create_qp: CREATE_QP: no memory" {
		t.Errorf("the peer's failure: %v", err)
	}
	_, err = server.receive("waiting for the test of")
	var pe *PeerError
	if !errors.As(err, &pe) || err.Error() != "waiting for the test of client:40000: no answer within 200ms" {
		t.Errorf("a silent peer: %v", err)
	}
	a.Close()
	if _, err := server.receive("waiting for the test of"); err == nil || !strings.Contains(err.Error(), "the peer closed the connection") {
		t.Errorf("a closed connection: %v", err)
	}
}

// The client retries a refused connection until the listener comes, and
// says what is wrong when none does.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &session{host: addr, timeout: 300 * time.Millisecond}
	err = s.dial(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connecting to "+addr+": connection refused for 300ms: no `grdma probe DEV listen` there") {
		t.Errorf("nothing listening: %v", err)
	}
	ready := make(chan net.Listener)
	go func() {
		time.Sleep(150 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			close(ready)
			return
		}
		ready <- ln
	}()
	s = &session{host: addr, timeout: 10 * time.Second}
	err = s.dial(context.Background())
	if ln, ok := <-ready; ok {
		defer ln.Close()
	} else {
		t.Skip("the port was taken meanwhile")
	}
	if err != nil {
		t.Errorf("a listener that starts later: %v", err)
	}
	s.close()
	s = &session{host: "nosuchhost.invalid:18515", timeout: time.Second}
	if err := s.dial(context.Background()); err == nil || !strings.Contains(err.Error(), "unknown host nosuchhost.invalid") {
		t.Errorf("unknown host: %v", err)
	}
}
