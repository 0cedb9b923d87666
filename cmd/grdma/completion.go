package main

import (
	"github.com/grdma/grdma/internal/completion"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/spf13/cobra"
)

// completionCommand prints a shell completion script. The scripts call
// back into grdma (the hidden __complete command), which completes object
// names itself and, through the grammars below, the iproute2-style words
// after them: verbs, keywords and their values, device names, DEV/PORT,
// netdev names (from /sys/class/net below --sysfs-root) and network
// namespaces.
func (a *app) completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script of a shell on standard output. Load it in the
current shell, or install it where the shell looks for completions (make
install does). Besides objects and options it completes the words after them:
commands (show, set, add, ...), keywords and their values (type rxe|siw,
netdev NAME, on|off, res filters), RDMA device names and DEV/PORT (asked of the
kernel over RDMA netlink, in the namespace of -n if given), netdev names (from
/sys/class/net, below --sysfs-root if given) and network namespace names (from
/run/netns). Without RDMA netlink, device names are simply not offered.`,
		Example: `  source <(grdma completion bash)     # load it into this bash session only
  grdma completion bash > /usr/share/bash-completion/completions/grdma
  grdma completion zsh > "${fpath[1]}/_grdma"
  grdma completion fish > ~/.config/fish/completions/grdma.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			av := newArgv(args, "grdma completion --help")
			shell, err := av.Keyword("shell", "", "bash", "zsh", "fish")
			if err != nil {
				return err
			}
			if err := av.Done(); err != nil {
				return err
			}
			root := cmd.Root()
			switch shell {
			case "bash":
				return root.GenBashCompletionV2(a.stdout, true)
			case "zsh":
				return root.GenZshCompletion(a.stdout)
			}
			return root.GenFishCompletion(a.stdout, true)
		},
	}
}

// attachCompletions gives every command of the tree whose grammar is known
// its argument completion, and the global options theirs. Commands added
// later without a grammar complete nothing after their name (rather than
// file names).
func (a *app) attachCompletions(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("netns", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completion.NetnsNames(netnsDir), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("sysfs-root", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	// Words after an unknown object are not file names either.
	root.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	for _, cmd := range root.Commands() {
		if cmd.ValidArgsFunction != nil || len(cmd.ValidArgs) > 0 || cmd.Name() == "help" {
			continue
		}
		cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cands, _ := completion.Complete(a.completionSource(), cmd.Name(), args, toComplete)
			return cands, cobra.ShellCompDirectiveNoFileComp
		}
	}
}

// netnsDir is where named network namespaces live (ip netns add).
var netnsDir = completion.DefaultNetnsDir

// completionSource is where completion finds device, netdev and namespace
// names: RDMA netlink in -n's namespace, /sys/class/net below --sysfs-root.
func (a *app) completionSource() completion.Names {
	return completion.Names{
		Devices: func() ([]nldev.Device, error) {
			_, devs, err := a.devices()
			return devs, err
		},
		Sysfs:    func() (sysfs.FS, error) { return a.sysfs("completion") },
		NetnsDir: netnsDir,
	}
}
