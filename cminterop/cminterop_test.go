package cminterop

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/verbsprobe"
)

// pair is two fake hosts on one fabric and one CM.
func pair() (a, b *fakeHost) {
	n := newFakeNet()
	return n.host("rxe0", "10.0.0.1"), n.host("rxe1", "10.0.0.2")
}

// serve runs a server of mode m on b in a goroutine; the result comes
// on the channel.
func serve(b *fakeHost, m Mode, count, size int) <-chan *Result {
	done := make(chan *Result, 1)
	go func() {
		done <- Run(context.Background(), m, Server, b.config(netip.AddrPortFrom(b.ip, 0), count, size))
	}()
	return done
}

// waitListening waits until b listens on port.
func waitListening(t *testing.T, b *fakeHost, port uint16) {
	t.Helper()
	for range 2000 {
		if b.net.Listening(netip.AddrPortFrom(b.ip, port)) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the server does not listen")
}

func stepNames(r *Result) string {
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

func TestRping(t *testing.T) {
	a, b := pair()
	done := serve(b, Rping, 0, 0)
	waitListening(t, b, Rping.Port())
	cli := Run(context.Background(), Rping, Client, a.config(netip.AddrPortFrom(b.ip, 0), 3, 100))
	srv := <-done
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if cli.Count != 3 || srv.Count != 3 || cli.Size != 100 || srv.Size != 100 || cli.Bytes != 600 {
		t.Errorf("client %d×%d (%d bytes), server %d×%d", cli.Count, cli.Size, cli.Bytes, srv.Count, srv.Size)
	}
	if want := "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"[:SampleLen]; srv.Sample != want {
		t.Errorf("sample %q, want %q", srv.Sample, want)
	}
	if got, want := stepNames(cli), "open,resolve address,resolve route,connect,establish,rping,disconnect"; got != want {
		t.Errorf("client steps %s, want %s", got, want)
	}
	if got, want := stepNames(srv), "listen,request,establish,rping,disconnect"; got != want {
		t.Errorf("server steps %s, want %s", got, want)
	}
	ci := cli.CM
	if cli.Device != "rxe0" || ci.Port != 1 || ci.GIDIndex != 1 || ci.RoCE != "RoCE v2" || ci.Dst != netip.MustParseAddrPort("10.0.0.2:7174") ||
		ci.HopLimit != 64 || ci.PathMTU.Bytes() != 1024 || len(ci.Steps) != 5 {
		t.Errorf("what the CM chose: %+v", ci)
	}
	if srv.Device != "rxe1" || srv.CM.Dst.Addr() != a.ip {
		t.Errorf("server's CM: %+v", srv.CM)
	}
	a.clean(t)
	b.clean(t)
}

func TestUcmatose(t *testing.T) {
	a, b := pair()
	done := serve(b, Ucmatose, 5, 300)
	waitListening(t, b, Ucmatose.Port())
	cli := Run(context.Background(), Ucmatose, Client, a.config(netip.AddrPortFrom(b.ip, 0), 5, 300))
	srv := <-done
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if cli.Count != 5 || srv.Count != 5 || cli.Bytes != 3000 {
		t.Errorf("client %d (%d bytes), server %d", cli.Count, cli.Bytes, srv.Count)
	}
	if got, want := stepNames(cli), "open,resolve address,resolve route,connect,establish,ucmatose,wait for the server's disconnect,disconnect"; got != want {
		t.Errorf("client steps %s, want %s", got, want)
	}
	a.clean(t)
	b.clean(t)
}

func TestToSAndDevice(t *testing.T) {
	a, b := pair()
	done := serve(b, Ucmatose, 1, 0)
	waitListening(t, b, Ucmatose.Port())
	cfg := a.config(netip.AddrPortFrom(b.ip, 0), 1, 0)
	tos := uint8(96)
	cfg.ToS = &tos
	cli := Run(context.Background(), Ucmatose, Client, cfg)
	if srv := <-done; cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if cli.CM.TrafficClass != 96 {
		t.Errorf("ToS %d, want 96", cli.CM.TrafficClass)
	}
	cfg.Device = "mlx5_0"
	r := Run(context.Background(), Rping, Client, cfg)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "the CM chose rxe0 for 10.0.0.2:7174, not mlx5_0") {
		t.Errorf("error %v", r.Err)
	}
	a.clean(t)
	b.clean(t)
}

func TestRejectedNothingListens(t *testing.T) {
	a, b := pair()
	r := Run(context.Background(), Rping, Client, a.config(netip.AddrPortFrom(b.ip, 0), 1, 0))
	var e *rdmacm.Error
	if !errors.As(r.Err, &e) || e.Event != rdmacm.EventRejected {
		t.Fatalf("error %v; want REJECTED", r.Err)
	}
	var se *verbsprobe.StepError
	if !errors.As(r.Err, &se) || se.Step != verbsprobe.CMStepConnect {
		t.Errorf("error %v; want step connect", r.Err)
	}
	a.clean(t)
}

func TestAddrError(t *testing.T) {
	a, _ := pair()
	r := Run(context.Background(), Ucmatose, Client, a.config(netip.MustParseAddrPort("10.99.0.1:0"), 1, 0))
	var e *rdmacm.Error
	if !errors.As(r.Err, &e) || e.Event != rdmacm.EventAddrError {
		t.Fatalf("error %v; want ADDR_ERROR", r.Err)
	}
	a.clean(t)
}

func TestServerTimeout(t *testing.T) {
	_, b := pair()
	cfg := b.config(netip.AddrPortFrom(b.ip, 0), 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Run(ctx, Rping, Server, cfg)
	if !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("error %v; want canceled", r.Err)
	}
	b.clean(t)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		m      Mode
		cfg    Config
		server bool
		want   string
	}{
		{Rping, Config{Size: 25}, false, "rping takes 26 to 65535"},
		{Rping, Config{Size: 65536}, false, "rping takes 26 to 65535"},
		{Rping, Config{Count: -1}, false, "must not be negative"},
		{Ucmatose, Config{Count: MaxCount + 1}, false, "1 to 1024 messages"},
		{Ucmatose, Config{Count: 1024, Size: 65535}, true, "at most 16777216 bytes"},
		{Mode("nope"), Config{}, false, "no peer protocol"},
	} {
		err := tc.cfg.Validate(tc.m, tc.server)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v; want %q", tc.m, tc.cfg, err, tc.want)
		}
	}
	if err := (Config{Count: 10, Size: 64}).Validate(Rping, false); err != nil {
		t.Error(err)
	}
}

