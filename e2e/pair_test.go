package e2e

import (
	"net"
	"os"
	"regexp"
	"slices"
	"testing"
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

// listensOn finds a listening socket by its owner, without connecting.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if !listensOn(os.Getpid(), port) {
		t.Errorf("listensOn(self, %d) = false while listening", port)
	}
	if listensOn(os.Getppid(), port) {
		t.Errorf("listensOn(parent, %d) = true: the socket is ours", port)
	}
	l.Close()
	if listensOn(os.Getpid(), port) {
		t.Errorf("listensOn(self, %d) = true after closing", port)
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
