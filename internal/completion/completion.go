// Package completion is grdma's shell completion engine and the grammar
// of the words after each object: verbs (show, set, ...), keywords and
// their values, device names, DEV/PORT, netdev names and network
// namespaces. Verbs and keywords are matched as rdma abbreviates them
// (cmdline.Abbrev); the filters of res show come from nldev's one res
// grammar (nldev.ResFilters). Completion never fails: what cannot be read
// is not offered.
package completion

import (
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
)

// Source is where the names completion offers come from; nil functions
// offer none.
type Source struct {
	// Devices lists the RDMA devices (over RDMA netlink).
	Devices func() ([]nldev.Device, error)
	// Sysfs reads /sys/class/net for netdev names.
	Sysfs func() (sysfs.FS, error)
	// NetnsDir is where named network namespaces live; DefaultNetnsDir
	// when empty.
	NetnsDir string
}

// DefaultNetnsDir is where ip netns add makes named network namespaces.
const DefaultNetnsDir = "/run/netns"

// Complete returns the candidates for the word toComplete after words, the
// words after object on a command line ("link", ["add", "rxe0", "type"],
// "r" gives "rxe"). known is false when object has no grammar.
func Complete(src Source, object string, words []string, toComplete string) (cands []string, known bool) {
	g, ok := grammars[object]
	if !ok || g == nil {
		return nil, ok
	}
	c := &completer{src: src, toComplete: toComplete}
	return c.filter(g.complete(c, words)), true
}

