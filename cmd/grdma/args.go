package main

import (
	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/grammar"
	"github.com/spf13/cobra"
)

// argv walks the words after an object (cmdline.Args).
type argv = cmdline.Args

func newArgv(words []string, help string) *argv { return cmdline.NewArgs(words, help) }

// cmdArgv is newArgv for the words of cmd, whose help "help" prints.
func cmdArgv(cmd *cobra.Command, words []string, help string) *argv {
	a := cmdline.NewArgs(words, help)
	a.OnHelp = func() error {
		if err := cmd.Help(); err != nil {
			return err
		}
		return errHelpShown
	}
	return a
}

// verbs are the verbs of an object's grammar, help among them.
func verbs(g *grammar.Syntax) []string { return g.VerbNames() }

// errHelpShown ends a command whose help a "help" word printed: exit 0.
var errHelpShown = &helpShownError{}

type helpShownError struct{}

func (*helpShownError) Error() string { return "" }
