package verbsprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
)

// The exchange's error paths: a client against scripted servers, a
// server against scripted clients, and failures of either side's kernel
// (uverbstest's faults) reaching the other side by name.

// scriptedServer answers a client on a pipe with what answer writes,
// after reading its first line (or bytes).
func scriptedClient(t *testing.T, test Test, answer func(c net.Conn, rd *bufio.Reader)) *Result {
	t.Helper()
	p := newFakePair()
	ln := newPipeListener("10.10.0.1:18515")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		answer(c, bufio.NewReader(c))
	}()
	r := ConnectWith(context.Background(), fakeOptions(p.b), "10.10.0.1:18515",
		ConnectConfig{Test: test, Timeout: 2 * time.Second, Dial: ln.Dial})
	noneLeft(t, p.b)
	return r
}

func readLine(rd *bufio.Reader) []byte {
	line, _ := rd.ReadBytes('\n')
	return line
}

func writeMsg(c net.Conn, m wireMessage) {
	b, _ := json.Marshal(m)
	c.Write(append(b, '\n'))
}

func TestClientExchangeErrors(t *testing.T) {
	ibEnd := testEndpoint()
	ibEnd.LinkLayer, ibEnd.GIDIndex, ibEnd.GIDType, ibEnd.LID = ib.LinkLayerInfiniBand, -1, "", 7
	welcome := testEndpoint()
	for _, tt := range []struct {
		name   string
		answer func(c net.Conn, rd *bufio.Reader)
		want   string
	}{
		{"closes", func(c net.Conn, rd *bufio.Reader) { readLine(rd) },
			"the peer closed the connection without answering: not a grdma probe listener"},
		{"verdict", func(c net.Conn, rd *bufio.Reader) { readLine(rd); writeMsg(c, wireMessage{Type: msgVerdict, OK: true}) },
			`got a "verdict" message, want a welcome`},
		{"protocol 1", func(c net.Conn, rd *bufio.Reader) {
			readLine(rd)
			writeMsg(c, wireMessage{Type: msgWelcome, Protocol: 1, Endpoint: &welcome})
		}, "the peer speaks grdma probe protocol 1, this side 2"},
		{"refused incompatible", func(c net.Conn, rd *bufio.Reader) {
			readLine(rd)
			writeMsg(c, wireMessage{Type: msgFailed, Step: StepAccept, Error: "link layers differ", Endpoint: &ibEnd})
		}, "link layers differ: this side's rxe0/1 Ethernet, the peer's rxe0/1 InfiniBand"},
		{"welcome incompatible", func(c net.Conn, rd *bufio.Reader) {
			readLine(rd)
			writeMsg(c, wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &ibEnd})
		}, "link layers differ"},
		{"silent", func(c net.Conn, rd *bufio.Reader) { readLine(rd); time.Sleep(3 * time.Second) },
			"waiting for the queue pair of 10.10.0.1:18515: no answer within 2s"},
		{"ibv_rc_pingpong", func(c net.Conn, rd *bufio.Reader) {
			rd.Read(make([]byte, 52))
			a, _ := PingpongAddress{QPN: 5, PSN: 6}.MarshalBinary()
			c.Write(a)
			time.Sleep(time.Second)
		}, "it is an ibv_rc_pingpong server"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			r := scriptedClient(t, Test{Kind: TestTraffic}, tt.answer)
			if s := r.Failed(); s == nil || s.Name != StepConnect || !strings.Contains(s.Err.Error(), tt.want) {
				t.Errorf("%s: %v, want connect failing with %q", stepNames(r), r.Err(), tt.want)
			}
		})
	}
	// The verdict: the server's own checks failed.
	p := newFakePair()
	r := p.serveScripted(t, func(s *session) {
		// A real server's side, but its verdict says no.
		s.expect(msgDone, "")
		s.send(wireMessage{Type: msgVerdict, OK: false, Step: StepSend, Error: "SEND payload differs"})
	})
	var remote *RemoteFailure
	if !errors.As(r.Err(), &remote) || remote.Step != StepSend || r.Failed().Name != StepFinish {
		t.Errorf("a negative verdict: %s: %v", stepNames(r), r.Err())
	}
	// Nothing listens.
	ln := newPipeListener("10.10.0.1:18515")
	ln.Close()
	r = ConnectWith(context.Background(), fakeOptions(p.b), "10.10.0.1:18515", ConnectConfig{Timeout: 300 * time.Millisecond, Dial: ln.Dial})
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "connection refused for 300ms") {
		t.Errorf("nothing listening: %v", err)
	}
}

