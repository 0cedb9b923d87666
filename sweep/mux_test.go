package sweep

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grdma/grdma/verbsprobe"
)

// The listener plays against an attacker on the fleet's network: it reads
// at most one bounded line of a connection before deciding, bounds the
// connections it reads at once and the wait for them, refuses what is not
// a partner's, and keeps none of a stranger's text unescaped.

func testListener(t *testing.T, timeout time.Duration) (*listener, *state, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := &state{sweep: "abc123", about: "all-pairs of 4 hosts", rank: 1, n: 4, round: 2,
		down: map[int]string{}, skipped: map[int]string{}, others: map[int]string{}}
	l := newListener(ln, st, timeout)
	go l.serve()
	t.Cleanup(l.close)
	return l, st, ln.Addr().String()
}

// exchange sends one line and reads the one reply line ("" when the
// listener closed the connection without one).
func exchange(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return ""
	}
	reply, _ := bufio.NewReader(c).ReadString('\n')
	return reply
}

func TestListenerRefuses(t *testing.T) {
	_, st, addr := testListener(t, 2*time.Second)
	hello := func(m message) string {
		m.Version, m.Type = ProtocolVersion, msgHello
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", "GET / HTTP/1.1", ""},
		{"another protocol's JSON", `{"jsonrpc":"2.0"}`, ""},
		{"a newer protocol", `{"grdma_sweep":9,"type":"hello"}`, "grdma sweep protocol 9"},
		{"other parameters", hello(message{Sweep: "other", Round: 2, From: 0, To: 1, About: "quick of 4 hosts"}), "parameters differ: this node runs all-pairs of 4 hosts; the partner runs quick of 4 hosts"},
		{"another rank", hello(message{Sweep: "abc123", Round: 2, From: 0, To: 3}), "the partner asked for rank 3"},
		{"a rank outside the fleet", hello(message{Sweep: "abc123", Round: 2, From: 99, To: 1}), "rank 99"},
		{"itself", hello(message{Sweep: "abc123", Round: 2, From: 1, To: 1}), "from rank 1"},
		{"a round past", hello(message{Sweep: "abc123", Round: 1, From: 0, To: 1}), `"type":"gone"`},
		{"a round ahead", hello(message{Sweep: "abc123", Round: 5, From: 0, To: 1}), `"type":"wait"`},
		{"an unknown type", `{"grdma_sweep":1,"type":"shell","from":0,"to":1}`, ""},
		{"a probe hello with no slot open", `{"grdma_probe":1,"type":"hello","test":{"kind":"bw","size":268435456}}`, ""},
	} {
		if got := exchange(t, addr, tc.line); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reply %q, want %q", tc.name, got, tc.want)
		}
	}
	// Ranks outside the fleet in "down" are ignored; in range, learnt.
	exchange(t, addr, `{"grdma_sweep":1,"type":"status","from":0,"down":[-1,2,4,1000000,1]}`)
	st.mu.Lock()
	down := st.downList()
	st.mu.Unlock()
	if fmt.Sprint(down) != "[2]" {
		t.Errorf("down after a status with bogus ranks: %v, want [2]", down)
	}
}

