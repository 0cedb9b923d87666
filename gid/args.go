package gid

import "github.com/grdma/grdma/cmdline"

// criteriaKeywords are the words of ParseArgs after DEV[/PORT], in the
// order that decides abbreviations.
var criteriaKeywords = []string{"type", "ipv4", "ipv6", "netdev"}

// ParseArgs reads the words of `grdma gid show` and `gid watch`:
//
//	[DEV[/PORT]] [type v1|v2|ib] [ipv4|ipv6] [netdev NAME]
//
// into the port to look at (zero: every port) and the Criteria of Select.
// A first word of two letters or more that abbreviates a keyword is the
// keyword, not a device. Wrong words are a *cmdline.UsageError.
func ParseArgs(words []string) (cmdline.DevPort, Criteria, error) {
	args := cmdline.NewArgs(words, "")
	var want cmdline.DevPort
	var c Criteria
	if !args.Empty() && !isKeyword(args.Words[0]) {
		var err error
		if want, err = args.DevPort(args.Next()); err != nil {
			return want, c, err
		}
	}
	for !args.Empty() {
		kw, err := args.Keyword("gid show parameter", "", criteriaKeywords...)
		if err != nil {
			return want, c, err
		}
		switch kw {
		case "type":
			v, err := args.Value("type value (v1, v2 or ib)")
			if err != nil {
				return want, c, err
			}
			if c.Type, err = ParseType(v); err != nil {
				return want, c, cmdline.Usagef("", "%v", err)
			}
		case "ipv4":
			c.Family = IPv4
		case "ipv6":
			c.Family = IPv6
		case "netdev":
			if c.Netdev, err = args.Value("netdev name"); err != nil {
				return want, c, err
			}
		}
	}
	return want, c, nil
}

// isKeyword tells a criteria keyword (or a prefix of one, two letters or
// more) from a device name in the first word.
func isKeyword(word string) bool {
	for _, k := range criteriaKeywords {
		if len(word) >= 2 && len(word) <= len(k) && k[:len(word)] == word {
			return true
		}
	}
	return false
}
