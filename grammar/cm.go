package grammar

import (
	"strconv"

	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
)

// cmSet is cm set's level: the port and the defaults to change.
var cmSet = &Syntax{Pos: []Positional{{Value: port}}, Keywords: []Keyword{
	{"roce-mode", []Value{words("v1", "v2")}},
	{"tos", []Value{free}},
}}

// CM is the grammar of grdma cm: the RDMA CM's per-port defaults
// (package cmconfig).
var CM = &Syntax{Verbs: append(showVerbs(show(devPort)), Verb{"set", cmSet}, helpVerb)}

// ParseCMShow reads the words of `grdma cm show`: [DEV[/PORT]] (zero:
// every port).
func ParseCMShow(words []string) (ib.PortRef, error) {
	args := cmdline.NewArgs(words, "")
	var want ib.PortRef
	if !args.Empty() {
		var err error
		if want, err = args.DevPort(args.Next()); err != nil {
			return want, err
		}
	}
	return want, args.Done()
}

// ParseCMSet reads the words of `grdma cm set`:
//
//	DEV/PORT [roce-mode v1|v2] [tos N]
//
// N is the ToS byte, 0 to 255 (0x hexadecimal too, as configfs takes it).
// At least one setting is needed.
func ParseCMSet(words []string) (ib.PortRef, cmconfig.Setting, error) {
	args := cmdline.NewArgs(words, "")
	var set cmconfig.Setting
	if args.Empty() {
		return ib.PortRef{}, set, cmdline.Usagef("", "cm set needs DEV/PORT, then roce-mode v1|v2 and/or tos N")
	}
	want, err := args.DevPort(args.Next())
	if err != nil {
		return want, set, err
	}
	if want.Port == 0 {
		return want, set, cmdline.Usagef("", "cm set needs a port: %s/PORT (the defaults are per port)", want.Device)
	}
	for !args.Empty() {
		kw, err := args.Keyword("cm setting", "", cmSet.KeywordNames()...)
		if err != nil {
			return want, set, err
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return want, set, err
		}
		switch kw {
		case "roce-mode":
			switch v {
			case "v1":
				set.RoCEMode = gid.TypeRoCEv1
			case "v2":
				set.RoCEMode = gid.TypeRoCEv2
			default:
				return want, set, cmdline.Usagef("", "roce-mode %q: want v1 or v2", v)
			}
		case "tos":
			n, err := strconv.ParseUint(v, 0, 8)
			if err != nil {
				return want, set, cmdline.Usagef("", "tos %q: want the ToS byte, 0 to 255 (DSCP×4 + ECN, e.g. 104 for DSCP 26)", v)
			}
			tos := uint8(n)
			set.ToS = &tos
		}
	}
	if set.RoCEMode == 0 && set.ToS == nil {
		return want, set, cmdline.Usagef("", "cm set %s: nothing to set: give roce-mode v1|v2 and/or tos N", want)
	}
	return want, set, nil
}
