package cminterop

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
	"github.com/grdma/grdma/verbsprobe"
)

// perftestConfig is a perftest run's Config on the host.
func (h *fakeHost) perftestConfig(addr netip.AddrPort, test verbsprobe.TestKind, op verbsprobe.Operation, iters, size int) Config {
	cfg := h.config(addr, iters, size)
	cfg.Test, cfg.Op = test, op
	return cfg
}

// perftestPair runs this package's perftest server on b and its client
// on a, which speak perftest's protocol to each other.
func perftestPair(t *testing.T, test verbsprobe.TestKind, op verbsprobe.Operation, iters, size int) (cli, srv *Result) {
	t.Helper()
	a, b := pair()
	done := make(chan *Result, 1)
	go func() {
		done <- Run(context.Background(), Perftest, Server, b.perftestConfig(netip.AddrPortFrom(b.ip, 0), test, op, iters, size))
	}()
	waitListening(t, b, Perftest.Port())
	cli = Run(context.Background(), Perftest, Client, a.perftestConfig(netip.AddrPortFrom(b.ip, 0), test, op, iters, size))
	srv = <-done
	a.clean(t)
	b.clean(t)
	return cli, srv
}

func TestPerftestBWWrite(t *testing.T) {
	cli, srv := perftestPair(t, verbsprobe.TestBandwidth, verbsprobe.OpWrite, 50, 8192)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	m := cli.Measurement
	if m == nil || m.Iters != 50 || m.Size != 8192 || m.Bytes != 50*8192 || m.Elapsed <= 0 || m.Latency != nil {
		t.Errorf("client measured %+v", m)
	}
	if r := srv.PeerReport; r == nil || r.Size != 8192 || r.Iters != 50 || r.BWAvg <= 0 || r.MsgRate <= 0 {
		t.Errorf("the client's report as the server got it: %+v", r)
	}
	if srv.Measurement == nil || srv.Measurement.Iters != 50 || cli.PeerVersion != PerftestVersion || srv.PeerVersion != PerftestVersion {
		t.Errorf("server measured %+v; versions %q %q", srv.Measurement, cli.PeerVersion, srv.PeerVersion)
	}
	want := "open,resolve address,resolve route,connect,establish,perftest setup," +
		"data open,data resolve address,data resolve route,data connect,data establish," +
		"perftest handshakes,bw write,perftest report,data disconnect,disconnect"
	if got := stepNames(cli); got != want {
		t.Errorf("client steps\n%s, want\n%s", got, want)
	}
	want = "listen,request,establish,perftest setup,data listen,data request,data establish,perftest handshakes,bw write,data disconnect,disconnect"
	if got := stepNames(srv); got != want {
		t.Errorf("server steps\n%s, want\n%s", got, want)
	}
	if cli.CM.Device != "rxe0" || srv.CM.Device != "rxe1" || cli.CM.Dst.Port() != 18515 {
		t.Errorf("what the CM chose: %+v; %+v", cli.CM, srv.CM)
	}
}

func TestPerftestLatSend(t *testing.T) {
	cli, srv := perftestPair(t, verbsprobe.TestLatency, verbsprobe.OpSend, 100, 2)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	for _, r := range []*Result{cli, srv} {
		m := r.Measurement
		if m == nil || m.Iters != 100 || m.Size != 2 || m.Latency == nil || m.Latency.Min <= 0 || m.Latency.Median < m.Latency.Min {
			t.Errorf("%s measured %+v", r.Role, m)
		}
	}
	if cli.Measurement.Latency.Samples != 100 || srv.Measurement.Latency.Samples != 99 {
		t.Errorf("samples: client %d, server %d", cli.Measurement.Latency.Samples, srv.Measurement.Latency.Samples)
	}
}

func TestPerftestBWRead(t *testing.T) {
	cli, srv := perftestPair(t, verbsprobe.TestBandwidth, verbsprobe.OpRead, 40, 4096)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if m := cli.Measurement; m == nil || m.Op != verbsprobe.OpRead || m.Iters != 40 || m.Bytes != 40*4096 {
		t.Errorf("client measured %+v", m)
	}
	if r := srv.PeerReport; r == nil || r.Iters != 40 || r.Size != 4096 {
		t.Errorf("server got %+v", r)
	}
}

