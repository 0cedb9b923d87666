package main

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Man pages, section 8, generated from the command tree: grdma(8) and
// grdma-OBJECT(8) for every object. Each page takes its synopsis from Use,
// its description from Long, its options from the flags and its examples
// from Example; what a command's help does not say (what each example
// does, exit statuses beyond 0/1/2, related pages) comes from the tables
// below. `make man` rewrites man/ (TestManPages with -update); the test
// fails when man/ is stale.

// manSection is the manual section of every page.
const manSection = "8"

// manPageName is the file name of a command's page: grdma.8, grdma-link.8.
func manPageName(cmd *cobra.Command) string {
	return strings.ReplaceAll(cmd.CommandPath(), " ", "-") + "." + manSection
}

// manCommands are the commands that get a page: the root and each
// available object.
func manCommands(root *cobra.Command) []*cobra.Command {
	cmds := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// manPages renders every page, by file name, dated date (YYYY-MM-DD).
func manPages(root *cobra.Command, date string) map[string][]byte {
	pages := map[string][]byte{}
	for _, c := range manCommands(root) {
		pages[manPageName(c)] = manPage(c, date)
	}
	return pages
}

// manExamples explain the examples of the commands' help, by command line.
// An example without an entry (and without a "# comment") is shown alone.
var manExamples = map[string]string{
	// dev
	"grdma dev":                                    "List the RDMA devices: index, name, node type, protocol and GUIDs.",
	"grdma -j dev show rxe0":                       "Show device rxe0 as JSON, with the keys rdma -j uses.",
	"grdma -d dev":                                 "Add adaptive moderation and the device capability flags to the listing.",
	"grdma dev set rxe0 name rxe_a":                "Rename device rxe0 to rxe_a.",
	"grdma dev set rxe0 netns blue":                "Move device rxe0 into the network namespace blue (/run/netns/blue); needs sys set netns exclusive first.",
	"grdma dev set mlx5_0 adaptive-moderation on":  "Turn adaptive interrupt moderation on for mlx5_0.",
	"grdma link":                                   "List every port of every device: state, physical state and netdev.",
	"grdma -j link show rxe0/1":                    "Show port 1 of rxe0 as JSON.",
	"grdma link show rxe0":                         "Show all ports of rxe0 (rdma requires DEV/PORT here).",
	"grdma link add rxe0 type rxe netdev eth0":     "Create the Soft-RoCE device rxe0 on top of eth0 (loads nothing: rdma_rxe must be loaded or loadable).",
	"grdma link delete rxe0":                       "Remove the software device rxe0.",
	"grdma sys":                                    "Show the subsystem settings: netns mode, privileged Q_Key mode, monitor support, copy-on-fork.",
	"grdma -j sys":                                 "The same as a JSON object (rdma -j sys prints text).",
	"grdma sys set netns exclusive":                "Let each network namespace see only its own RDMA devices, so that devices can be moved with dev set DEV netns.",
	"grdma sys set privileged-qkey on":             "Allow only privileged users to use controlled Q_Keys.",
	"grdma port":                                   "List every port with link layer, width, speed, rate and MTU.",
	"grdma -j port show mlx5_0/1":                  "Show port 1 of mlx5_0 as JSON.",
	"grdma -d port show rxe0":                      "Show the ports of rxe0, adding the maximum MTU.",
	"grdma gid":                                    "List the populated GID table entries of every port, as show_gids does.",
	"grdma gid show mlx5_0/1 type v2 ipv4":         "Only the RoCE v2 GIDs holding an IPv4 address, of port 1 of mlx5_0.",
	"grdma -j gid show rxe0":                       "The GIDs of rxe0 as JSON.",
	"grdma stat":                                   "Print every hardware counter of every port.",
	"grdma -j stat show link rxe0/1":               "The counters of port 1 of rxe0 as JSON.",
	"grdma stat show -i 1s -c 10":                  "Print per-second rates of every counter, ten times, one second apart.",
	"grdma -j stat show link mlx5_0/1 -i 5s":       "Rates of port 1 of mlx5_0 every five seconds, one JSON object per line, until interrupted.",
	"grdma stat mode supported":                    "List the optional counters each port supports.",
	"grdma stat qp set link mlx5_0/1 auto type on": "Bind new QPs to counters automatically, one counter per QP type.",
	"grdma monitor":                                "Print device and netdev events until interrupted.",
	"grdma res":                                    "Count the resources (QPs, CQs, MRs, ...) of every device.",
	"grdma -j res show rxe0":                       "The counts of rxe0 as JSON.",
	"grdma res show qp":                            "List every queue pair.",
	"grdma res show mr pid 4242":                   "The memory regions of process 4242.",
	"grdma probe rxe0":                             "Bring an RC queue pair of rxe0 port 1 to RTS and tear it down, printing each step.",
	"grdma probe rxe0/1 traffic":                   "Also send, write and read through it, verifying the data.",
	"grdma probe mlx5_0 gid-index 3":               "Probe mlx5_0 with GID index 3 as the queue pair's address.",
	"grdma -j probe rxe0 traffic count 200":        "Run the traffic probe 200 times and summarize the step times as JSON.",
	"grdma check":                                  "Run every health check and print a PASS/WARN/FAIL table.",
	"grdma -j check gdr":                           "Only the GPUDirect RDMA checks, as JSON.",

	"grdma stat set link mlx5_0/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts": "Enable two optional congestion-control counters on port 1 of mlx5_0.",
	"grdma stat export --textfile /var/lib/node_exporter/textfile/rdma.prom":      "Write all counters and port states for node_exporter's textfile collector.",
	"NCCL_IB_GID_INDEX=$(grdma gid show mlx5_0/1 type v2 ipv4 netdev eth0 -q)":    "Pick the GID index an NCCL job should use: RoCE v2, IPv4, on eth0.",
	"grdma res show qp link mlx5_0/1 state RTS type RC,UD":                        "The queue pairs of port 1 of mlx5_0 that are in RTS and of type RC or UD.",
	"grdma -j res show cq dev rxe0 cqn 1":                                         "Completion queue 1 of rxe0, looked up directly.",
	"grdma -dd res show qp lqpn 1-100":                                            "Queue pairs 1 to 100, with driver-internal ones and driver attributes.",
	"grdma check ports min-rate 100 mtu 4096 gid-type v2 netdev-mtu 9000":         "Check that every port is up at 100 Gb/s or more, with a 4096-byte MTU, a RoCE v2 GID and a 9000-byte netdev MTU.",
	"grdma check devices device-count 8 -q && echo healthy":                       "Check quietly that there are eight RDMA devices, each with its uverbs device.",
	"grdma check --textfile /var/lib/node_exporter/textfile/grdma_check.prom":     "Also write the results as Prometheus gauges.",
	"grdma completion bash > /usr/share/bash-completion/completions/grdma":        "Install the bash completion for all users.",
	"grdma completion zsh > \"${fpath[1]}/_grdma\"":                               "Install the zsh completion in the first directory of $fpath.",
	"grdma completion fish > ~/.config/fish/completions/grdma.fish":               "Install the fish completion for the current user.",
	"grdma -n blue dev":        "List the RDMA devices of network namespace blue.",
	"grdma -j -p link":         "Every port as indented JSON.",
	"grdma -b commands.txt -f": "Run the commands of commands.txt, one per line, going on after a failure.",
	"grdma -V":                 "Print the version and the commit it was built from.",
}

// manRootExamples are grdma(8)'s examples (the root command has none).
const manRootExamples = `  grdma dev
  grdma -j -p link
  grdma -n blue dev
  grdma -b commands.txt -f
  grdma -V`

// manExitNotes add to the exit statuses of a command, by status.
var manExitNotes = map[string]map[int]string{
	"monitor": {
		0: "With --count N, after N events. Without it, grdma listens until it is interrupted and is ended by the signal (a shell reports 130 after Ctrl-C).",
		2: "Also when the kernel sends no RDMA netlink events: \"monitor needs Linux 6.13 or newer\".",
	},
	"stat": {0: "With -i and no -c, grdma prints rates until it is interrupted and is ended by the signal (a shell reports 130 after Ctrl-C)."},
}

// manSeeAlso are the related pages of each command, besides grdma(8),
// the other grdma pages and rdma(8).
var manSeeAlso = map[string][]string{
	"grdma":   {"ip-netns(8)"},
	"dev":     {"rdma-dev(8)", "ip-netns(8)"},
	"link":    {"rdma-link(8)", "ip-link(8)"},
	"sys":     {"rdma-system(8)"},
	"stat":    {"rdma-statistic(8)"},
	"res":     {"rdma-resource(8)"},
	"port":    {"rdma-link(8)", "ibv_devinfo(1)", "ibstatus(8)"},
	"gid":     {"ibv_devinfo(1)"},
	"probe":   {"ibv_devinfo(1)", "ibv_rc_pingpong(1)"},
	"monitor": {"rdma-dev(8)", "rdma-link(8)"},
}

// manPage renders one page.
func manPage(cmd *cobra.Command, date string) []byte {
	var b bytes.Buffer
	isRoot := !cmd.HasParent()
	name := strings.TrimSuffix(manPageName(cmd), "."+manSection)
	fmt.Fprintf(&b, ".\\\" Generated by grdma (TestManPages, make man) from its command tree. Do not edit.\n")
	fmt.Fprintf(&b, ".TH %s %s %s grdma \"System Administration\"\n", roff(strings.ToUpper(name)), manSection, date)
	b.WriteString(".nh\n.ad l\n") // no hyphenation, ragged right: commands stay whole

	b.WriteString(".SH NAME\n")
	short := cmd.Short
	if isRoot {
		short = "manage Linux RDMA devices"
	}
	fmt.Fprintf(&b, "%s \\- %s\n", roff(name), roff(short))

	b.WriteString(".SH SYNOPSIS\n")
	for _, line := range manSynopsis(cmd) { // each with a hanging indent
		fmt.Fprintf(&b, ".SY grdma\n%s\n.YS\n", line)
	}

	desc, exit := splitExitStatus(cmd.Long)
	b.WriteString(".SH DESCRIPTION\n")
	writeText(&b, desc)

	if isRoot {
		b.WriteString(".SH OBJECTS\n")
		for _, c := range manCommands(cmd)[1:] {
			names := append([]string{c.Name()}, c.Aliases...)
			for i, n := range names {
				names[i] = `\fB` + roff(n) + `\fR`
			}
			fmt.Fprintf(&b, ".TP\n%s\n%s; see \\fB%s\\fR(%s).\n", strings.Join(names, ", "), roff(c.Short), roff(strings.TrimSuffix(manPageName(c), "."+manSection)), manSection)
		}
	}

	local := manFlags(cmd.LocalNonPersistentFlags(), cmd.Root())
	if isRoot {
		local = nil
	}
	if len(local) > 0 {
		b.WriteString(".SH OPTIONS\n")
		b.WriteString(strings.Join(local, ""))
	}
	b.WriteString(".SH GLOBAL OPTIONS\n")
	if !isRoot {
		b.WriteString("Accepted anywhere on the command line, as with \\fBrdma\\fR(8).\n")
	}
	b.WriteString(strings.Join(manFlags(cmd.Root().PersistentFlags(), cmd.Root()), ""))
	if isRoot {
		b.WriteString(strings.Join(manFlags(cmd.Root().LocalNonPersistentFlags(), cmd), ""))
		b.WriteString(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nPrint the help of grdma, or of an object (also \\fBgrdma\\fR \\fIOBJECT\\fR \\fBhelp\\fR).\n")
		b.WriteString(".SH ENVIRONMENT\n.TP\n.B GRDMA_SYSFS_ROOT\nThe default of \\fB\\-\\-sysfs\\-root\\fR.\n")
		b.WriteString(".SH FILES\n")
		for _, f := range [][2]string{
			{"/sys/class/infiniband", "RDMA devices and ports: rates, GID tables, counters."},
			{"/sys/class/net", "network devices, for RoCE ports and link add."},
			{"/dev/infiniband/uverbs*", "the verbs devices (port MTUs, probe)."},
			{"/run/netns", "named network namespaces, for \\-n and dev set DEV netns."},
		} {
			fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", f[0], f[1])
		}
	}

	b.WriteString(".SH EXIT STATUS\n")
	writeExitStatus(&b, cmd, exit)

	examples := cmd.Example
	if isRoot {
		examples = manRootExamples
	}
	if ex := manExampleList(examples); len(ex) > 0 {
		b.WriteString(".SH EXAMPLES\n")
		for _, e := range ex {
			fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n", roff(e[0]))
			if e[1] != "" {
				fmt.Fprintf(&b, "%s\n", roff(e[1]))
			}
		}
	}

	b.WriteString(".SH SEE ALSO\n")
	var see []string
	if !isRoot {
		see = append(see, "grdma(8)")
	}
	key := cmd.Name()
	see = append(see, manSeeAlso[key]...)
	see = append(see, "rdma(8)")
	if isRoot {
		for _, c := range manCommands(cmd)[1:] {
			see = append(see, strings.TrimSuffix(manPageName(c), "."+manSection)+"("+manSection+")")
		}
	}
	for i, s := range see {
		page, sec, _ := strings.Cut(s, "(")
		see[i] = `\fB` + roff(page) + `\fR(` + sec
	}
	b.WriteString(strings.Join(see, ",\n") + "\n")
	return b.Bytes()
}

// manSynopsis turns Use into synopsis lines, what follows "grdma": one per
// line of Use and per top-level alternative whose first word is a verb
// ("link add ...").
func manSynopsis(cmd *cobra.Command) []string {
	var out []string
	prefix := `[\fIOPTIONS\fR] `
	if !cmd.HasParent() {
		return []string{
			prefix + `\fIOBJECT\fR [\fICOMMAND\fR [\fIARGS\fR]]`,
			prefix + `\fB\-b\fR \fIFILE\fR`,
			`\fB\-V\fR`,
		}
	}
	var verbs []string
	if g := compGrammars[cmd.Name()]; g != nil {
		verbs = g.verbNames()
	}
	for _, line := range strings.Split(cmd.Use, "\n") {
		line = strings.TrimSpace(line)
		obj, rest, _ := strings.Cut(line, " ")
		for _, alt := range splitAlternatives(rest, verbs) {
			out = append(out, prefix+synopsisWords(strings.TrimSpace(obj+" "+alt)))
		}
	}
	return out
}

// splitAlternatives splits "a | b | c" at the bars outside brackets whose
// next word is a verb.
func splitAlternatives(s string, verbs []string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case '|':
			if depth != 0 || i == 0 || s[i-1] != ' ' || i+1 >= len(s) || s[i+1] != ' ' {
				continue
			}
			next, _, _ := strings.Cut(strings.TrimSpace(s[i+1:]), " ")
			if slices.Contains(verbs, next) {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

var synopsisToken = regexp.MustCompile(`[A-Za-z0-9_.,-]+|[^A-Za-z0-9_.,-]+`)

// synopsisWords sets literal words in bold and placeholders (DEV, PORT,
// NAME, ...) in italics, and keeps short bracketed groups on one line.
func synopsisWords(s string) string {
	s = protectGroups(s)
	var b strings.Builder
	for _, tok := range synopsisToken.FindAllString(s, -1) {
		switch {
		case strings.ToUpper(tok) == tok && strings.ToLower(tok) != tok:
			b.WriteString(`\fI` + roff(tok) + `\fR`)
		case tok[0] >= 'a' && tok[0] <= 'z' || tok[0] == '-':
			b.WriteString(`\fB` + roff(tok) + `\fR`)
		default:
			b.WriteString(strings.ReplaceAll(roff(tok), "\x00", `\~`))
		}
	}
	return b.String()
}

// maxGroup is the longest [...] or {...} group kept on one line.
const maxGroup = 40

// protectGroups marks (as NUL) the spaces whose innermost bracketed group
// is short enough to keep on one line.
func protectGroups(s string) string {
	b := []byte(s)
	var open []int
	for i, c := range b {
		switch c {
		case '[', '{':
			open = append(open, i)
		case ']', '}':
			if len(open) == 0 {
				continue
			}
			start := open[len(open)-1]
			open = open[:len(open)-1]
			if i-start > maxGroup {
				continue
			}
			for k := start; k < i; k++ {
				if b[k] == ' ' {
					b[k] = 0
				}
			}
		}
	}
	return string(b)
}

// splitExitStatus takes the "Exit status: ..." sentence out of a Long text.
func splitExitStatus(long string) (desc, exit string) {
	lines := strings.Split(long, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "Exit status:") {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "" {
			end++
		}
		exit = strings.TrimSpace(strings.TrimPrefix(strings.Join(lines[i:end], " "), "Exit status:"))
		rest := append(slices.Clone(lines[:i]), lines[end:]...)
		return strings.TrimSpace(strings.Join(rest, "\n")), exit
	}
	return long, ""
}

// writeExitStatus writes the statuses: grdma's usual three, told in full,
// except where the command's help says otherwise ("Exit status: 0 every
// step passed, 1 a step failed, 2 ..."), with the notes of manExitNotes.
func writeExitStatus(b *bytes.Buffer, cmd *cobra.Command, own string) {
	text := map[int]string{
		0: "Success.",
		1: "The operation failed: the kernel refused it, a device or port was not found, a file could not be read. A message on standard error says what went wrong and, where it can, what to do.",
		2: "The command line was wrong: an unknown object, command or keyword, a missing or malformed argument, an invalid name. Nothing was changed.",
	}
	_, rootExit := splitExitStatus(cmd.Root().Long)
	usual := parseExitStatus(rootExit)
	for code, t := range parseExitStatus(own) {
		if t != usual[code] {
			text[code] = upperFirst(t) + "."
		}
	}
	for code := 0; code <= 2; code++ {
		t := text[code]
		if n := manExitNotes[cmd.Name()][code]; n != "" {
			t += " " + n
		}
		fmt.Fprintf(b, ".TP\n.B %d\n%s\n", code, roffLine(t))
	}
}

var exitCodeAt = regexp.MustCompile(`(?:^|, )(\d) `)

// parseExitStatus splits "0 success, 1 the operation failed, 2 ..." by
// status; nil when the text is not of that form.
func parseExitStatus(s string) map[int]string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	locs := exitCodeAt.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 || locs[0][0] != 0 {
		return nil
	}
	out := map[int]string{}
	for i, l := range locs {
		end := len(s)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[int(s[l[2]]-'0')] = s[l[1]:end]
	}
	return out
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeText writes a help text: paragraphs separated by blank lines, and
// indented lines (tables, lists) kept as they are.
func writeText(b *bytes.Buffer, text string) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	first := true
	for i := 0; i < len(lines); {
		if strings.TrimSpace(lines[i]) == "" {
			i++
			continue
		}
		if !first {
			b.WriteString(".PP\n")
		}
		first = false
		if strings.HasPrefix(lines[i], "  ") {
			b.WriteString(".RS 4\n.nf\n")
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "  ") || strings.HasPrefix(lines[i], "\t")); i++ {
				b.WriteString(roffLine(strings.TrimPrefix(lines[i], "  ")) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
			continue
		}
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != "" && !strings.HasPrefix(lines[i], "  "); i++ {
			b.WriteString(roffLine(strings.TrimSpace(lines[i])) + "\n")
		}
	}
}

// manFlags renders flags as .TP entries. A usage starting with a word is
// capitalized unless the word is an object ("res show ...: ...").
func manFlags(fs *pflag.FlagSet, root *cobra.Command) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		varname, usage := pflag.UnquoteUsage(f)
		var names []string
		if f.Shorthand != "" {
			names = append(names, `\fB\-`+roff(f.Shorthand)+`\fR`)
		}
		names = append(names, `\fB\-\-`+roff(f.Name)+`\fR`)
		head := strings.Join(names, ", ")
		switch f.Value.Type() {
		case "bool", "count":
		default:
			if varname == "" || varname == f.Value.Type() {
				varname = strings.ToUpper(f.Value.Type())
			}
			head += ` \fI` + roff(varname) + `\fR`
		}
		if !strings.HasSuffix(usage, ".") {
			usage += "."
		}
		if first, _, _ := strings.Cut(usage, " "); !slices.ContainsFunc(root.Commands(), func(c *cobra.Command) bool { return c.Name() == first }) {
			usage = upperFirst(usage)
		}
		out = append(out, fmt.Sprintf(".TP\n%s\n%s\n", head, roffLine(usage)))
	})
	return out
}

// manExampleList splits an Example text into command lines and their
// explanations (a trailing "# comment", else manExamples).
func manExampleList(example string) [][2]string {
	var out [][2]string
	for _, l := range strings.Split(example, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		cmdLine, comment := l, ""
		if i := strings.Index(l, "  #"); i >= 0 {
			cmdLine, comment = strings.TrimSpace(l[:i]), strings.TrimSpace(l[i+3:])
			comment = upperFirst(comment)
			if !strings.HasSuffix(comment, ".") {
				comment += "."
			}
		}
		if comment == "" {
			comment = manExamples[cmdLine]
		}
		out = append(out, [2]string{cmdLine, comment})
	}
	return out
}

// roff escapes text for a roff text line or argument: backslashes, and
// hyphens, quotes and tildes that must stay ASCII for copy and paste.
func roff(s string) string {
	return strings.NewReplacer(
		`\`, `\e`,
		"-", `\-`,
		"'", `\(aq`,
		"`", `\(ga`,
		"~", `\(ti`,
		"^", `\(ha`,
	).Replace(s)
}

// roffLine escapes a whole text line, guarding a leading control character.
func roffLine(s string) string {
	s = roff(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, `\(aq`) {
		s = `\&` + s
	}
	return s
}
