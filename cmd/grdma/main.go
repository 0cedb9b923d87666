// Command grdma manages Linux RDMA devices over RDMA netlink, in the spirit
// of iproute2's rdma: the same commands print the same text and JSON, and it
// adds ports, GID tables, health checks and a verbs probe.
package main

import "os"

func main() {
	a := newApp(os.Stdin, os.Stdout, os.Stderr)
	os.Exit(a.main(os.Args[1:]))
}