// A probe connection reaches the test being served only from the
// partner's address and asking for the planned test: a stranger asking
// for a 256 MiB buffer gets nothing pinned.
func TestListenerProbeSlot(t *testing.T) {
	_, st, addr := testListener(t, 2*time.Second)
	planned := DefaultBW.WithDefaults()
	ch := make(chan net.Conn, 1)
	st.mu.Lock()
	st.slot = &slot{ips: []net.IP{net.ParseIP("127.0.0.1")}, test: planned, ch: ch}
	st.mu.Unlock()
	probe := func(t verbsprobe.Test) string {
		b, _ := json.Marshal(map[string]any{"grdma_probe": 1, "type": "hello", "test": t})
		return string(b)
	}
	big := planned
	big.Size = verbsprobe.MaxTestSize
	exchange(t, addr, probe(big))
	select {
	case c := <-ch:
		t.Fatalf("a hello for another test was handed over: %v", c.RemoteAddr())
	case <-time.After(100 * time.Millisecond):
	}
	st.mu.Lock()
	st.slot.ips = []net.IP{net.ParseIP("192.0.2.99")}
	st.mu.Unlock()
	exchange(t, addr, probe(planned))
	select {
	case <-ch:
		t.Fatal("a connection from another address was handed over")
	case <-time.After(100 * time.Millisecond):
	}
	st.mu.Lock()
	st.slot.ips = []net.IP{net.ParseIP("127.0.0.1")}
	st.mu.Unlock()
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	line := probe(planned)
	c.Write([]byte(line + "\n"))
	select {
	case got := <-ch:
		// The handed connection replays the line it was chosen by.
		back, _ := bufio.NewReader(got).ReadString('\n')
		if strings.TrimSpace(back) != line {
			t.Errorf("replayed %q, want %q", back, line)
		}
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the partner's probe connection was not handed over")
	}
}

// Lines over the bound and connections that say nothing cost a bounded
// number of goroutines for a bounded time; the listener then still
// answers.
func TestListenerFlood(t *testing.T) {
	_, _, addr := testListener(t, 300*time.Millisecond)
	huge := strings.Repeat("x", maxLine+10)
	if got := exchange(t, addr, `{"grdma_sweep":1,"type":"status","about":"`+huge+`"}`); got != "" {
		t.Errorf("a line over %d bytes got a reply: %.80q", maxLine, got)
	}
	before := runtime.NumGoroutine()
	var conns []net.Conn
	for range 3 * maxHandshakes {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	if n := runtime.NumGoroutine() - before; n > maxHandshakes+10 {
		t.Errorf("%d silent connections made %d goroutines, want at most %d", len(conns), n, maxHandshakes)
	}
	// Each silent connection is dropped after the first line's wait; then
	// a status question is answered.
	var wg sync.WaitGroup
	ok := make(chan bool, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if r := exchange(t, addr, `{"grdma_sweep":1,"type":"status","from":0}`); strings.Contains(r, `"type":"status"`) {
				ok <- true
				return
			}
		}
		ok <- false
	}()
	if !<-ok {
		t.Error("the listener stopped answering after a flood")
	}
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
}

// A partner's words are kept escaped and bounded: an error with terminal
// escapes and a megabyte of text does not reach a record as it came.
func TestPeerText(t *testing.T) {
	m, err := parseMessage([]byte(`{"grdma_sweep":1,"type":"done","error":"\u001b[31mred` + strings.Repeat("a", 4000) + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(m.Error, 0x1b) || len(m.Error) > maxText+10 || !strings.HasPrefix(m.Error, `\x1b[31mred`) {
		t.Errorf("error kept as %.60q (%d bytes)", m.Error, len(m.Error))
	}
}

// A runner whose partner answers with garbage records a failure and goes
// on: it never trusts what comes back.
func TestRunnerGarbagePartner(t *testing.T) {
	bogus, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer bogus.Close()
	go func() {
		for {
			c, err := bogus.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(strings.Repeat("\x00garbage", 1000) + "\n"))
			c.Close()
		}
	}()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hosts := []Host{{Name: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}, {Name: "127.0.0.1", Port: bogus.Addr().(*net.TCPAddr).Port}}
	p := Params{Hosts: []string{hosts[0].String(), hosts[1].String()}, Schedule: KindAllPairs, Tests: []verbsprobe.Test{DefaultLat}}
	var out strings.Builder
	r := &Runner{Params: p, Hosts: hosts, Rank: 0, Tester: fakeTester{f: healthy(), rank: 0}, Listener: ln,
		Out: NewWriter(&out), Timeout: 500 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sum, err := r.Run(ctx)
	if err != nil || sum.Tests != 1 || sum.Passed != 0 || !strings.Contains(out.String(), `"outcome":"no_answer"`) {
		t.Errorf("%+v %v\n%s", sum, err, out.String())
	}
}
