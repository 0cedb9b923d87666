package grammar

import (
	"slices"

	"github.com/grdma/grdma/nldev"
)

// The grammars of grdma's objects: the one table of each object's words
// that its parser, shell completion and the man pages' synopses use.

// showVerbs is the common "show|list" pair leading to s.
func showVerbs(s *Syntax) []Verb { return []Verb{{"show", s}, {"list", s}} }

// helpKeyword is rdma's help among keywords.
var helpKeyword = Keyword{Name: Help}

// show is the common "[DEV[/PORT]] KEYWORD..." level of show.
func show(what Value, kws ...Keyword) *Syntax {
	return &Syntax{Pos: []Positional{{Value: what, Optional: true}}, Keywords: kws}
}

// Dev is the grammar of grdma dev.
var Dev = &Syntax{Verbs: append([]Verb{
	{"add", &Syntax{Pos: []Positional{{Value: free}}, Keywords: []Keyword{
		{"type", []Value{words("smi")}},
		{"parent", []Value{device}},
	}}},
	{"delete", &Syntax{Pos: []Positional{{Value: device}}}},
}, append(showVerbs(show(device)),
	Verb{"set", &Syntax{Pos: []Positional{{Value: device}}, OneKeyword: true, Keywords: []Keyword{
		{"name", []Value{free}},
		{"netns", []Value{netns}},
		{"adaptive-moderation", []Value{onOff}},
	}}},
	Verb{"info", show(device)}, helpVerb)...)}

// Link is the grammar of grdma link.
var Link = &Syntax{Verbs: append([]Verb{
	{"add", &Syntax{Pos: []Positional{{Value: free}}, Keywords: []Keyword{
		{"type", []Value{words("rxe", "siw")}},
		{"netdev", []Value{netdev}},
	}}},
	{"delete", &Syntax{Pos: []Positional{{Value: device}}}},
}, append(showVerbs(show(devPort)), helpVerb)...)}

// Sys is the grammar of grdma sys.
var Sys = &Syntax{Verbs: []Verb{
	{"show", &Syntax{Pos: []Positional{{Value: words("netns", "privileged-qkey", "monitor", "copy-on-fork")}}}},
	{"set", &Syntax{Verbs: []Verb{
		helpVerb,
		{"netns", &Syntax{Pos: []Positional{{Value: words("shared", "exclusive")}}}},
		{"privileged-qkey", &Syntax{Pos: []Positional{{Value: onOff}}}},
	}}},
	helpVerb,
}}

// PortObject is the grammar of grdma port.
var PortObject = &Syntax{Verbs: append(showVerbs(show(devPort)), helpVerb)}

// GIDShow is the grammar of gid show and gid watch: [DEV[/PORT]] and the
// criteria of gid.Select (ParseGID).
var GIDShow = show(devPort,
	Keyword{"type", []Value{words("v1", "v2", "ib")}},
	Keyword{"ipv4", nil},
	Keyword{"ipv6", nil},
	Keyword{"netdev", []Value{netdev}},
)

// GID is the grammar of grdma gid.
var GID = &Syntax{Verbs: append(showVerbs(GIDShow), Verb{"watch", GIDShow}, helpVerb)}

// statLink is stat's "link DEV[/PORT]".
var statLink = Keyword{"link", []Value{devPort}}

// statQPShow are the filters of stat qp show.
var statQPShow = []Keyword{
	statLink,
	helpKeyword,
	{"cntn", []Value{free}},
	{"lqpn", []Value{free}},
	{"pid", []Value{free}},
	{"qp-type", []Value{words("RC", "UC", "UD", "SMI", "GSI", "RAW_PACKET", "RAW_IPV6", "RAW_ETHERTYPE", "XRC_INI", "XRC_TGT", "DRIVER")}},
	{"optional-counters", []Value{free}},
}

// Stat is the grammar of grdma stat.
var Stat = &Syntax{Verbs: append(showVerbs(&Syntax{Keywords: []Keyword{statLink, {"mr", nil}, helpKeyword}}),
	helpVerb,
	Verb{"qp", &Syntax{VerbOptional: true, Keywords: statQPShow, Verbs: []Verb{
		{"show", &Syntax{Keywords: statQPShow}},
		{"list", &Syntax{Keywords: statQPShow}},
		{"mode", &Syntax{Keywords: []Keyword{statLink}}},
		{"set", &Syntax{Keywords: []Keyword{
			{"link", []Value{port}},
			{"auto", []Value{words("type", "pid", "type,pid", "off"), {Kind: AutoOnOff}}},
			{"optional-counters", []Value{onOff}},
		}}},
		{"bind", &Syntax{Keywords: []Keyword{{"link", []Value{port}}, {"lqpn", []Value{free}}, {"cntn", []Value{free}}}}},
		{"unbind", &Syntax{Keywords: []Keyword{{"link", []Value{port}}, {"cntn", []Value{free}}, {"lqpn", []Value{free}}}}},
		helpVerb,
	}}},
	Verb{"mr", &Syntax{Keywords: []Keyword{{"mrn", []Value{free}}, {"dev", []Value{device}}}}},
	Verb{"mode", &Syntax{Keywords: []Keyword{{"supported", nil}, statLink}}},
	Verb{"set", &Syntax{Keywords: []Keyword{{"link", []Value{port}}, {"optional-counters", []Value{free}}}}},
	Verb{"unset", &Syntax{Keywords: []Keyword{{"link", []Value{port}}, {"optional-counters", nil}}}},
	Verb{"export", &Syntax{}})}

