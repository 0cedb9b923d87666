package grammar

import (
	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
)

// gidKeywords are the words of ParseGID after DEV[/PORT], in the order
// that decides abbreviations (GIDShow's table).
var gidKeywords = GIDShow.KeywordNames()

// ParseGID reads the words of `grdma gid show` and `gid watch`:
//
//	[DEV[/PORT]] [type v1|v2|ib] [ipv4|ipv6] [netdev NAME]
//
// into the port to look at (zero: every port) and the gid.Criteria of
// gid.Select.
// A first word of two letters or more that abbreviates a keyword is the
// keyword, not a device. Wrong words are a *cmdline.UsageError.
func ParseGID(words []string) (ib.PortRef, gid.Criteria, error) {
	args := cmdline.NewArgs(words, "")
	var want ib.PortRef
	var c gid.Criteria
	if !args.Empty() && !isGIDKeyword(args.Words[0]) {
		var err error
		if want, err = args.DevPort(args.Next()); err != nil {
			return want, c, err
		}
	}
	for !args.Empty() {
		kw, err := args.Keyword("gid show parameter", "", gidKeywords...)
		if err != nil {
			return want, c, err
		}
		switch kw {
		case "type":
			v, err := args.Value("type value (v1, v2 or ib)")
			if err != nil {
				return want, c, err
			}
			if c.Type, err = gid.ParseType(v); err != nil {
				return want, c, cmdline.Usagef("", "%v", err)
			}
		case "ipv4":
			c.Family = gid.IPv4
		case "ipv6":
			c.Family = gid.IPv6
		case "netdev":
			if c.Netdev, err = args.Value("netdev name"); err != nil {
				return want, c, err
			}
		}
	}
	return want, c, nil
}

// isGIDKeyword tells a criteria keyword (or a prefix of one, two letters
// or more) from a device name in the first word.
func isGIDKeyword(word string) bool {
	for _, k := range gidKeywords {
		if len(word) >= 2 && len(word) <= len(k) && k[:len(word)] == word {
			return true
		}
	}
	return false
}
