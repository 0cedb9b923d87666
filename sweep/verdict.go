package sweep

import (
	"fmt"
	"slices"
	"strings"
)

// VerdictKind says what a verdict blames.
type VerdictKind string

// Verdicts.
const (
	// VerdictNode: most of the node's pairs are bad while most of its
	// bad partners are fine with the other nodes: the node is bad.
	VerdictNode VerdictKind = "node"
	// VerdictLink: a bad pair whose two nodes are both fine with the
	// other nodes: the link or path between them is bad.
	VerdictLink VerdictKind = "link"
	// VerdictUnreachable: the node took part in no test (it never
	// answered, or its device failed).
	VerdictUnreachable VerdictKind = "unreachable"
	// VerdictPairs: bad pairs that neither a bad node nor a bad link
	// explains (a switch, a group of nodes; with two nodes, either).
	VerdictPairs VerdictKind = "pairs"
)

// Verdict is one finding of a sweep.
type Verdict struct {
	Kind   VerdictKind `json:"kind"`
	Nodes  []string    `json:"nodes"`
	Ranks  []int       `json:"ranks"`
	Reason string      `json:"reason"`
	// Evidence is the bad tests the verdict rests on.
	Evidence []string `json:"evidence,omitempty"`
}

// flagged reports whether the pair is bad or suspect: it counts against
// its nodes and is retested.
func (p *PairReport) flagged() bool { return p.Bad || p.Suspect }

// attribute turns bad pairs into verdicts: unreachable nodes first, then
// nodes, then links, then what is left.
func (rep *Report) attribute(unreachable map[int]string) {
	name := func(r int) string { return rep.Params.Hosts[r] }
	for _, r := range slices.Sorted(mapKeys(unreachable)) {
		rep.Verdicts = append(rep.Verdicts, Verdict{Kind: VerdictUnreachable, Nodes: []string{name(r)}, Ranks: []int{r},
			Reason: fmt.Sprintf("%s %s", name(r), unreachable[r])})
	}

	// The judged pairs of each node.
	judged := map[int][]*PairReport{}
	for i := range rep.Pairs {
		p := &rep.Pairs[i]
		if p.Unreachable {
			continue
		}
		judged[p.RankA] = append(judged[p.RankA], p)
		judged[p.RankB] = append(judged[p.RankB], p)
	}
	for r, ps := range judged {
		rep.Nodes[r].Pairs = len(ps)
		for _, p := range ps {
			if p.flagged() {
				rep.Nodes[r].Bad++
			}
		}
	}
	other := func(p *PairReport, r int) int {
		if p.RankA == r {
			return p.RankB
		}
		return p.RankA
	}
	// fine reports whether y's pairs without x are mostly good (and it
	// has some).
	fine := func(y, x int) bool {
		n, bad := 0, 0
		for _, p := range judged[y] {
			if other(p, y) == x {
				continue
			}
			n++
			if p.flagged() {
				bad++
			}
		}
		return n > 0 && 2*bad <= n
	}
	bad := map[int]bool{}
	for _, r := range slices.Sorted(mapKeys(judged)) {
		nr := rep.Nodes[r]
		if 2*nr.Bad <= nr.Pairs {
			continue
		}
		var badPartners, fineOnes []string
		var evidence []string
		for _, p := range judged[r] {
			if !p.flagged() {
				continue
			}
			y := other(p, r)
			badPartners = append(badPartners, name(y))
			if fine(y, r) {
				fineOnes = append(fineOnes, name(y))
			}
			evidence = append(evidence, p.Reasons...)
		}
		if 2*len(fineOnes) <= len(badPartners) {
			continue
		}
		bad[r] = true
		rep.Verdicts = append(rep.Verdicts, Verdict{Kind: VerdictNode, Nodes: []string{name(r)}, Ranks: []int{r},
			Reason: fmt.Sprintf("%s: %d of its %d pairs are bad, and %d of those %d partners are fine with the other nodes",
				name(r), nr.Bad, nr.Pairs, len(fineOnes), len(badPartners)),
			Evidence: evidence})
	}
	var leftover []*PairReport
	for i := range rep.Pairs {
		p := &rep.Pairs[i]
		if !p.Bad || p.Unreachable || bad[p.RankA] || bad[p.RankB] {
			continue
		}
		if fine(p.RankA, p.RankB) && fine(p.RankB, p.RankA) {
			rep.Verdicts = append(rep.Verdicts, Verdict{Kind: VerdictLink, Nodes: []string{p.A, p.B}, Ranks: []int{p.RankA, p.RankB},
				Reason:   fmt.Sprintf("the link or path %s–%s: both nodes are fine with the other nodes", p.A, p.B),
				Evidence: p.Reasons})
			continue
		}
		leftover = append(leftover, p)
	}
	if len(leftover) > 0 {
		v := Verdict{Kind: VerdictPairs}
		seen := map[int]bool{}
		var names []string
		for _, p := range leftover {
			names = append(names, p.A+"–"+p.B)
			v.Evidence = append(v.Evidence, p.Reasons...)
			for _, r := range []int{p.RankA, p.RankB} {
				if !seen[r] {
					seen[r] = true
					v.Ranks = append(v.Ranks, r)
				}
			}
		}
		slices.Sort(v.Ranks)
		for _, r := range v.Ranks {
			v.Nodes = append(v.Nodes, name(r))
		}
		why := "neither one node nor one link explains them (a switch, or several bad nodes?)"
		if len(rep.Params.Hosts) == 2 {
			why = "with two nodes a bad node cannot be told from a bad link"
		}
		v.Reason = fmt.Sprintf("bad pairs %s: %s", strings.Join(names, ", "), why)
		rep.Verdicts = append(rep.Verdicts, v)
	}
	rep.confirmPlan(bad)
}

// confirmPlan sets Confirm: the flagged pairs again and each suspect
// against good nodes, unless a confirm pass already ran.
func (rep *Report) confirmPlan(badNodes map[int]bool) {
	if rep.confirmRan {
		return
	}
	var flagged []Pair
	hasBad := map[int]bool{}
	for _, p := range rep.Pairs {
		if p.flagged() && !p.Unreachable {
			flagged = append(flagged, Pair{p.RankA, p.RankB})
			hasBad[p.RankA], hasBad[p.RankB] = true, true
		}
	}
	if len(flagged) == 0 {
		return
	}
	var suspects, good []int
	for _, nr := range rep.Nodes {
		switch {
		case badNodes[nr.Rank] || (nr.Pairs > 0 && 2*nr.Bad > nr.Pairs):
			suspects = append(suspects, nr.Rank)
		case !hasBad[nr.Rank] && nr.Pairs > 0:
			good = append(good, nr.Rank)
		}
	}
	s := Confirm(len(rep.Params.Hosts), flagged, suspects, good, ConfirmPerSuspect)
	rep.Confirm = &s
}
