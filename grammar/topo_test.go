package grammar_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/topo"
)

func TestParseTopo(t *testing.T) {
	opts, help, err := grammar.ParseTopo(strings.Fields("sh gpu 0000:05:00.0 3b:00.0 gdr phb pl bare"))
	want := []pci.Address{{Bus: 5}, {Bus: 0x3b}}
	if err != nil || help || !slices.Equal(opts.GPUs, want) || opts.GDRLevel != topo.PathPHB || opts.Platform != topo.PlatformBareMetal {
		t.Errorf("ParseTopo = %+v, %v, %v", opts, help, err)
	}
	if opts, help, err := grammar.ParseTopo(nil); err != nil || help || opts.GPUs != nil || opts.GDRLevel != topo.PathUnknown {
		t.Errorf("ParseTopo() = %+v, %v, %v", opts, help, err)
	}
	if _, help, err := grammar.ParseTopo([]string{"help"}); err != nil || !help {
		t.Errorf("help: %v %v", help, err)
	}
	for line, msg := range map[string]string{
		"gpu":                  "missing PCI address after gpu",
		"gpu 05:00":            "gpu wants PCI addresses",
		"gdr-level NODE":       `NCCL_NET_GDR_LEVEL "NODE"`,
		"gdr-level":            "missing gdr-level value",
		"platform cloud":       `unknown platform "cloud"`,
		"frob":                 `unknown parameter "frob"`,
		"gpu 0000:05:00.0 bad": `unknown parameter "bad"`,
	} {
		_, _, err := grammar.ParseTopo(strings.Fields(line))
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want a usage error with %q", line, err, msg)
		}
	}
	_, exp, err := grammar.ParseCheck(strings.Fields("gdr gpu 0000:05:00.0 0000:0a:00.0"))
	if err != nil || len(exp.GPUs) != 2 || exp.GPUs[1] != (pci.Address{Bus: 0x0a}) {
		t.Errorf("check gdr gpu: %+v, %v", exp.GPUs, err)
	}
}
