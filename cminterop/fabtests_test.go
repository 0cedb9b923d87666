package cminterop

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// ctrlLoopback gives a fabtests server on the fake CM a control port on
// the loopback (the fake hosts' addresses are not the machine's), and
// its client a dialer to it.
type ctrlLoopback struct{ addr chan string }

func newCtrlLoopback() *ctrlLoopback { return &ctrlLoopback{addr: make(chan string, 1)} }

func (c *ctrlLoopback) listen(netip.AddrPort) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		c.addr <- l.Addr().String()
	}
	return l, err
}

func (c *ctrlLoopback) dial(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", <-c.addr)
}

// fabtestsPair runs this package's fabtests server on b and its client
// on a, which speak fi_pingpong's protocol to each other.
// A timeout of 0 is the fake hosts' (10 s).
func fabtestsPair(t *testing.T, cliIters, srvIters, cliSize, srvSize int, timeout time.Duration) (cli, srv *Result) {
	t.Helper()
	a, b := pair()
	lo := newCtrlLoopback()
	done := make(chan *Result, 1)
	scfg := b.config(netip.AddrPortFrom(b.ip, 0), srvIters, srvSize)
	scfg.ctrlListen = lo.listen
	ccfg := a.config(netip.AddrPortFrom(b.ip, 0), cliIters, cliSize)
	ccfg.ctrlDial = lo.dial
	if timeout != 0 {
		scfg.Timeout, ccfg.Timeout = timeout, timeout
	}
	go func() { done <- Run(context.Background(), Fabtests, Server, scfg) }()
	cli = Run(context.Background(), Fabtests, Client, ccfg)
	srv = <-done
	a.clean(t)
	b.clean(t)
	return cli, srv
}

func TestFabtestsPair(t *testing.T) {
	cli, srv := fabtestsPair(t, 7, 7, 100, 0, 0)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	// The server answers with the size it receives (fi_pingpong sends
	// its -S nowhere).
	if cli.Count != 7 || srv.Count != 7 || cli.Size != 100 || srv.Size != 100 || cli.Bytes != 1400 || srv.Bytes != 1400 {
		t.Errorf("client %d×%d (%d bytes), server %d×%d (%d bytes)", cli.Count, cli.Size, cli.Bytes, srv.Count, srv.Size, srv.Bytes)
	}
	if cli.Elapsed <= 0 || srv.Elapsed <= 0 {
		t.Errorf("elapsed %v, %v", cli.Elapsed, srv.Elapsed)
	}
	if got, want := stepNames(cli), "fabtests control,open,resolve address,resolve route,connect,establish,fabtests,disconnect"; got != want {
		t.Errorf("client steps\n%s, want\n%s", got, want)
	}
	if got, want := stepNames(srv), "listen,fabtests control,request,establish,fabtests,disconnect"; got != want {
		t.Errorf("server steps\n%s, want\n%s", got, want)
	}
	// The client connects where the name says: the server's address and
	// the control port's number.
	if cli.CM.Device != "rxe0" || srv.CM.Device != "rxe1" || cli.CM.Dst.Port() != Fabtests.Port() {
		t.Errorf("what the CM chose: %+v; %+v", cli.CM, srv.CM)
	}
}

func TestFabtestsDefaults(t *testing.T) {
	cli, srv := fabtestsPair(t, 0, 0, 0, 0, 0)
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if cli.Count != DefaultFabtestsIters || cli.Size != DefaultFabtestsSize || srv.Size != DefaultFabtestsSize {
		t.Errorf("client %d×%d, server %d×%d", cli.Count, cli.Size, srv.Count, srv.Size)
	}
}

// A client that sends more than the server's iters: the server refuses
// the count, and both end with nothing left behind.
func TestFabtestsItersDiffer(t *testing.T) {
	cli, srv := fabtestsPair(t, 4, 3, 0, 0, 2*time.Second)
	if cli.Err == nil || srv.Err == nil {
		t.Fatalf("client %v, server %v: want both failed", cli.Err, srv.Err)
	}
	if !strings.Contains(srv.Err.Error(), "the client's count message") && !strings.Contains(srv.Err.Error(), "-I must be iters") {
		t.Errorf("server: %v", srv.Err)
	}
}

func TestFabtestsName(t *testing.T) {
	for _, s := range []string{"10.0.0.2:47592", "[fd00::2]:5000", "[fe80::2%3]:5000"} {
		ap := netip.MustParseAddrPort(s)
		b, _ := FabtestsName{Addr: ap}.MarshalBinary()
		n, err := readFabtestsName(bytes.NewReader(b))
		if err != nil || n.Addr != ap {
			t.Errorf("%s: read back %v, %v", s, n.Addr, err)
		}
	}
	// What fi_pingpong -e msg -p verbs sends for 10.0.0.2, port 0xc0de:
	// length 16, FI_SOCKADDR_IN, a struct sockaddr_in.
	want := []byte{0, 0, 0, 16, 2, 0, 0, 0, 2, 0, 0xc0, 0xde, 10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}
	b, _ := FabtestsName{Addr: netip.MustParseAddrPort("10.0.0.2:49374")}.MarshalBinary()
	if !bytes.Equal(b, want) {
		t.Errorf("name % x, want % x", b, want)
	}
}