func TestPerftestLatRead(t *testing.T) {
	cli, srv := perftestPair(t, verbsprobe.TestLatency, verbsprobe.OpRead, 30, 64)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if m := cli.Measurement; m == nil || m.Op != verbsprobe.OpRead || m.Latency == nil || m.Latency.Samples != 30 {
		t.Errorf("client measured %+v", m)
	}
	if srv.Measurement != nil || srv.Elapsed <= 0 {
		t.Errorf("server: %+v, %v", srv.Measurement, srv.Elapsed)
	}
	if got, want := stepNames(srv), "listen,request,establish,perftest setup,data listen,data request,data establish,perftest handshakes,lat read,data disconnect,disconnect"; got != want {
		t.Errorf("server steps\n%s, want\n%s", got, want)
	}
}

func TestPerftestLatWrite(t *testing.T) {
	// 300 iterations: the count in the last byte wraps.
	cli, srv := perftestPair(t, verbsprobe.TestLatency, verbsprobe.OpWrite, 300, 32)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	for _, r := range []*Result{cli, srv} {
		if m := r.Measurement; m == nil || m.Op != verbsprobe.OpWrite || m.Latency == nil || m.Latency.Samples != 299 {
			t.Errorf("%s measured %+v", r.Role, m)
		}
	}
}

func TestPerftestBWSend(t *testing.T) {
	// More SENDs than the server keeps receives posted for.
	cli, srv := perftestPair(t, verbsprobe.TestBandwidth, verbsprobe.OpSend, 700, 1024)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	for _, r := range []*Result{cli, srv} {
		if m := r.Measurement; m == nil || m.Op != verbsprobe.OpSend || m.Iters != 700 || m.Bytes != 700*1024 {
			t.Errorf("%s measured %+v", r.Role, m)
		}
	}
}

// Sizes that differ (the user's mistake on one side) fail with the fix.
func TestPerftestSizeMismatch(t *testing.T) {
	a, b := pair()
	done := make(chan *Result, 1)
	go func() {
		done <- Run(context.Background(), Perftest, Server, b.perftestConfig(netip.AddrPortFrom(b.ip, 0), verbsprobe.TestLatency, verbsprobe.OpSend, 10, 64))
	}()
	waitListening(t, b, Perftest.Port())
	cfg := a.perftestConfig(netip.AddrPortFrom(b.ip, 0), verbsprobe.TestLatency, verbsprobe.OpSend, 10, 32)
	cfg.Timeout = 2 * time.Second
	cli := Run(context.Background(), Perftest, Client, cfg)
	srv := <-done
	if srv.Err == nil || !strings.Contains(srv.Err.Error(), "32 bytes; this side's size is 64: give the same size on both sides") {
		t.Errorf("server: %v (client: %v)", srv.Err, cli.Err)
	}
	a.clean(t)
	b.clean(t)
}