// serveScripted runs a real server exchange up to its welcome, then
// script instead of the test and verdict; the client runs traffic.
func (p *fakePair) serveScripted(t *testing.T, script func(s *session)) *Result {
	t.Helper()
	ln := newPipeListener("10.10.0.2:40000")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s := &session{role: RoleServer, conn: c, rd: bufio.NewReader(c), timeout: 2 * time.Second}
		defer s.close()
		m, err := s.readMessage()
		if err != nil {
			return
		}
		// Welcome with the client's own queue pair: the client's RTR
		// succeeds (it connects to itself), and its test runs.
		e := *m.Endpoint
		s.send(wireMessage{Type: msgWelcome, Protocol: ProtocolVersion, Endpoint: &e})
		script(s)
	}()
	return ConnectWith(context.Background(), fakeOptions(p.b), "10.10.0.1:18515",
		ConnectConfig{Test: Test{Kind: TestConnect}, Timeout: 2 * time.Second, Dial: ln.Dial})
}

// A step that fails on either side is named on the other.
func TestFailuresCrossTheExchange(t *testing.T) {
	for _, tt := range []struct {
		name       string
		server     bool // the fault is the server's
		fault      uverbstest.Fault
		test       Test
		step, peer string // the failing side's step; the other side's
	}{
		{"server REG_MR", true, uverbstest.Fault{Op: uverbstest.OpRegMR, Nth: 1, Err: unix.ENOMEM}, Test{Kind: TestTraffic}, StepRegMR, StepConnect},
		{"server RTR", true, uverbstest.Fault{Op: uverbstest.OpModifyQP, Nth: 2, Err: unix.EINVAL}, Test{Kind: TestTraffic}, StepRTR, StepConnect},
		{"client RTS", false, uverbstest.Fault{Op: uverbstest.OpModifyQP, Nth: 3, Err: unix.EINVAL}, Test{Kind: TestTraffic}, StepRTS, StepSend},
		{"client CREATE_QP", false, uverbstest.Fault{Op: uverbstest.OpCreateQP, Nth: 1, Err: unix.ENOMEM}, Test{Kind: TestBandwidth}, StepCreateQP, StepAccept},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			p := newFakePair()
			faulty, other := p.b, p.a
			if tt.server {
				faulty, other = p.a, p.b
			}
			faulty.Inject(tt.fault)
			s, c := p.probe(t, ServeConfig{Timeout: time.Second}, ConnectConfig{Test: tt.test, Timeout: time.Second})
			failing, told := c, s
			if tt.server {
				failing, told = s, c
			}
			if f := failing.Failed(); f == nil || f.Name != tt.step || f.Err.Errno() != tt.fault.Err {
				t.Errorf("the faulty side: %s: %v, want %s failing with %v", stepNames(failing), failing.Err(), tt.step, tt.fault.Err)
			}
			f := told.Failed()
			var remote *RemoteFailure
			if tt.step == StepCreateQP {
				// The client failed before it said anything: the server waits
				// for a peer until its timeout.
				if f == nil || f.Name != StepAccept || !strings.Contains(f.Err.Error(), "no peer connected within 1s") {
					t.Errorf("the server: %s: %v", stepNames(told), told.Err())
				}
			} else if f == nil || f.Name != tt.peer || !errors.As(f.Err, &remote) || remote.Step != tt.step {
				t.Errorf("the other side: %s: %v, want %s failing with the peer's %s", stepNames(told), told.Err(), tt.peer, tt.step)
			}
			noneLeft(t, faulty, other)
		})
	}
}

