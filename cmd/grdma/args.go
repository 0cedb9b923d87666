package main

import (
	"github.com/grdma/grdma/cmdline"
	"github.com/spf13/cobra"
)

// argv walks the words after an object (cmdline.Args); devPort is a
// DEV[/PORT] argument.
type (
	argv    = cmdline.Args
	devPort = cmdline.DevPort
)

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

// errHelpShown ends a command whose help a "help" word printed: exit 0.
var errHelpShown = &helpShownError{}

type helpShownError struct{}

func (*helpShownError) Error() string { return "" }