func TestPerftestDest(t *testing.T) {
	d := PerftestDest{LID: 1, OutReads: 2, QPN: 0x11, PSN: 0x22, RKey: 0x33, VAddr: 0x0102030405060708, SRQN: 5, GIDIndex: 3}
	d.GID[15] = 0xaa
	b, _ := d.MarshalBinary()
	want := "00000001" + "00000002" + "00000011" + "00000022" + "00000033" + "00000000" + "0102030405060708" +
		"000000000000000000000000000000aa" + "00000005" + "00000003"
	if hex(b) != want {
		t.Errorf("marshalled\n%s, want\n%s", hex(b), want)
	}
	var got PerftestDest
	if err := got.UnmarshalBinary(b); err != nil || got != d {
		t.Errorf("round trip %+v, %v", got, err)
	}
	// 26.04's layout: a u64 at 32 moves the GID and what follows.
	long := append(append(append([]byte{}, b[:32]...), make([]byte, 8)...), b[32:]...)
	if err := got.UnmarshalBinary(long); err != nil || got != d {
		t.Errorf("26.04 layout %+v, %v", got, err)
	}
	if err := got.UnmarshalBinary(b[:40]); err == nil || !strings.Contains(err.Error(), "40 bytes") {
		t.Errorf("short: %v", err)
	}
	if v := perftestVersionMsg(); len(v) != 16 || !bytes.Equal(v, []byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")) {
		t.Errorf("version message %q", v)
	}
	f := PerftestReport{Size: 65536, Iters: 5000, BWPeak: 1.5, BWAvg: 1.5, MsgRate: 0.25}.fields()
	if hex(f[0]) != "0000000000010000" || hex(f[1]) != "0000000000001388" || hex(f[3]) != "3ff8000000000000" {
		t.Errorf("report fields %x", f)
	}
}

func TestParsePerftestVersion(t *testing.T) {
	msg := func(s string) []byte { b := make([]byte, 16); copy(b, s); return b }
	for _, tc := range []struct {
		b    []byte
		want string // "" ok
	}{
		{msg("6.06"), ""},
		{msg("5.70"), ""},
		{msg("26.04"), ""},
		{msg("5.69"), "perftest older than 5.70"},
		{msg("4.5"), "perftest older than 5.70"},
		{msg(""), "empty"},
		{msg("6.06; rm -rf"), "digits and a dot expected"},
		{msg("6.0.6"), "invalid syntax"},
		{[]byte("6.06"), "4 bytes; perftest's is 16"},
		{[]byte("1234567890123456"), "no NUL"},
	} {
		_, _, err := ParsePerftestVersion(tc.b)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.b, err, tc.want)
		}
	}
}

func TestPerftestReportCheck(t *testing.T) {
	good := PerftestReport{Size: 65536, Iters: 5000, BWPeak: 1000, BWAvg: 900, MsgRate: 0.01}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod  func(*PerftestReport)
		want string
	}{
		{func(r *PerftestReport) { r.Size = 1 << 40 }, "size 1099511627776"},
		{func(r *PerftestReport) { r.Size = 0 }, "size 0"},
		{func(r *PerftestReport) { r.Iters = math.MaxUint64 }, "iterations"},
		{func(r *PerftestReport) { r.BWAvg = math.NaN() }, "average bandwidth NaN"},
		{func(r *PerftestReport) { r.BWPeak = math.Inf(1) }, "peak bandwidth +Inf"},
		{func(r *PerftestReport) { r.MsgRate = -1 }, "message rate -1"},
	} {
		r := good
		tc.mod(&r)
		if err := r.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", r, err, tc.want)
		}
	}
}

func TestPerftestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Test: "bw", Op: "write"}, ""},
		{Config{Test: "lat", Op: "send", Size: MaxPerftestSize}, ""},
		{Config{Test: "bw", Op: "send"}, ""},
		{Config{Test: "lat", Op: "write"}, ""},
		{Config{Test: "bw", Op: "read"}, ""},
		{Config{Test: "lat", Op: "read"}, ""},
		{Config{Test: "traffic", Op: "write"}, `perftest test "traffic": bw or lat`},
		{Config{Test: "bw", Op: "atomic"}, `operation "atomic"`},
		{Config{Test: "bw", Op: "write", Size: MaxPerftestSize + 1}, "perftest size 8388609"},
		{Config{Test: "lat", Op: "send", Count: MaxPerftestIters + 1}, "perftest iters 1000001"},
	} {
		err := tc.cfg.Validate(Perftest, false)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if c, s := (Config{Test: "bw", Op: "write"}).withDefaults(Perftest, false); c != 5000 || s != 65536 {
		t.Errorf("bw write defaults %d × %d", c, s)
	}
	if c, s := (Config{Test: "lat", Op: "send"}).withDefaults(Perftest, true); c != 1000 || s != 2 {
		t.Errorf("lat send defaults %d × %d", c, s)
	}
}