// Port states, drivers and the device vanishing, on the fake kernel.
func TestDeviceFaultsOnFake(t *testing.T) {
	d := uverbstest.NewDevice(uverbstest.Config{Name: "rxe0"})
	d.SetPortState(1, ib.PortDown)
	r := Run(context.Background(), fakeOptions(d))
	var down *PortNotActiveError
	if f := r.Failed(); f == nil || f.Name != StepQueryPort || !errors.As(f.Err, &down) || down.State != ib.PortDown ||
		f.Err.Error() != "query_port: port rxe0/1 is DOWN, not ACTIVE" {
		t.Errorf("port down: %s: %v", stepNames(r), r.Err())
	}
	noneLeft(t, d)

	other := uverbstest.NewDevice(uverbstest.Config{Name: "hfi1_0", Driver: "hfi1"})
	r = Run(context.Background(), fakeOptions(other))
	if r.Unsupported == "" || !strings.Contains(r.Unsupported, "driver hfi1 not supported by the probe") || stepNames(r) !=
		"open,query_device,query_port,address,alloc_pd,dealloc_pd,close" {
		t.Errorf("another driver: %s: %q", stepNames(r), r.Unsupported)
	}
	if err := Outcome(r, 1, 1); err == nil || !strings.Contains(err.Error(), "probe hfi1_0/1: driver hfi1 not supported") {
		t.Errorf("Outcome = %v", err)
	}
	dev, res := OpenDevice(context.Background(), fakeOptions(other))
	if dev == nil || res.Unsupported == "" {
		t.Fatalf("OpenDevice of another driver: %v, %q", res.Err(), res.Unsupported)
	}
	if err := Respond(context.Background(), dev, newPipeListener("10.0.0.2:1"), ResponderConfig{}); err == nil ||
		!strings.Contains(err.Error(), "not supported") {
		t.Errorf("Respond on another driver: %v", err)
	}
	dev.Close()
	noneLeft(t, other)

	// The device vanishes before its Conn's first step: every command is
	// EIO, the failure names its step, nothing is left in the kernel's
	// tables of the fake (it closed the context).
	gone := uverbstest.NewDevice(uverbstest.Config{Name: "rxe0"})
	dev, res = OpenDevice(context.Background(), fakeOptions(gone))
	if dev == nil {
		t.Fatal(res.Err())
	}
	gone.Remove()
	x := selfExchange{traffic: true}
	res = &Result{}
	rec := newRecorder(context.Background(), res, &dev.target)
	run(rec, dev, x)
	if f := res.Failed(); f == nil || f.Name != StepCreateCQ || f.Err.Errno() != unix.EIO {
		t.Errorf("after Remove: %s: %v", stepNames(res), res.Err())
	}
	dev.Close()
}

func TestOutcome(t *testing.T) {
	ok := &Result{Device: "rxe0", Port: 1}
	if err := Outcome(ok, 3, 3); err != nil {
		t.Errorf("all passed: %v", err)
	}
	if err := Outcome(ok, 2, 3); err == nil || err.Error() != "probe rxe0/1 interrupted after 2 of 3 runs, all passed" {
		t.Errorf("interrupted: %v", err)
	}
	failed := &Result{Device: "rxe0", Port: 1, Steps: []Step{{Name: StepRegMR, Err: &StepError{Step: StepRegMR, Err: unix.ENOMEM, Cause: "RLIMIT_MEMLOCK"}}}}
	if err := Outcome(failed, 2, 5); err == nil || err.Error() != "probe rxe0/1 failed at reg_mr (run 2 of 5): cannot allocate memory\n  likely cause: RLIMIT_MEMLOCK" {
		t.Errorf("failed: %v", err)
	}
}

