package main

import (
	"fmt"
	"io"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-V" || args[0] == "--version") {
		fmt.Fprintf(stdout, "grdma %s\n", version)
		return 0
	}
	fmt.Fprintln(stderr, "grdma: not yet implemented")
	return 2
}