// A hostile perftest peer: it speaks the control protocol from this
// package's own session, then says what it likes. The victim refuses
// what no perftest would announce, before it registers anything for it.

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// hostilePerftestServer serves the control connection on b and plays
// script; the channel closes once it has ended and released all.
func hostilePerftestServer(t *testing.T, b *fakeHost, script func(ctx context.Context, c ctrl)) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s := &session{res: &Result{}}
		defer s.close()
		if err := s.accept(ctx, b.config(netip.AddrPortFrom(b.ip, Perftest.Port()), 0, 0), 2, 1, ctrlBufLen, ctrlPrepare); err != nil {
			t.Error(err)
			return
		}
		script(ctx, ctrl{e: s.ep})
	}()
	waitListening(t, b, Perftest.Port())
	return done
}

func TestPerftestClientHostileServer(t *testing.T) {
	v := func(s string) []byte { b := make([]byte, 16); copy(b, s); return b }
	for _, tc := range []struct {
		name   string
		script func(ctx context.Context, c ctrl)
		want   string
	}{
		{"old_version", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("5.60")), 16)
		}, "perftest version 5.60: perftest older than 5.70"},
		{"long_version", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(bytes.Repeat([]byte("9"), 40)), 16)
		}, "version: 40 bytes"},
		{"huge_cycle_buffer", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("6.06")), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(1<<30)), 4)
		}, "perftest's cycle buffer 1073741824: this side takes 1 to 1048576 bytes"},
		{"negative_cycle_buffer", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("6.06")), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(0xffffff00)), 4)
		}, "perftest's cycle buffer -256"},
		{"huge_cache_line", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("6.06")), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(4096)), 4)
			c.xchg(ctx, "cache line", fixed(be32(1<<20)), 4)
		}, "perftest's cache line size 1048576"},
		{"bad_mtu", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("6.06")), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(4096)), 4)
			c.xchg(ctx, "cache line", fixed(be32(64)), 4)
			c.xchg(ctx, "MTU", fixed([]byte("9\x00")), 2)
		}, `perftest's MTU "9\x00"`},
		{"short_handshake", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v("6.06")), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(4096)), 4)
			c.xchg(ctx, "cache line", fixed(be32(64)), 4)
			c.xchg(ctx, "MTU", fixed([]byte("3\x00")), 2)
			c.xchg(ctx, "handshake", fixed(make([]byte, 20)), PerftestDestLen)
		}, "first handshake: 20 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair()
			done := hostilePerftestServer(t, b, tc.script)
			cfg := a.perftestConfig(netip.AddrPortFrom(b.ip, 0), verbsprobe.TestBandwidth, verbsprobe.OpWrite, 10, 4096)
			cfg.Timeout = 3 * time.Second
			r := Run(context.Background(), Perftest, Client, cfg)
			<-done
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("error %v, want %q", r.Err, tc.want)
			}
			if r.Measurement != nil {
				t.Errorf("measured %+v against a hostile server", r.Measurement)
			}
			a.clean(t)
			b.clean(t)
		})
	}
}

// A hostile client against the server: absurd system data, and a bw
// report that is no measurement.
func TestPerftestServerHostileClient(t *testing.T) {
	v := make([]byte, 16)
	copy(v, "6.06")
	for _, tc := range []struct {
		name   string
		script func(ctx context.Context, c ctrl)
		want   string
	}{
		{"huge_cycle_buffer", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(0x7fffffff)), 4)
		}, "perftest's cycle buffer 2147483647"},
		{"zero_cache_line", func(ctx context.Context, c ctrl) {
			c.xchg(ctx, "version", fixed(v), 16)
			c.xchg(ctx, "cycle buffer", fixed(be32(4096)), 4)
			c.xchg(ctx, "cache line", fixed(be32(0)), 4)
		}, "perftest's cache line size 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair()
			done := make(chan *Result, 1)
			go func() {
				cfg := b.perftestConfig(netip.AddrPortFrom(b.ip, 0), verbsprobe.TestBandwidth, verbsprobe.OpWrite, 0, 4096)
				cfg.Timeout = 3 * time.Second
				done <- Run(context.Background(), Perftest, Server, cfg)
			}()
			waitListening(t, b, Perftest.Port())
			s := &session{res: &Result{}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.dial(ctx, a.config(netip.AddrPortFrom(b.ip, Perftest.Port()), 0, 0), 2, 1, ctrlBufLen, rdmaParam(), ctrlPrepare); err != nil {
				t.Fatal(err)
			}
			tc.script(ctx, ctrl{e: s.ep, client: true})
			r := <-done
			s.close()
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("error %v, want %q", r.Err, tc.want)
			}
			a.clean(t)
			b.clean(t)
		})
	}
}

