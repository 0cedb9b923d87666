package e2e

import (
	"io"
	"os"
	"regexp"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPairPattern(t *testing.T) {
	for _, c := range []struct {
		run        string
		match      []string
		matchNot   []string
		wantString string
	}{
		{run: "", wantString: "^TestPair", match: []string{"TestPairPing"}, matchNot: []string{"TestProbe"}},
		{run: "Ping", wantString: "^TestPair.*(?:Ping)", match: []string{"TestPairPing", "TestPairRcPingpong"}, matchNot: []string{"TestPing", "TestPairWriteBw"}},
		{run: "WriteBw|WriteLat", wantString: "^TestPair.*(?:WriteBw|WriteLat)", match: []string{"TestPairWriteBw", "TestPairWriteLat"}, matchNot: []string{"TestPairPing"}},
		{run: "RcPingpong/AServes", wantString: "^TestPair.*(?:RcPingpong)/AServes"},
		{run: "(a/b)/c", wantString: "^TestPair.*(?:(a/b))/c"},
	} {
		got := scenarioPattern(PairScenarios, c.run)
		if got != c.wantString {
			t.Errorf("scenarioPattern(PairScenarios, %q) = %q, want %q", c.run, got, c.wantString)
			continue
		}
		top, _, _ := cutTopLevel(got)
		re := regexp.MustCompile(top)
		for _, name := range c.match {
			if !re.MatchString(name) {
				t.Errorf("scenarioPattern(PairScenarios, %q) does not select %s", c.run, name)
			}
		}
		for _, name := range c.matchNot {
			if re.MatchString(name) {
				t.Errorf("scenarioPattern(PairScenarios, %q) selects %s", c.run, name)
			}
		}
	}
}

// wire's two ends are one connection, Nagle off.
func TestWire(t *testing.T) {
	a, b, port, err := wire()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	if port == 0 {
		t.Error("no port")
	}
	for _, f := range []*os.File{a, b} {
		v, err := unix.GetsockoptInt(int(f.Fd()), unix.IPPROTO_TCP, unix.TCP_NODELAY)
		if err != nil || v == 0 {
			t.Errorf("TCP_NODELAY = %d, %v; want on", v, err)
		}
	}
	if _, err := a.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "frame" {
		t.Fatalf("b read %q, %v", buf, err)
	}
}

// TestRerunPattern: after a guest kernel's failure the fleet runs again
// exactly the scenarios it left unfinished, by their whole names.
func TestRerunPattern(t *testing.T) {
	nodes := []*TestNode{{Name: "TestFleetCM", Action: "pass"}, {Name: "TestFleetProbeCM", Action: "fail"},
		{Name: "TestFleetPing"}, {Name: "TestFleetBench", Action: "skip"}}
	redo := unfinished(nodes)
	if want := []string{"TestFleetProbeCM", "TestFleetPing"}; !slices.Equal(redo, want) {
		t.Fatalf("unfinished = %q, want %q", redo, want)
	}
	p := scenarioPattern(FleetScenarios, rerunPattern(redo))
	re := regexp.MustCompile(p)
	for name, want := range map[string]bool{"TestFleetProbeCM": true, "TestFleetPing": true,
		"TestFleetUDPing": false, "TestFleetProbeCMBench": false, "TestFleetCM": false} {
		if re.MatchString(name) != want {
			t.Errorf("%q selects %s: %v, want %v", p, name, !want, want)
		}
	}
}
