package cmdline

import (
	"slices"
	"strings"
)

// SplitBatchLine splits a line of a -batch file into words as rdma does:
// blanks separate words, single or double quotes group them, and '#'
// outside a word starts a comment. It works on bytes, so that a word that
// is not UTF-8 (a file name, say) reaches the command unchanged. An
// unterminated quote is a *UsageError.
func SplitBatchLine(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '#' && !inWord:
			return words, nil
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, Usagef("", "unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Objects is rdma's object table (rdma.c), which decides what an
// abbreviated object means ("s" is system, "st" statistic), then grdma's
// own objects.
var Objects = []string{"help", "dev", "link", "resource", "system", "statistic", "monitor",
	"check", "topo", "port", "gid", "probe", "sweep", "exporter", "cm", "completion"}

// valueOptions are grdma's long options that take the next word as their
// value; -b and -n are their short forms.
var valueOptions = []string{"--batch", "--sysfs-root", "--proc-root", "--netns"}

// completeCmds are the hidden commands of cobra's shell completion
// (cobra.ShellCompRequestCmd, ShellCompNoDescRequestCmd): the words after
// them are a command line being completed.
var completeCmds = []string{"__complete", "__completeNoDesc"}

// ResolveObject writes the object word of a grdma command line out in
// full, as rdma resolves it (Abbrev over Objects), skipping the
// global options before it and the values they take. args is not changed.
func ResolveObject(args []string) []string {
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w == "--":
			return args
		case strings.HasPrefix(w, "--"):
			if !strings.Contains(w, "=") && slices.Contains(valueOptions, w) {
				i++
			}
			continue
		case strings.HasPrefix(w, "-") && len(w) > 1:
			// A cluster of short options; -b and -n take the next word
			// when they end it.
			if last := w[len(w)-1]; (last == 'b' || last == 'n') && !strings.ContainsAny(w[1:len(w)-1], "bn") {
				i++
			}
			continue
		}
		if slices.Contains(completeCmds, w) && i+2 < len(args) {
			// Completing: resolve the words before the last, which is
			// the one being completed and stays as typed.
			n := len(args) - 1
			out := append(args[:i+1:i+1], ResolveObject(args[i+1:n])...)
			return append(out, args[n])
		}
		if full, ok := Abbrev(w, Objects); ok && full != w {
			out := slices.Clone(args)
			out[i] = full
			return out
		}
		return args
	}
	return args
}
