// Command grdma manages Linux RDMA devices over RDMA netlink, in the spirit
// of iproute2's rdma: the same commands print the same text and JSON, and it
// adds ports, GID tables, health checks and a verbs probe.
package main

import (
	"os"
	"runtime"
)

func main() {
	// With a single P (one CPU, or a one-CPU cgroup limit), the runtime
	// hands the P to another thread whenever a system call takes longer
	// than 20 µs, and grdma makes thousands of short ones in a row (sysfs,
	// uverbs, netlink): a second P keeps that from happening. Measured in
	// the one-CPU guest: -j dev info over 16 devices 70.0 -> 58.5 ms.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	a := newApp(os.Stdin, os.Stdout, os.Stderr)
	os.Exit(a.main(os.Args[1:]))
}
