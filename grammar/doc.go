// Package grammar is the one home of grdma's command-line words: each
// object's verbs, keywords and values (a Syntax, from which the parsers
// take their keyword lists, shell completion walks and the man pages'
// synopses are checked), the tables that map words to typed values (the
// filters of res show: ResFilters), and the parsers that turn words into
// the typed values the libraries take: ParseResSelect gives an
// nldev.ResSelect, ParseProbe a ProbeRequest of verbsprobe options,
// ParseCheck the health.Expect of grdma check, ParseGID an ib.PortRef and
// gid.Criteria. Protocol packages (nldev, uverbs, gid, health,
// verbsprobe) know no command-line word.
//
// Words are abbreviated as rdma abbreviates them: the first word of a
// table, in its order, that a word starts (cmdline.Abbrev), so the order
// of a table is part of the grammar. What a parser rejects is a
// *cmdline.UsageError naming no help; the caller adds its own
// (cmdline.WithHelp).
//
// # Adding an object's words
//
// A new command (sweep, cm, topo, serve, ping ...) adds one file here:
// its Syntax, registered in objects under the command's name, and, where
// the command takes more than verbs, a parser that reads its keywords from
// that Syntax and returns the library's typed request:
//
//	// Ping is the grammar of grdma ping.
//	var Ping = &Syntax{Pos: []Positional{{Value: devPort}}, Keywords: []Keyword{
//		{"peer", []Value{free}},
//		{"count", []Value{free}},
//	}}
//
//	// ParsePing reads the words of grdma ping into a pinger.Request.
//	func ParsePing(words []string) (pinger.Request, error) {
//		args := cmdline.NewArgs(words, "")
//		...
//		kw, err := args.Keyword("argument", "", Ping.KeywordNames()...)
//		...
//	}
//
// cmd/grdma then calls ParsePing and the library; completion offers the
// words without further change, and TestCompletionGrammarsMatchCommands
// checks the command's synopsis against them.
package grammar
