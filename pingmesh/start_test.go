package pingmesh

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/udping"
	"github.com/grdma/grdma/uverbs"
	"github.com/grdma/grdma/uverbs/uverbstest"
	"github.com/grdma/grdma/verbsprobe"
)

// The pingmesh end to end on the fake kernel: a prober host and two
// responders (verbsprobe.Respond with its UD ping, on loopback TCP), a
// target without a responder, then a black hole towards one responder.

func fakeDevice(d *uverbstest.Device) verbsprobe.Options {
	return verbsprobe.Options{Device: d.Name(), Port: 1, GIDIndex: verbsprobe.AutoGID, Open: func() (*uverbs.Context, error) { return d.Open() }}
}

// respond runs a responder with UD ping on d, on a loopback port; it stops
// when t ends.
func respond(t *testing.T, d *uverbstest.Device) string {
	t.Helper()
	dev, res := verbsprobe.OpenDevice(context.Background(), fakeDevice(d))
	if dev == nil {
		t.Fatalf("OpenDevice: %v", res.Err())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- verbsprobe.Respond(ctx, dev, ln, verbsprobe.ResponderConfig{UDPing: &udping.ResponderConfig{}})
	}()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("responder: %v", err)
			}
			dev.Close()
		})
	})
	return ln.Addr().String()
}

func TestStartOnFake(t *testing.T) {
	fab := uverbstest.NewFabric()
	here := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.1")})
	b := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.2")})
	c := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.3")})
	addrB, addrC := respond(t, b), respond(t, c)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := ln.Addr().String()
	ln.Close()

	path := filepath.Join(t.TempDir(), "mesh.yml")
	os.WriteFile(path, []byte(fmt.Sprintf("- targets: ['%s', '%s']\n  labels: {rack: r1}\n- targets: ['%s']\n  labels: {rack: r2}\n",
		addrB, addrC, nobody)), 0o644)
	pm, err := Start(context.Background(), Config{Rate: 20, Timeout: 300 * time.Millisecond},
		StartOptions{Device: fakeDevice(here), File: &TargetsFile{Path: path}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()

	sent := func(target string) float64 {
		var n float64
		for _, s := range series(gather(t, pm.Mesh)["grdma_pingmesh_sent_total"], map[string]string{"target": target}) {
			n += s.Counter.GetValue()
		}
		return n
	}
	gauge := func(name, target string) float64 {
		s := series(gather(t, pm.Mesh)[name], map[string]string{"target": target})
		if len(s) != 1 {
			return -1
		}
		return s[0].Gauge.GetValue()
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s", what)
			}
		}
	}
	wait("answers from both responders, the third refused", func() bool {
		return sent(addrB) >= 10 && sent(addrC) >= 10 && gauge("grdma_pingmesh_responder_up", nobody) == 0
	})
	fams := gather(t, pm.Mesh)
	for _, target := range []string{addrB, addrC} {
		if v := value(t, fams, "grdma_pingmesh_responder_up", map[string]string{"target": target, "target_rack": "r1"}); v != 1 {
			t.Errorf("%s responder up %v", target, v)
		}
		if n := value(t, fams, "grdma_pingmesh_rtt_seconds", map[string]string{"target": target}); n < 10 {
			t.Errorf("%s: %v RTT samples", target, n)
		}
	}
	if v := value(t, fams, "grdma_pingmesh_errors_total", map[string]string{"target": nobody, "kind": "no_responder"}); v < 1 {
		t.Errorf("target without a responder: no_responder errors %v", v)
	}
	// Sizes cycle 64, 512, 1024 and the path MTU (1024 on the fake: once).
	for _, size := range []string{"64", "512", "1024"} {
		if v := value(t, fams, "grdma_pingmesh_sent_total", map[string]string{"target": addrB, "size": size}); v < 1 {
			t.Errorf("no %s-byte probe to %s", size, addrB)
		}
	}

	// A black hole towards c: its probes are lost in a row, b's answered.
	var hole atomic.Bool
	hole.Store(true)
	fab.Impair(func(p uverbstest.Packet) uverbstest.Impairment {
		return uverbstest.Impairment{Drop: hole.Load() && p.To == c}
	})
	wait("losses in a row towards c", func() bool { return gauge("grdma_pingmesh_consecutive_lost", addrC) >= 5 })
	if v := gauge("grdma_pingmesh_consecutive_lost", addrB); v > 1 {
		t.Errorf("b lost %v in a row meanwhile", v)
	}
	hole.Store(false)
	wait("c answering again", func() bool { return gauge("grdma_pingmesh_consecutive_lost", addrC) == 0 })

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := pm.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if res := here.Resources(); res != (uverbstest.Resources{}) {
		t.Errorf("the prober's device: left behind %+v", res)
	}
}

// BenchmarkMeshOnFake: the CPU time of 1,000 probes through the whole
// pingmesh on the host: the prober (udping on the fake kernel), the
// collector, and ten responders answering (verbsprobe.Respond with UD
// ping on loopback TCP) — the fake kernel's work included, so an upper
// bound of what the prober and responders cost on a real device.
func BenchmarkMeshOnFake(b *testing.B) {
	fab := uverbstest.NewFabric()
	here := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.MustParseAddr("10.30.0.1")})
	var targets []string
	for i := range 10 {
		d := fab.NewDevice(uverbstest.Config{Name: "rxe0", IPv4: netip.AddrFrom4([4]byte{10, 30, 0, byte(2 + i)})})
		targets = append(targets, "'"+respondB(b, d)+"'")
	}
	path := filepath.Join(b.TempDir(), "mesh.yml")
	os.WriteFile(path, []byte("- targets: ["+strings.Join(targets, ", ")+"]\n"), 0o644)
	pm, err := Start(context.Background(), Config{Rate: 100, MaxRate: 2000}, StartOptions{Device: fakeDevice(here), File: &TargetsFile{Path: path}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	sent := func() float64 { // under the collector's lock, not a scrape: the measure must not cost
		pm.mu.Lock()
		defer pm.mu.Unlock()
		var n float64
		for _, ts := range pm.targets {
			for _, v := range ts.sent {
				n += v
			}
		}
		return n
	}
	for sent() < 100 { // every target resolved
		time.Sleep(10 * time.Millisecond)
	}
	var cpu time.Duration
	for b.Loop() {
		start, c0 := sent(), processCPU()
		for sent() < start+1000 {
			time.Sleep(20 * time.Millisecond)
		}
		cpu += processCPU() - c0
	}
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "CPU-ms/1000probes")
	cancel()
	<-done
	pm.Close()
}

// respondB is respond for a benchmark.
func respondB(b *testing.B, d *uverbstest.Device) string {
	dev, res := verbsprobe.OpenDevice(context.Background(), fakeDevice(d))
	if dev == nil {
		b.Fatalf("OpenDevice: %v", res.Err())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- verbsprobe.Respond(ctx, dev, ln, verbsprobe.ResponderConfig{UDPing: &udping.ResponderConfig{}})
	}()
	b.Cleanup(func() { cancel(); <-done; dev.Close() })
	return ln.Addr().String()
}

// processCPU is the process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