func TestRpingInfo(t *testing.T) {
	m := RpingInfo{Addr: 0x1122334455667788, RKey: 0xaabbccdd, Size: 64}
	b, _ := m.MarshalBinary()
	if want := "1122334455667788aabbccdd00000040"; strings.ToLower(hex(b)) != want {
		t.Errorf("% x, want %s", b, want)
	}
	var got RpingInfo
	if err := got.UnmarshalBinary(b); err != nil || got != m {
		t.Errorf("%+v, %v", got, err)
	}
	if err := got.UnmarshalBinary(b[:15]); err == nil {
		t.Error("15 bytes decoded")
	}
	d := RpingData(1, 30)
	if string(d[:16]) != "rdma-ping-1: BCD" || d[29] != 0 {
		t.Errorf("%q", d)
	}
}

func hex(b []byte) string {
	const digits = "0123456789abcdef"
	var s []byte
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

// The attacker's side: a session of this package that then sends what
// it likes. It ends when the victim's run has returned.
type attacker struct {
	s   *session
	res *Result
}

func attackAsClient(t *testing.T, a *fakeHost, dst netip.AddrPort, recvs int, size int) *attacker {
	t.Helper()
	at := &attacker{res: &Result{}}
	at.s = &session{res: at.res}
	err := at.s.dial(context.Background(), a.config(dst, 0, 0), 8, uint32(recvs), size, rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7},
		func(e *endpoint) error {
			for i := range recvs {
				if err := e.postRecv(recvID(i), 0, 64); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func attackAsServer(t *testing.T, b *fakeHost, port uint16, recvs int, size int) <-chan *attacker {
	t.Helper()
	ch := make(chan *attacker, 1)
	go func() {
		at := &attacker{res: &Result{}}
		at.s = &session{res: at.res}
		at.s.accept(context.Background(), b.config(netip.AddrPortFrom(b.ip, port), 0, 0), 8, uint32(recvs), size, func(e *endpoint) error {
			for i := range recvs {
				if err := e.postRecv(recvID(i), 0, 64); err != nil {
					return err
				}
			}
			return nil
		})
		ch <- at
	}()
	waitListening(t, b, port)
	return ch
}

// send sends n bytes of the buffer (filled with fill first) and waits
// for the completion; a peer that already gave up may fail it.
func (at *attacker) send(fill []byte, n int) {
	e := at.s.ep
	copy(e.buf[1024:], fill)
	if err := e.post(uverbs.SendWR{ID: wrSend, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{e.sge(1024, n)}}); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.completion(ctx, wrSend, "attacker's SEND")
}

func (at *attacker) close() { at.s.close() }

// A hostile client against the rping server: wrong lengths, lying sizes,
// a key that opens nothing. The server fails the run with an error that
// says what the client did, and leaves nothing.
func TestRpingServerHostileClient(t *testing.T) {
	big, _ := RpingInfo{Addr: 0x1000, RKey: 1, Size: 1 << 31}.MarshalBinary()
	zero, _ := RpingInfo{Addr: 0x1000, RKey: 1, Size: 0}.MarshalBinary()
	badKey, _ := RpingInfo{Addr: 0x1000, RKey: 0xdead, Size: 64}.MarshalBinary()
	garbage := []byte(strings.Repeat("\xff\x00garbage", 8))
	for _, tc := range []struct {
		name string
		msg  []byte
		n    int
		want string
	}{
		{"long", garbage, 40, "a longer message fails it"},
		{"17", garbage, 17, "at least 17 bytes; rping's are 16"},
		{"short", garbage, 5, "5 bytes; rping's are 16"},
		{"lying_size", big, 16, "names a buffer of 2147483648 bytes"},
		{"zero_size", zero, 16, "names a buffer of 0 bytes"},
		{"bad_rkey", badKey, 16, "RDMA READ of 64 bytes from the client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair()
			done := serve(b, Rping, 0, 0)
			waitListening(t, b, Rping.Port())
			at := attackAsClient(t, a, netip.AddrPortFrom(b.ip, Rping.Port()), 2, 4096)
			at.send(tc.msg, tc.n)
			srv := <-done
			at.close()
			if srv.Err == nil || !strings.Contains(srv.Err.Error(), tc.want) {
				t.Errorf("server's error %v; want %q", srv.Err, tc.want)
			}
			a.clean(t)
			b.clean(t)
		})
	}
}

// A hostile rping server against the client: a go-ahead of the wrong
// length, and data written back that is not what was read.
func TestRpingClientHostileServer(t *testing.T) {
	t.Run("long_go_ahead", func(t *testing.T) {
		a, b := pair()
		ach := attackAsServer(t, b, 7174, 4, 4096)
		done := make(chan *Result, 1)
		go func() {
			done <- Run(context.Background(), Rping, Client, a.config(netip.AddrPortFrom(b.ip, 0), 1, 64))
		}()
		at := <-ach
		if at.res.Err != nil {
			t.Fatal(at.res.Err)
		}
		at.send([]byte(strings.Repeat("x", 100)), 100)
		cli := <-done
		at.close()
		// 100 bytes meet a receive of 17: the client's receive fails.
		if cli.Err == nil || !strings.Contains(cli.Err.Error(), "the receive of a 16-byte rping message (a longer message fails it)") {
			t.Errorf("client's error %v", cli.Err)
		}
		a.clean(t)
		b.clean(t)
	})
	t.Run("wrong_data", func(t *testing.T) {
		a, b := pair()
		ach := attackAsServer(t, b, 7174, 4, 4096)
		done := make(chan *Result, 1)
		go func() {
			done <- Run(context.Background(), Rping, Client, a.config(netip.AddrPortFrom(b.ip, 0), 1, 64))
		}()
		at := <-ach
		if at.res.Err != nil {
			t.Fatal(at.res.Err)
		}
		e := at.s.ep
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// First message: ignore what it names; say go ahead.
		if _, err := e.completion(ctx, recvID(0), "first"); err != nil {
			t.Fatal(err)
		}
		at.send(make([]byte, 16), 16)
		wc, err := e.completion(ctx, recvID(1), "second")
		if err != nil || wc.ByteLen != 16 {
			t.Fatalf("%v %+v", err, wc)
		}
		// The second names the client's buffer: write garbage there.
		var m RpingInfo
		m.UnmarshalBinary(e.buf[0:16])
		copy(e.buf[2048:], strings.Repeat("garbage!", 8))
		if err := e.post(uverbs.SendWR{ID: wrRDMA, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{e.sge(2048, int(m.Size))}, RemoteAddr: m.Addr, RKey: m.RKey}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.completion(ctx, wrRDMA, "write"); err != nil {
			t.Fatal(err)
		}
		at.send(make([]byte, 16), 16)
		cli := <-done
		at.close()
		if cli.Err == nil || !strings.Contains(cli.Err.Error(), "other data than it read") {
			t.Errorf("client's error %v", cli.Err)
		}
		a.clean(t)
		b.clean(t)
	})
}

// A hostile ucmatose server: messages of another size than agreed.
func TestUcmatoseClientHostileServer(t *testing.T) {
	a, b := pair()
	ach := attackAsServer(t, b, 7471, 4, 4096)
	done := make(chan *Result, 1)
	go func() {
		done <- Run(context.Background(), Ucmatose, Client, a.config(netip.AddrPortFrom(b.ip, 0), 2, 100))
	}()
	at := <-ach
	if at.res.Err != nil {
		t.Fatal(at.res.Err)
	}
	at.send([]byte("short"), 5)
	cli := <-done
	at.close()
	if cli.Err == nil || !strings.Contains(cli.Err.Error(), "message 1 of 2: 5 bytes") {
		t.Errorf("client's error %v", cli.Err)
	}
	a.clean(t)
	b.clean(t)
}