// resObject is the grammar of the filters of res show OBJECT, from the
// res filter table (ResFilters).
func resObject(t nldev.ResType) *Syntax {
	s := &Syntax{}
	for _, f := range ResFilters(t) {
		v := free
		switch {
		case f.Kind == FilterLocation && f.Name == "link" && t.PerPort():
			v = devPort
		case f.Kind == FilterLocation:
			v = device
		case f.Values != nil:
			v = words(f.Values...)
		}
		s.Keywords = append(s.Keywords, Keyword{f.Name, []Value{v}})
	}
	return s
}

// resShow is res show's level: an object and its filters, or a device.
func resShow() *Syntax {
	s := &Syntax{VerbOptional: true, Pos: []Positional{{Value: device}}}
	for _, t := range nldev.ResTypes {
		s.Verbs = append(s.Verbs, Verb{t.String(), resObject(t)})
	}
	frmr := &Syntax{Keywords: []Keyword{{"dev", []Value{device}}}}
	for _, f := range FRMRPoolFilters {
		frmr.Keywords = append(frmr.Keywords, Keyword{f.Name, []Value{free}})
	}
	s.Verbs = append(s.Verbs, Verb{"frmr_pools", frmr})
	return s
}

// Res is the grammar of grdma res.
var Res = &Syntax{Verbs: []Verb{{"show", resShow()}, {"set", &Syntax{Verbs: []Verb{{"frmr_pools", &Syntax{Keywords: []Keyword{
	{"dev", []Value{device}}, {"aging", []Value{free}}, {"pinned", []Value{free, free}},
}}}}}}, {"list", resShow()}, helpVerb}}

// Check is the grammar of grdma check (ParseCheck): the check names
// (CheckNames), then the expectations.
var Check = &Syntax{Keywords: append(checkWords(),
	Keyword{"state", []Value{words("ACTIVE", "ARMED", "INIT", "DOWN")}},
	Keyword{"min-rate", []Value{free}},
	Keyword{"mtu", []Value{words("256", "512", "1024", "2048", "4096")}},
	Keyword{"gid-type", []Value{words("v1", "v2", "ib")}},
	Keyword{"gid-index", []Value{free}},
	Keyword{"type", []Value{words("v1", "v2", "ib")}},
	Keyword{"ipv4", nil},
	Keyword{"ipv6", nil},
	Keyword{"netdev-mtu", []Value{free}},
	Keyword{"device-count", []Value{free}},
	Keyword{"device-names", []Value{device}},
	Keyword{"gpu", []Value{gpuFn}},
)}

func checkWords() []Keyword {
	var out []Keyword
	for _, name := range CheckNames {
		out = append(out, Keyword{Name: name})
	}
	return out
}

// Probe is the grammar of grdma probe (ParseProbe).
var Probe = &Syntax{Pos: []Positional{{Value: devPort}}, Keywords: []Keyword{
	{"gid-index", []Value{free}},
	{"traffic", nil},
	{"count", []Value{free}},
	{"listen", nil},
	{"peer", []Value{free}},
	{"bw", []Value{words("write", "send", "read")}},
	{"lat", []Value{words("write", "send", "read")}},
	{"pingpong", nil},
	{"size", []Value{{Kind: Free, Words: []string{"cycle"}}}}, // BYTES, or ping's cycle
	{"iters", []Value{free}},
	{"duration", []Value{free}},
	{"timeout", []Value{free}},
	{"from", []Value{free}},
	{"serve", nil},
	{"peers", []Value{free}},
	{"memory", []Value{free}},
	{"peer-memory", []Value{free}},
	{"grace", []Value{free}},
	{"auth", []Value{free}},
	{"ud-pingpong", nil},
	{"ping", nil},
	{"interval", []Value{free}},
	{"cm", nil},
	{"tos", []Value{free}},
	{"rping", nil},
	{"ucmatose", nil},
	{"perftest", []Value{words("bw", "lat"), words("write", "send", "read")}},
	{"fabtests", nil},
}}

// objects are the grammars by object name. monitor takes no words and
// exporter flags only (cobra completes them).
var objects = map[string]*Syntax{
	"dev": Dev, "link": Link, "sys": Sys, "port": PortObject, "gid": GID, "stat": Stat,
	"monitor": {}, "res": Res, "check": Check, "topo": Topo, "probe": Probe, "sweep": Sweep, "exporter": {}, "cm": CM,
}

// Object returns the grammar of object (a command name: dev, link, res,
// ...), or nil when it has none.
func Object(name string) *Syntax { return objects[name] }

// Objects lists the objects that have a grammar.
func Objects() []string {
	out := make([]string, 0, len(objects))
	for name := range objects {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