// ibv_rc_pingpong's exchange: a server whose address is not one, or has
// no GID on RoCE; a client whose "done" is not.
func TestPingpongExchangeErrors(t *testing.T) {
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"garbage", strings.Repeat("x", 51) + "\x00", "not an ibv_rc_pingpong address"},
		{"no GID", "0000:000011:abcdef:00000000000000000000000000000000\x00", "the ibv_rc_pingpong peer sent no GID: on RoCE run it with -g INDEX"},
		{"short", "0000:0000", "the peer closed the connection"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			r := scriptedClient(t, Test{Kind: TestPingpong, Iters: 5}, func(c net.Conn, rd *bufio.Reader) {
				rd.Read(make([]byte, pingpongAddressLen))
				c.Write([]byte(tt.addr))
			})
			if s := r.Failed(); s == nil || s.Name != StepConnect || !strings.Contains(s.Err.Error(), tt.want) {
				t.Errorf("%s: %v, want %q", stepNames(r), r.Err(), tt.want)
			}
		})
	}
	// A client that sends its address, takes the server's and then not
	// "done".
	p := newFakePair()
	ln := newPipeListener("10.10.0.2:40000")
	done := make(chan *Result, 1)
	go func() { done <- Serve(context.Background(), fakeOptions(p.a), ln, ServeConfig{Timeout: time.Second}) }()
	c, err := ln.Dial(context.Background(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := PingpongAddress{QPN: 0x11, PSN: 1, GID: p.b.GID(1)}.MarshalBinary()
	c.Write(a)
	io.ReadFull(c, make([]byte, pingpongAddressLen))
	c.Write([]byte("nope\x00"))
	r := <-done
	c.Close()
	if s := r.Failed(); s == nil || s.Name != StepWelcome || !strings.Contains(s.Err.Error(), `got "nope\x00", want "done\x00"`) {
		t.Errorf("a wrong done: %s: %v", stepNames(r), r.Err())
	}
	noneLeft(t, p.a)
}

// cmLike is an exchange as RDMA CM's active side will be: it chooses the
// device port (its route's) and gives each transition its attributes
// (INIT_QP_ATTR's answers), here over a queue pair connected to itself.
type cmLike struct {
	selfExchange
	dev   string
	calls []ib.QPState
}

func (x *cmLike) ChooseDevice(_ context.Context, opts Options) (Options, string, error) {
	opts.Device, opts.Port = x.dev, 1
	return opts, "resolved to " + x.dev + "/1", nil
}

func (x *cmLike) QPAttr(_ context.Context, c *Conn, attr uverbs.QPAttr, mask uverbs.QPAttrMask) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	x.calls = append(x.calls, attr.State)
	if attr.State == ib.QPStateRTR {
		attr.PathMTU = ib.MTU512 // the kernel's answer, not grdma's
	}
	return attr, mask, nil
}

// An exchange chooses the device and the transitions' attributes without
// the probe knowing it: the seam RDMA CM plugs into.
func TestExchangeChoosesDeviceAndAttributes(t *testing.T) {
	d := uverbstest.NewDevice(uverbstest.Config{Name: "rxe7"})
	x := &cmLike{dev: "rxe7"}
	opts := fakeOptions(d)
	opts.Device = "" // the exchange knows
	res := probe(context.Background(), opts, x, newResult(opts))
	if !res.OK() || !strings.HasPrefix(stepNames(res), "resolve,open,") || res.Device != "rxe7" ||
		res.Steps[0].Detail != "resolved to rxe7/1" {
		t.Fatalf("%s: %v", stepNames(res), res.Err())
	}
	if fmt.Sprint(x.calls) != "[INIT RTR RTS]" {
		t.Errorf("QPAttr was asked for %v", x.calls)
	}
	for _, s := range res.Steps {
		if s.Name == StepRTR && s.Detail != "to qpn "+fmt.Sprint(res.QPN)+", path MTU 512" {
			t.Errorf("RTR: %q", s.Detail)
		}
	}
	noneLeft(t, d)
}
