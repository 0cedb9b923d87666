// Package cmdline is the grammar of rdma-style command lines, as iproute2's
// rdma reads them and grdma accepts them: words walked by a cursor (Args)
// whose keywords may be abbreviated (the first keyword, in the table's
// order, that a word starts: Abbrev), values after keywords,
// DEV[/PORT] arguments, the lines of a -batch file (SplitBatchLine) and the
// abbreviated object word (ResolveObject). What a parser rejects is a
// *UsageError: the words were wrong, not the machine.
//
// It imports only package ib (a DEV[/PORT] is an ib.PortRef). The words of
// each object, their tables and parsers are package grammar's, which
// builds on this one.
package cmdline