// Objects lists the objects that have a grammar.
func Objects() []string {
	out := make([]string, 0, len(grammars))
	for name := range grammars {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Words lists every literal word object's grammar can complete: verbs,
// keywords and fixed values (a comma list such as type,pid split); nil
// when object has no grammar. A command's synopsis should use no other.
func Words(object string) []string {
	g := grammars[object]
	if g == nil {
		return nil
	}
	into := map[string]bool{}
	// No source: only the fixed words (/dev/null lists no namespaces).
	g.words(&completer{src: Source{NetnsDir: os.DevNull}}, into)
	out := make([]string, 0, len(into))
	for w := range into {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

func (s *compSyntax) words(c *completer, into map[string]bool) {
	add := func(vals compValues) {
		for _, w := range vals(c, nil) {
			for _, part := range strings.Split(w, ",") {
				into[part] = true
			}
		}
	}
	for _, v := range s.verbs {
		into[v.name] = true
		v.next.words(c, into)
	}
	for _, p := range s.pos {
		add(p.vals)
	}
	for _, k := range s.kws {
		into[k.name] = true
		for _, v := range k.vals {
			add(v)
		}
	}
}

// Verbs lists the verbs of object's grammar (show, set, ...), in the
// order that decides abbreviations; nil when it has none.
func Verbs(object string) []string {
	if g := grammars[object]; g != nil {
		return g.verbNames()
	}
	return nil
}

// NetnsNames lists the named network namespaces of dir (DefaultNetnsDir
// when empty); none when it cannot be read.
func NetnsNames(dir string) []string {
	if dir == "" {
		dir = DefaultNetnsDir
	}
	return dirNames(os.ReadDir(dir))
}

// dirNames returns the names of a directory's entries; none on error.
func dirNames(entries []fs.DirEntry, err error) []string {
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// completer produces the candidates of one word being completed.
type completer struct {
	src        Source
	toComplete string
}

// filter keeps the candidates starting with the word being completed (the
// shells filter too; this keeps the answer short and testable).
func (c *completer) filter(cands []string) []string {
	out := cands[:0:0]
	for _, s := range cands {
		if strings.HasPrefix(s, c.toComplete) {
			out = append(out, s)
		}
	}
	return out
}

// devices lists the RDMA devices; none on any error.
func (c *completer) devices() []nldev.Device {
	if c.src.Devices == nil {
		return nil
	}
	devs, err := c.src.Devices()
	if err != nil {
		return nil
	}
	return devs
}

func (c *completer) deviceNames() []string {
	var names []string
	for _, d := range c.devices() {
		names = append(names, d.Name)
	}
	return names
}

// ports lists DEV/PORT for every port; with withDevs, also each DEV. The
// ports of a device are offered once the word names it (or has its
// slash), so a machine with many devices first completes the device.
func (c *completer) ports(withDevs bool) []string {
	var out []string
	for _, d := range c.devices() {
		if withDevs {
			out = append(out, d.Name)
		}
		if withDevs && d.Name != c.toComplete && !strings.HasPrefix(c.toComplete, d.Name+"/") {
			continue
		}
		for p := uint32(1); p <= d.NumPorts; p++ {
			out = append(out, d.Name+"/"+strconv.FormatUint(uint64(p), 10))
		}
	}
	return out
}

// netdevs lists the network devices of /sys/class/net.
func (c *completer) netdevs() []string {
	if c.src.Sysfs == nil {
		return nil
	}
	fsys, err := c.src.Sysfs()
	if err != nil {
		return nil
	}
	return dirNames(fsys.ReadDir("sys/class/net"))
}

// compValues completes one value; done holds the values already given to the
// same keyword (auto off takes no on|off).
type compValues func(c *completer, done []string) []string

func compWords(ws ...string) compValues {
	return func(*completer, []string) []string { return ws }
}

var (
	compFree     compValues = func(*completer, []string) []string { return nil } // free text: NAME, numbers
	compOnOff               = compWords("on", "off")
	compDevs     compValues = func(c *completer, _ []string) []string { return c.deviceNames() }
	compDevPorts compValues = func(c *completer, _ []string) []string { return c.ports(true) }
	compPorts    compValues = func(c *completer, _ []string) []string { return c.ports(false) }
	compNetdevs  compValues = func(c *completer, _ []string) []string { return c.netdevs() }
	compNetns    compValues = func(c *completer, _ []string) []string { return NetnsNames(c.src.NetnsDir) }
)

// compSyntax is one level of an object's iproute2-style grammar: optionally a
// verb (show, set, ...), then positional values, then KEYWORD VALUE...
// groups in any order. Verbs and keywords may be abbreviated.
type compSyntax struct {
	verbs []compVerb
	// verbOptional: a word that is no verb is the first positional value
	// (res show rxe0 as well as res show qp).
	verbOptional bool
	pos          []compPositional
	kws          []compKeyword
	// oneKeyword: a single KEYWORD VALUE group ends the line (dev set).
	oneKeyword bool
}

type compVerb struct {
	name string
	next *compSyntax
}

type compPositional struct {
	vals compValues
	// optional: a keyword may come instead (gid show type v2).
	optional bool
}

type compKeyword struct {
	name string
	vals []compValues // the values following the keyword; none for a flag word
}

// complete returns the candidates for the word after words.
func (s *compSyntax) complete(c *completer, words []string) []string {
	node, i := s, 0
	for len(node.verbs) > 0 {
		if i == len(words) {
			cands := node.verbNames()
			if node.verbOptional {
				cands = append(cands, node.posCandidates(c, 0)...)
			}
			return cands
		}
		v := node.verb(words[i])
		if v == nil {
			if !node.verbOptional {
				return nil
			}
			break
		}
		node, i = v.next, i+1
	}
	for p := range node.pos {
		if i == len(words) {
			return node.posCandidates(c, p)
		}
		if node.pos[p].optional && node.keyword(words[i]) != nil {
			break
		}
		i++
	}
	for n := 0; ; n++ {
		if n == 1 && node.oneKeyword {
			return nil
		}
		if i == len(words) {
			return node.keywordNames()
		}
		k := node.keyword(words[i])
		if k == nil {
			return nil
		}
		i++
		start := i
		for _, v := range k.vals {
			if i == len(words) {
				return v(c, words[start:i])
			}
			i++
		}
	}
}

func (s *compSyntax) verbNames() []string {
	var out []string
	for _, v := range s.verbs {
		out = append(out, v.name)
	}
	return out
}

func (s *compSyntax) keywordNames() []string {
	var out []string
	for _, k := range s.kws {
		out = append(out, k.name)
	}
	return out
}

// posCandidates completes positional p: its values, and the keywords when
// it is optional.
func (s *compSyntax) posCandidates(c *completer, p int) []string {
	if p >= len(s.pos) {
		return s.keywordNames()
	}
	out := slices.Clone(s.pos[p].vals(c, nil))
	if s.pos[p].optional {
		out = append(out, s.keywordNames()...)
	}
	return out
}

func (s *compSyntax) verb(word string) *compVerb {
	i := compMatch(word, len(s.verbs), func(i int) string { return s.verbs[i].name })
	if i < 0 {
		return nil
	}
	return &s.verbs[i]
}

func (s *compSyntax) keyword(word string) *compKeyword {
	i := compMatch(word, len(s.kws), func(i int) string { return s.kws[i].name })
	if i < 0 {
		return nil
	}
	return &s.kws[i]
}

// compMatch finds word among n names as cmdline.Args.Match does (rdma's first
// match, cmdline.Abbrev); -1 if none.
func compMatch(word string, n int, name func(int) string) int {
	names := make([]string, n)
	for i := range n {
		names[i] = name(i)
	}
	m, ok := cmdline.Abbrev(word, names)
	if !ok {
		return -1
	}
	return slices.Index(names, m)
}

// compShow is the common "show|list [DEV[/PORT]]" level.
func compShow(what compValues, kws ...compKeyword) *compSyntax {
	return &compSyntax{pos: []compPositional{{vals: what, optional: true}}, kws: kws}
}

func compShowVerbs(s *compSyntax) []compVerb { return []compVerb{{"show", s}, {"list", s}} }

// compStatLink is stat's "link DEV[/PORT]".
var compStatLink = compKeyword{"link", []compValues{compDevPorts}}

// compGIDShow is gid show's and gid watch's [DEV[/PORT]] and criteria.
var compGIDShow = compShow(compDevPorts,
	compKeyword{"type", []compValues{compWords("v1", "v2", "ib")}},
	compKeyword{"ipv4", nil},
	compKeyword{"ipv6", nil},
	compKeyword{"netdev", []compValues{compNetdevs}},
)

// compQPShow are the filters of stat qp show.
var compQPShow = []compKeyword{
	compStatLink,
	{"cntn", []compValues{compFree}},
	{"lqpn", []compValues{compFree}},
	{"pid", []compValues{compFree}},
	{"qp-type", []compValues{compWords(compQPTypes...)}},
	{"optional-counters", []compValues{compFree}},
}

var compQPTypes = []string{"RC", "UC", "UD", "SMI", "GSI", "RAW_PACKET", "RAW_IPV6", "RAW_ETHERTYPE", "XRC_INI", "XRC_TGT", "DRIVER"}

// compResObject completes the filters of res show OBJECT, from the one res
// grammar (nldev.ResFilters).
func compResObject(t nldev.ResType) *compSyntax {
	s := &compSyntax{}
	for _, f := range nldev.ResFilters(t) {
		v := compFree
		switch {
		case f.Kind == nldev.FilterLocation && f.Name == "link" && t.PerPort():
			v = compDevPorts
		case f.Kind == nldev.FilterLocation:
			v = compDevs
		case f.Values != nil:
			v = compWords(f.Values...)
		}
		s.kws = append(s.kws, compKeyword{f.Name, []compValues{v}})
	}
	return s
}

func compResShow() *compSyntax {
	s := &compSyntax{verbOptional: true, pos: []compPositional{{vals: compDevs}}}
	for _, t := range nldev.ResTypes {
		s.verbs = append(s.verbs, compVerb{t.String(), compResObject(t)})
	}
	frmr := &compSyntax{kws: []compKeyword{{"dev", []compValues{compDevs}}}}
	for _, f := range nldev.FRMRPoolFilterNames {
		frmr.kws = append(frmr.kws, compKeyword{f, []compValues{compFree}})
	}
	s.verbs = append(s.verbs, compVerb{"frmr_pools", frmr})
	return s
}

// compAutoOnOff is the on|off after stat qp set ... auto CRITERIA (none after
// auto off).
var compAutoOnOff compValues = func(_ *completer, done []string) []string {
	if len(done) == 1 && done[0] == "off" {
		return nil
	}
	return []string{"on", "off"}
}

// grammars are the argument grammars of the objects, by command name.
var grammars = map[string]*compSyntax{
	"dev": {verbs: append([]compVerb{
		{"add", &compSyntax{pos: []compPositional{{vals: compFree}}, kws: []compKeyword{
			{"type", []compValues{compWords("smi")}},
			{"parent", []compValues{compDevs}},
		}}},
		{"delete", &compSyntax{pos: []compPositional{{vals: compDevs}}}},
	}, append(compShowVerbs(compShow(compDevs)),
		compVerb{"set", &compSyntax{pos: []compPositional{{vals: compDevs}}, oneKeyword: true, kws: []compKeyword{
			{"name", []compValues{compFree}},
			{"netns", []compValues{compNetns}},
			{"adaptive-moderation", []compValues{compOnOff}},
		}}},
		compVerb{"info", compShow(compDevs)})...)},
	"link": {verbs: append([]compVerb{
		{"add", &compSyntax{pos: []compPositional{{vals: compFree}}, kws: []compKeyword{
			{"type", []compValues{compWords("rxe", "siw")}},
			{"netdev", []compValues{compNetdevs}},
		}}},
		{"delete", &compSyntax{pos: []compPositional{{vals: compDevs}}}},
	}, compShowVerbs(compShow(compDevPorts))...)},
	"sys": {verbs: []compVerb{
		{"show", &compSyntax{pos: []compPositional{{vals: compWords("netns", "privileged-qkey", "monitor", "copy-on-fork")}}}},
		{"set", &compSyntax{verbs: []compVerb{
			{"netns", &compSyntax{pos: []compPositional{{vals: compWords("shared", "exclusive")}}}},
			{"privileged-qkey", &compSyntax{pos: []compPositional{{vals: compOnOff}}}},
		}}},
	}},
	"port": {verbs: compShowVerbs(compShow(compDevPorts))},
	"gid":  {verbs: append(compShowVerbs(compGIDShow), compVerb{"watch", compGIDShow})},
	"stat": {verbs: append(compShowVerbs(&compSyntax{kws: []compKeyword{compStatLink, {"mr", nil}}}),
		compVerb{"qp", &compSyntax{verbOptional: true, kws: compQPShow, verbs: []compVerb{
			{"show", &compSyntax{kws: compQPShow}},
			{"list", &compSyntax{kws: compQPShow}},
			{"mode", &compSyntax{kws: []compKeyword{compStatLink}}},
			{"set", &compSyntax{kws: []compKeyword{
				{"link", []compValues{compPorts}},
				{"auto", []compValues{compWords("type", "pid", "type,pid", "off"), compAutoOnOff}},
				{"optional-counters", []compValues{compOnOff}},
			}}},
			{"bind", &compSyntax{kws: []compKeyword{{"link", []compValues{compPorts}}, {"lqpn", []compValues{compFree}}, {"cntn", []compValues{compFree}}}}},
			{"unbind", &compSyntax{kws: []compKeyword{{"link", []compValues{compPorts}}, {"cntn", []compValues{compFree}}, {"lqpn", []compValues{compFree}}}}},
		}}},
		compVerb{"mr", &compSyntax{kws: []compKeyword{{"mrn", []compValues{compFree}}, {"dev", []compValues{compDevs}}}}},
		compVerb{"mode", &compSyntax{kws: []compKeyword{{"supported", nil}, compStatLink}}},
		compVerb{"set", &compSyntax{kws: []compKeyword{{"link", []compValues{compPorts}}, {"optional-counters", []compValues{compFree}}}}},
		compVerb{"unset", &compSyntax{kws: []compKeyword{{"link", []compValues{compPorts}}, {"optional-counters", nil}}}},
		compVerb{"export", &compSyntax{}})},
	"monitor": {},
	"res": {verbs: []compVerb{{"show", compResShow()}, {"set", &compSyntax{verbs: []compVerb{{"frmr_pools", &compSyntax{kws: []compKeyword{
		{"dev", []compValues{compDevs}}, {"aging", []compValues{compFree}}, {"pinned", []compValues{compFree, compFree}},
	}}}}}}, {"list", compResShow()}}},
	"check": {kws: []compKeyword{
		{"devices", nil},
		{"ports", nil},
		{"probe", nil},
		{"gdr", nil},
		{"state", []compValues{compWords("ACTIVE", "ARMED", "INIT", "DOWN")}},
		{"min-rate", []compValues{compFree}},
		{"mtu", []compValues{compWords("256", "512", "1024", "2048", "4096")}},
		{"gid-type", []compValues{compWords("v1", "v2", "ib")}},
		{"gid-index", []compValues{compFree}},
		{"type", []compValues{compWords("v1", "v2", "ib")}},
		{"ipv4", nil},
		{"ipv6", nil},
		{"netdev-mtu", []compValues{compFree}},
		{"device-count", []compValues{compFree}},
		{"device-names", []compValues{compDevs}},
	}},
	"probe": {pos: []compPositional{{vals: compDevPorts}}, kws: []compKeyword{
		{"gid-index", []compValues{compFree}},
		{"traffic", nil},
		{"count", []compValues{compFree}},
		{"listen", nil},
		{"peer", []compValues{compFree}},
		{"bw", []compValues{compWords("write", "send", "read")}},
		{"lat", []compValues{compWords("write", "send", "read")}},
		{"pingpong", nil},
		{"size", []compValues{compFree}},
		{"iters", []compValues{compFree}},
		{"duration", []compValues{compFree}},
		{"timeout", []compValues{compFree}},
		{"from", []compValues{compFree}},
	}},
	// exporter takes flags only; cobra completes them.
	"exporter": {},
}
