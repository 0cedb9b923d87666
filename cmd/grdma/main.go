// Command grdma manages Linux RDMA devices over RDMA netlink, in the spirit
// of iproute2's rdma.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
