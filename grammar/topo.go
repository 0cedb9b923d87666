package grammar

import (
	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/topo"
)

// Topo is the grammar of grdma topo (ParseTopo).
var Topo = &Syntax{Keywords: []Keyword{
	{"show", nil},
	{"gpu", []Value{gpuFn}},
	{"gdr-level", []Value{words("LOC", "PIX", "PXB", "PHB", "SYS")}},
	{"platform", []Value{words("bare-metal", "virtual")}},
	helpKeyword,
}}

// ParseTopo reads the words of `grdma topo` into topo.Options (help is
// reported by help true):
//
//	[show] [gpu BDF...] [gdr-level LOC|PIX|PXB|PHB|SYS|0-4] [platform bare-metal|virtual]
//
// Wrong words are a *cmdline.UsageError naming the problem.
func ParseTopo(words []string) (opts topo.Options, help bool, err error) {
	args := cmdline.NewArgs(words, "")
	for !args.Empty() {
		kw, err := args.Keyword("parameter", "", Topo.KeywordNames()...)
		if err != nil {
			return opts, false, err
		}
		switch kw {
		case Help:
			return opts, true, nil
		case "gpu":
			if opts.GPUs, err = gpuFunctions(args, opts.GPUs); err != nil {
				return opts, false, err
			}
		case "gdr-level":
			v, err := args.Value("gdr-level value (LOC, PIX, PXB, PHB or SYS)")
			if err != nil {
				return opts, false, err
			}
			if opts.GDRLevel, err = topo.ParseGDRLevel(v); err != nil {
				return opts, false, cmdline.Usagef("", "%v", err)
			}
		case "platform":
			v, err := args.Value("platform value (bare-metal or virtual)")
			if err != nil {
				return opts, false, err
			}
			p, err := args.Match("platform", v, topoPlatforms)
			if err != nil {
				return opts, false, err
			}
			opts.Platform = map[string]topo.Platform{"bare-metal": topo.PlatformBareMetal, "virtual": topo.PlatformVirtual}[p]
		}
	}
	return opts, false, nil
}

var topoPlatforms = []string{"bare-metal", "virtual"}

// gpuFunctions reads the PCI addresses after gpu (one at least, as many
// as follow) onto have.
func gpuFunctions(args *cmdline.Args, have []pci.Address) ([]pci.Address, error) {
	n := 0
	for !args.Empty() {
		a, err := pci.ParseAddress(args.Words[0])
		if err != nil {
			if n == 0 {
				return nil, cmdline.Usagef("", "gpu wants PCI addresses such as 0000:05:00.0: %v", err)
			}
			break
		}
		args.Next()
		have = append(have, a)
		n++
	}
	if n == 0 {
		return nil, cmdline.Usagef("", "missing PCI address after gpu (such as 0000:05:00.0)")
	}
	return have, nil
}
