package grammar

import (
	"slices"
	"strings"

	"github.com/grdma/grdma/cmdline"
)

// Syntax is one level of an object's iproute2-style grammar: optionally a
// verb (show, set, ...) leading to the next level, then positional values,
// then KEYWORD VALUE... groups in any order. Verbs and keywords are listed
// in the order that decides abbreviations (cmdline.Abbrev).
type Syntax struct {
	Verbs []Verb
	// VerbOptional: a word that is no verb is the first positional value
	// (res show rxe0 as well as res show qp).
	VerbOptional bool
	Pos          []Positional
	Keywords     []Keyword
	// OneKeyword: a single KEYWORD VALUE group ends the line (dev set).
	OneKeyword bool
}

// Verb is a word that leads to the next level of a grammar. The verb
// help (Help), where rdma's tables have it, prints the object's help: it
// leads nowhere and is not offered for completion.
type Verb struct {
	Name string
	Next *Syntax
}

// Help is the help word of rdma's tables, a Verb or a Keyword in the
// place rdma gives it (its place can decide an abbreviation).
const Help = "help"

var helpVerb = Verb{Name: Help, Next: &Syntax{}}

// Positional is a value in a fixed place.
type Positional struct {
	Value Value
	// Optional: a keyword may come instead (gid show type v2).
	Optional bool
}

// Keyword is a KEYWORD VALUE... group: the values that follow it, none
// for a flag word.
type Keyword struct {
	Name   string
	Values []Value
}

// Value is what a positional or a keyword's value may be.
type Value struct {
	Kind ValueKind
	// Words are the values a Words value takes (a comma list such as
	// type,pid is one word); for a Free value, the words it takes besides
	// free text (size BYTES|cycle), which completion offers.
	Words []string
	// Many: the last value of a keyword that takes as many as follow
	// (gpu BDF...): words after it that are no keyword are more of it.
	Many bool
}

// ValueKind says what a Value names.
type ValueKind uint8

// Value kinds. Completion offers the names a machine has for Device,
// DevPort, Port, Netdev and Netns.
const (
	Free    ValueKind = iota // free text: a name, a number
	Words                    // one of Value.Words
	Device                   // an RDMA device name
	DevPort                  // DEV or DEV/PORT
	Port                     // DEV/PORT
	Netdev                   // a network device name
	Netns                    // a named network namespace
	// AutoOnOff is the on|off after stat qp set ... auto CRITERIA: none
	// after auto off.
	AutoOnOff
	// GPUFunction is a PCI function address to treat as a GPU (gpu
	// BDF); completion offers the display functions.
	GPUFunction
)

// words is a Words value.
func words(ws ...string) Value { return Value{Kind: Words, Words: ws} }

var (
	free    = Value{Kind: Free}
	onOff   = words("on", "off")
	device  = Value{Kind: Device}
	devPort = Value{Kind: DevPort}
	port    = Value{Kind: Port}
	netdev  = Value{Kind: Netdev}
	netns   = Value{Kind: Netns}
	gpuFn   = Value{Kind: GPUFunction, Many: true}
)

// KeywordNames lists the keywords of s, in their order (help included
// where rdma has it).
func (s *Syntax) KeywordNames() []string {
	var out []string
	for _, k := range s.Keywords {
		out = append(out, k.Name)
	}
	return out
}

// VerbNames lists the verbs of s, in their order (help included where
// rdma has it).
func (s *Syntax) VerbNames() []string {
	var out []string
	for _, v := range s.Verbs {
		out = append(out, v.Name)
	}
	return out
}

// Verb returns the verb word abbreviates, or nil.
func (s *Syntax) Verb(word string) *Verb {
	if i := match(word, s.VerbNames()); i >= 0 {
		return &s.Verbs[i]
	}
	return nil
}

// Keyword returns the keyword word abbreviates, or nil.
func (s *Syntax) Keyword(word string) *Keyword {
	if i := match(word, s.KeywordNames()); i >= 0 {
		return &s.Keywords[i]
	}
	return nil
}

// match finds word among names as cmdline.Args.Match does (rdma's first
// match, cmdline.Abbrev); -1 if none.
func match(word string, names []string) int {
	m, ok := cmdline.Abbrev(word, names)
	if !ok {
		return -1
	}
	return slices.Index(names, m)
}

// ValuesFunc names the candidates of a value; done holds the values
// already given to the same keyword (auto off takes no on|off).
type ValuesFunc func(v Value, done []string) []string

// Next returns the candidates for the word after words, the words after
// the object on a command line; values names the candidates of a value.
// Verbs and keywords typed so far may be abbreviated.
func (s *Syntax) Next(words []string, values ValuesFunc) []string {
	node, i := s, 0
	for len(node.Verbs) > 0 {
		if i == len(words) {
			cands := offered(node.VerbNames())
			if node.VerbOptional {
				cands = append(cands, node.posCandidates(values, 0)...)
			}
			return cands
		}
		v := node.Verb(words[i])
		if v == nil {
			if !node.VerbOptional {
				return nil
			}
			break
		}
		node, i = v.Next, i+1
	}
	for p := range node.Pos {
		if i == len(words) {
			return node.posCandidates(values, p)
		}
		if node.Pos[p].Optional && node.Keyword(words[i]) != nil {
			break
		}
		i++
	}
	for n := 0; ; n++ {
		if n == 1 && node.OneKeyword {
			return nil
		}
		if i == len(words) {
			return offered(node.KeywordNames())
		}
		k := node.Keyword(words[i])
		if k == nil {
			return nil
		}
		i++
		start := i
		for j, v := range k.Values {
			if i == len(words) {
				return values(v, words[start:i])
			}
			i++
			if v.Many && j == len(k.Values)-1 {
				for i < len(words) && node.Keyword(words[i]) == nil {
					i++
				}
				if i == len(words) { // another value, or the next keyword
					more := slices.DeleteFunc(values(v, words[start:i]), func(w string) bool { return slices.Contains(words[start:i], w) })
					return append(more, offered(node.KeywordNames())...)
				}
			}
		}
	}
}

// posCandidates completes positional p: its values, and the keywords when
// it is optional.
func (s *Syntax) posCandidates(values ValuesFunc, p int) []string {
	if p >= len(s.Pos) {
		return offered(s.KeywordNames())
	}
	out := slices.Clone(values(s.Pos[p].Value, nil))
	if s.Pos[p].Optional {
		out = append(out, offered(s.KeywordNames())...)
	}
	return out
}

// offered leaves out help: completion offers what does something.
func offered(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == Help })
}

// Literals lists every literal word of s: verbs, keywords and fixed
// values (a comma list such as type,pid split). A synopsis should use no
// other.
func (s *Syntax) Literals() []string {
	into := map[string]bool{}
	s.literals(into)
	out := make([]string, 0, len(into))
	for w := range into {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

func (s *Syntax) literals(into map[string]bool) {
	add := func(v Value) {
		ws := v.Words
		if v.Kind == AutoOnOff {
			ws = onOff.Words
		}
		for _, w := range ws {
			for _, part := range strings.Split(w, ",") {
				into[part] = true
			}
		}
	}
	for _, v := range s.Verbs {
		into[v.Name] = true
		v.Next.literals(into)
	}
	for _, p := range s.Pos {
		add(p.Value)
	}
	for _, k := range s.Keywords {
		into[k.Name] = true
		for _, v := range k.Values {
			add(v)
		}
	}
}