func rdmaParam() rdmacm.ConnParam { return rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7} }

// perftest's server listens for the data connection only after it has
// answered the first handshake: the client's first REQs meet REJECTED,
// and it tries again (as perftest's does, 100 ms apart).
func TestPerftestDataConnectRetried(t *testing.T) {
	a, b := pair()
	done := hostilePerftestServer(t, b, func(ctx context.Context, c ctrl) {
		if _, err := c.setup(ctx, 0); err != nil {
			t.Error(err)
			return
		}
		if _, err := c.handshake(ctx, "first handshake", PerftestDest{}); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(250 * time.Millisecond)
		d := &session{res: &Result{}}
		defer d.close()
		if err := d.accept(ctx, b.config(netip.AddrPortFrom(b.ip, Perftest.Port()), 0, 0), 1, 1, 4096, func(*endpoint) error { return nil }); err != nil {
			t.Error(err)
		}
		// Then it goes away: the client fails later, which is not what
		// this test looks at.
	})
	cfg := a.perftestConfig(netip.AddrPortFrom(b.ip, 0), verbsprobe.TestBandwidth, verbsprobe.OpWrite, 10, 4096)
	cfg.Timeout = 1500 * time.Millisecond
	r := Run(context.Background(), Perftest, Client, cfg)
	<-done
	var connect *verbsprobe.Step
	for i, st := range r.Steps {
		if st.Name == "data connect" {
			connect = &r.Steps[i]
		}
	}
	if connect == nil || !connect.OK || !strings.Contains(connect.Detail, "REQs rejected: the server was not listening yet") {
		t.Errorf("data connect step %+v; steps %s", connect, stepNames(r))
	}
	a.clean(t)
	b.clean(t)
}

// TestRdAtomicLimit: a server grants a READ client perftest's out_reads
// (ib_read_bw -R asks 16), within what the device allows.
func TestRdAtomicLimit(t *testing.T) {
	fabric := uverbstest.NewFabric()
	for _, tc := range []struct {
		name          string
		rd, initRd    uint32
		want          uint8
		recordedAttrs bool
	}{
		{name: "rxe as recorded", recordedAttrs: true, want: outReads},
		{name: "device allows 4", rd: 4, initRd: 8, want: 4},
		{name: "device initiates 2", rd: 64, initRd: 2, want: 2},
		{name: "device says 0", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := uverbstest.Config{Name: "rxe" + strings.ReplaceAll(tc.name, " ", "_")}
			if !tc.recordedAttrs {
				a := recordedAttr(t, fabric)
				a.Base.MaxQPRdAtom, a.Base.MaxQPInitRdAtom = tc.rd, tc.initRd
				cfg.Attr = &a
			}
			c, err := fabric.NewDevice(cfg).Open()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := (&endpoint{c: c}).rdAtomicLimit()
			if err != nil || got != tc.want {
				t.Errorf("rdAtomicLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// recordedAttr is the fake device's recorded attributes (rxe's).
func recordedAttr(t *testing.T, fabric *uverbstest.Fabric) uverbs.DeviceAttrEx {
	t.Helper()
	c, err := fabric.NewDevice(uverbstest.Config{Name: "rxe_recorded"}).Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, _, err := c.QueryDeviceEx()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
