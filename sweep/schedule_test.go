package sweep

import (
	"fmt"
	"testing"

	"github.com/grdma/grdma/verbsprobe"
)

func TestAllPairs(t *testing.T) {
	for n := 2; n <= 40; n++ {
		s := AllPairs(n)
		if err := s.Validate(); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		wantRounds := n - 1
		if n%2 == 1 {
			wantRounds = n
		}
		if len(s.Rounds) != wantRounds {
			t.Errorf("n=%d: %d rounds, want %d", n, len(s.Rounds), wantRounds)
		}
		seen := map[Pair]int{}
		opens := make([]int, n)
		byes := make([]int, n)
		for ri, r := range s.Rounds {
			if len(r) != n/2 {
				t.Errorf("n=%d round %d: %d pairs, want %d", n, ri+1, len(r), n/2)
			}
			in := map[int]bool{}
			for _, p := range r {
				seen[p.key()]++
				opens[p.A]++
				in[p.A], in[p.B] = true, true
			}
			for x := range n {
				if !in[x] {
					byes[x]++
				}
			}
		}
		if len(seen) != n*(n-1)/2 {
			t.Errorf("n=%d: %d distinct pairs, want %d", n, len(seen), n*(n-1)/2)
		}
		for p, c := range seen {
			if c != 1 {
				t.Errorf("n=%d: pair %v %d times", n, p, c)
			}
		}
		for x := range n {
			// Each node opens about half of its n-1 pairs; odd n: one bye each.
			if d := 2*opens[x] - (n - 1); d < -1 || d > 1 {
				t.Errorf("n=%d: rank %d opens %d of %d pairs", n, x, opens[x], n-1)
			}
			if byes[x] != n%2 {
				t.Errorf("n=%d: rank %d has %d byes", n, x, byes[x])
			}
		}
	}
	if s := AllPairs(1); len(s.Rounds) != 0 {
		t.Errorf("one node: %+v", s)
	}
}

func TestQuick(t *testing.T) {
	for n := 2; n <= 21; n++ {
		s := Quick(n)
		if err := s.Validate(); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		want := 2
		if n == 2 {
			want = 1
		} else if n%2 == 1 {
			want = 3
		}
		if len(s.Rounds) != want {
			t.Errorf("n=%d: %d rounds, want %d", n, len(s.Rounds), want)
		}
		// The ring: each node meets its two neighbours, each edge once.
		edges := map[Pair]int{}
		for _, p := range s.Pairs() {
			edges[p.key()]++
		}
		for i := range n {
			e := Pair{i, (i + 1) % n}.key()
			if edges[e] != 1 {
				t.Errorf("n=%d: ring edge %v %d times", n, e, edges[e])
			}
		}
		if want := n; n == 2 {
			if len(edges) != 1 {
				t.Errorf("n=2: %v", edges)
			}
		} else if len(edges) != want {
			t.Errorf("n=%d: %d edges, want %d", n, len(edges), want)
		}
	}
}

func TestConfirm(t *testing.T) {
	// Node 3 was bad with everyone; pair 1-5 bad alone.
	flagged := []Pair{{0, 3}, {3, 1}, {2, 3}, {3, 4}, {5, 3}, {1, 5}}
	s := Confirm(8, flagged, []int{3}, []int{0, 2, 4, 6, 7}, 3)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := map[Pair]bool{}
	for _, p := range s.Pairs() {
		if got[p.key()] {
			t.Errorf("pair %v twice", p)
		}
		got[p.key()] = true
	}
	for _, p := range flagged {
		if !got[p.key()] {
			t.Errorf("flagged pair %v not retested", p)
		}
	}
	// Node 3 met 0, 2 and 4 already; its new partners are 6 and 7.
	for _, g := range []int{6, 7} {
		if !got[Pair{3, g}.key()] {
			t.Errorf("suspect 3 not retested against good node %d: %v", g, s.Rounds)
		}
	}
	if len(got) != len(flagged)+2 {
		t.Errorf("%d pairs, want %d: %v", len(got), len(flagged)+2, s.Rounds)
	}
	// Node 3 is in 7 pairs: 7 rounds at least, and greedy packs 1-5 beside.
	if len(s.Rounds) != 7 {
		t.Errorf("%d rounds, want 7: %v", len(s.Rounds), s.Rounds)
	}
	if e := Confirm(4, nil, nil, nil, 3); len(e.Rounds) != 0 {
		t.Errorf("nothing to confirm: %v", e.Rounds)
	}
}

func TestPlan(t *testing.T) {
	tests := []verbsprobe.Test{DefaultBW, DefaultLat}
	got := Plan(Pair{4, 2}, tests)
	want := []Planned{{0, 4, 2, DefaultBW}, {1, 2, 4, DefaultBW}, {2, 4, 2, DefaultLat}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Plan = %v, want %v", got, want)
	}
}

func ExampleAllPairs() {
	for i, r := range AllPairs(4).Rounds {
		fmt.Println("round", i+1, r)
	}
	// Output:
	// round 1 [{3 0} {1 2}]
	// round 2 [{1 3} {2 0}]
	// round 3 [{3 2} {0 1}]
}
