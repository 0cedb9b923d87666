package sweep

import (
	"fmt"
	"slices"
)

// Pair is two nodes, by rank, that test each other in a round. A opens
// the pair's control connection and is the client of its first test
// (Plan); B waits for it.
type Pair struct {
	A int `json:"a"`
	B int `json:"b"`
}

// Other returns the partner of rank in p.
func (p Pair) Other(rank int) int {
	if p.A == rank {
		return p.B
	}
	return p.A
}

// Has reports whether rank is in p.
func (p Pair) Has(rank int) bool { return p.A == rank || p.B == rank }

// key is the pair without its order.
func (p Pair) key() Pair {
	if p.A > p.B {
		return Pair{p.B, p.A}
	}
	return p
}

// Round is pairs that run at the same time: no node is in two of them.
type Round []Pair

// PairOf returns the pair of rank in the round, if it has one (a node
// with a bye has none).
func (r Round) PairOf(rank int) (Pair, bool) {
	for _, p := range r {
		if p.Has(rank) {
			return p, true
		}
	}
	return Pair{}, false
}

// Kinds of schedule.
const (
	KindAllPairs = "all-pairs" // AllPairs
	KindQuick    = "quick"     // Quick
	KindConfirm  = "confirm"   // Confirm
)

// Schedule is the rounds of a sweep of N nodes.
type Schedule struct {
	Kind   string  `json:"kind"`
	N      int     `json:"nodes"`
	Rounds []Round `json:"rounds"`
}

// Pairs returns every pair of the schedule, round after round.
func (s Schedule) Pairs() []Pair {
	var out []Pair
	for _, r := range s.Rounds {
		out = append(out, r...)
	}
	return out
}

// Validate reports a schedule that a sweep cannot run: a rank outside
// 0..N-1, a node paired with itself or twice in a round.
func (s Schedule) Validate() error {
	for i, r := range s.Rounds {
		busy := map[int]bool{}
		for _, p := range r {
			for _, x := range []int{p.A, p.B} {
				if x < 0 || x >= s.N {
					return fmt.Errorf("round %d: rank %d outside 0..%d", i+1, x, s.N-1)
				}
				if busy[x] {
					return fmt.Errorf("round %d: rank %d in two pairs", i+1, x)
				}
				busy[x] = true
			}
			if p.A == p.B {
				return fmt.Errorf("round %d: rank %d paired with itself", i+1, p.A)
			}
		}
	}
	return nil
}

// check reports a retest schedule a sweep of n hosts cannot run.
func (s Schedule) check(n int) error {
	switch {
	case s.Kind != KindConfirm:
		return fmt.Errorf("a retest runs a confirm schedule, not %q", s.Kind)
	case s.N != n:
		return fmt.Errorf("the retest is of %d hosts, the sweep of %d", s.N, n)
	case len(s.Rounds) == 0:
		return fmt.Errorf("the retest has no round")
	}
	return s.Validate()
}

// AllPairs is the round-robin schedule of n nodes by the circle method:
// n-1 rounds of n/2 disjoint pairs (n odd: n rounds of (n-1)/2, each node
// sitting one out), every pair exactly once. Who is A alternates, so
// that each node opens about half of its pairs.
//
// Node n-1 (or, n odd, a bye) stays put while the others turn around a
// circle: in round r it meets node r, and node r+i meets node r-i
// (mod n-1).
func AllPairs(n int) Schedule {
	s := Schedule{Kind: KindAllPairs, N: n}
	if n < 2 {
		return s
	}
	m := n + n%2 // with a phantom node when odd
	c := m - 1
	for r := range c {
		var round Round
		add := func(a, b int) {
			if a < n && b < n { // the phantom's partner has a bye
				round = append(round, Pair{a, b})
			}
		}
		if r%2 == 0 {
			add(m-1, r)
		} else {
			add(r, m-1)
		}
		for i := 1; i < m/2; i++ {
			x, y := (r+i)%c, (r-i+c)%c
			if i%2 == 0 {
				x, y = y, x
			}
			add(x, y)
		}
		s.Rounds = append(s.Rounds, round)
	}
	return s
}

// Quick is the ring 0-1-2-...-(n-1)-0 in two rounds: the even edges
// (0,1), (2,3), ... then the odd ones shifted by one, (1,2), (3,4), ...,
// (n-1,0). Each node meets its two neighbours, which is enough to tell
// a bad node (bad with both) from a bad link (bad with one). With n odd
// the ring's last edge (n-1,0) takes a third round; with n = 2 the ring
// is one pair.
func Quick(n int) Schedule {
	s := Schedule{Kind: KindQuick, N: n}
	if n < 2 {
		return s
	}
	if n == 2 {
		s.Rounds = []Round{{{0, 1}}}
		return s
	}
	var even, odd Round
	for i := 0; i+1 < n; i += 2 {
		even = append(even, Pair{i, i + 1})
	}
	for i := 1; i+1 < n; i += 2 {
		odd = append(odd, Pair{i + 1, i}) // the other node opens
	}
	s.Rounds = []Round{even, odd}
	if n%2 == 0 {
		s.Rounds[1] = append(s.Rounds[1], Pair{0, n - 1})
	} else {
		s.Rounds = append(s.Rounds, Round{{n - 1, 0}})
	}
	return s
}

// ConfirmPerSuspect is how many partners that passed Confirm gives each
// suspect node.
const ConfirmPerSuspect = 3

// Confirm is the retest after a sweep: each flagged pair again, and each
// suspect node against up to perSuspect good nodes (nodes whose pairs all
// passed) it has not met in flagged, spread so that no good node takes
// more retests than needed. Pairs are packed greedily into rounds of
// disjoint pairs, flagged pairs first, in the order given.
func Confirm(n int, flagged []Pair, suspects, good []int, perSuspect int) Schedule {
	s := Schedule{Kind: KindConfirm, N: n}
	var todo []Pair
	seen := map[Pair]bool{}
	add := func(p Pair) {
		if p.A == p.B || p.A < 0 || p.B < 0 || p.A >= n || p.B >= n || seen[p.key()] {
			return
		}
		seen[p.key()] = true
		todo = append(todo, p)
	}
	for _, p := range flagged {
		add(p)
	}
	load := map[int]int{}
	for _, x := range suspects {
		// The least loaded good nodes first, then by rank: deterministic.
		cands := slices.Clone(good)
		slices.SortStableFunc(cands, func(a, b int) int { return load[a] - load[b] })
		picked := 0
		for _, g := range cands {
			if picked == perSuspect {
				break
			}
			if g == x || seen[Pair{x, g}.key()] {
				continue
			}
			add(Pair{g, x})
			load[g]++
			picked++
		}
	}
	// Greedy edge colouring: each pair into the first round where both
	// nodes are free.
	var busy []map[int]bool
	for _, p := range todo {
		placed := false
		for i := range s.Rounds {
			if !busy[i][p.A] && !busy[i][p.B] {
				s.Rounds[i] = append(s.Rounds[i], p)
				busy[i][p.A], busy[i][p.B] = true, true
				placed = true
				break
			}
		}
		if !placed {
			s.Rounds = append(s.Rounds, Round{p})
			busy = append(busy, map[int]bool{p.A: true, p.B: true})
		}
	}
	return s
}