// A server that names absurd endpoint names: refused before anything is
// allocated for them or connected to, and nothing is left behind.
func TestFabtestsHostileServer(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	huge = binary.LittleEndian.AppendUint32(huge, fiSockaddrIn)
	ib := binary.BigEndian.AppendUint32(nil, 48)
	ib = binary.LittleEndian.AppendUint32(ib, 4) // FI_SOCKADDR_IB
	ib = append(ib, make([]byte, 48)...)
	zero, _ := FabtestsName{Addr: netip.MustParseAddrPort("0.0.0.0:0")}.MarshalBinary()
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"huge name", huge, "endpoint name of 4294967295 bytes"},
		{"not a socket address", ib, "not an IPv4 or IPv6 socket address"},
		{"no port", zero, "has no port"},
		{"short", []byte{0, 0, 0}, "the server's endpoint name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := pair()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Write(tc.send)
				c.Close()
			}()
			cfg := a.config(netip.MustParseAddrPort("10.0.0.2:47592"), 0, 0)
			cfg.ctrlDial = func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", l.Addr().String())
			}
			r := Run(context.Background(), Fabtests, Client, cfg)
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("error %v, want %q", r.Err, tc.want)
			}
			if got := stepNames(r); got != "fabtests control" {
				t.Errorf("steps %s: want it ended at the control connection", got)
			}
			a.clean(t)
		})
	}
}

// A client whose count message is not a count is refused.
func TestParseFabtestsCount(t *testing.T) {
	if n, err := parseFabtestsCount(fabtestsCount(1234)); n != 1234 || err != nil {
		t.Errorf("1234: %d, %v", n, err)
	}
	for _, b := range [][]byte{[]byte("-1\x00\x00\x00\x00\x00\x00\x00\x00"), []byte("12ab\x00\x00\x00\x00\x00\x00"), make([]byte, 10)} {
		if n, err := parseFabtestsCount(b); err == nil {
			t.Errorf("%q: %d accepted", b, n)
		}
	}
}

func TestFabtestsValidate(t *testing.T) {
	for _, cfg := range []Config{{Size: MaxSize + 1}, {Size: -1}, {Count: MaxFabtestsIters + 1}, {Count: -1}} {
		if err := cfg.Validate(Fabtests, false); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// A server given a size refuses a client's message of another.
func TestFabtestsSizeDiffers(t *testing.T) {
	cli, srv := fabtestsPair(t, 2, 2, 100, 64, 2*time.Second)
	if cli.Err == nil || srv.Err == nil || !strings.Contains(srv.Err.Error(), "has 100 bytes, not size 64") {
		t.Fatalf("client %v, server %v: want both failed, the server naming the sizes", cli.Err, srv.Err)
	}
}

// TestFabtestsServerStrayClients plays clients that are not fi_pingpong
// on the control port: one that leaves at once, one that reads the name
// and leaves, one that writes first. None spends the run: the real
// client after them is served, and nothing is left behind.
func TestFabtestsServerStrayClients(t *testing.T) {
	a, b := pair()
	lo := newCtrlLoopback()
	listening := make(chan string, 1)
	scfg := b.config(netip.AddrPortFrom(b.ip, 0), 5, 0)
	scfg.ctrlListen = func(ap netip.AddrPort) (net.Listener, error) {
		l, err := lo.listen(ap)
		if err == nil {
			listening <- <-lo.addr
		}
		return l, err
	}
	done := make(chan *Result, 1)
	go func() { done <- Run(context.Background(), Fabtests, Server, scfg) }()
	addr := <-listening
	strays := []func(c net.Conn){
		func(c net.Conn) {},
		func(c net.Conn) {
			if _, err := readFabtestsName(c); err != nil {
				t.Errorf("a stray client's name: %v", err)
			}
		},
		func(c net.Conn) {
			readFabtestsName(c)
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			// The server closes a client that writes first.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("a client that wrote first read %d more bytes, want its connection closed", n)
			}
		},
	}
	for _, stray := range strays {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		stray(c)
		c.Close()
	}
	lo.addr <- addr
	ccfg := a.config(netip.AddrPortFrom(b.ip, 0), 5, 0)
	ccfg.ctrlDial = lo.dial
	cli := Run(context.Background(), Fabtests, Client, ccfg)
	srv := <-done
	if cli.Err != nil || srv.Err != nil {
		t.Fatalf("client: %v; server: %v", cli.Err, srv.Err)
	}
	if cli.Count != 5 || srv.Count != 5 {
		t.Errorf("client %d, server %d messages", cli.Count, srv.Count)
	}
	if d := srv.Steps[1].Detail; srv.Steps[1].Name != "fabtests control" || !strings.Contains(d, "after 3 TCP clients that left without connecting") {
		t.Errorf("the server's control step: %+v", srv.Steps[1])
	}
	a.clean(t)
	b.clean(t)
}
