// Package cminterop speaks the wire protocols of RDMA CM peers that
// nobody here wrote, over package rdmacm (connection by IP address) and
// package uverbs (the queue pair and its memory): rping's
// (rdmacm-utils, port 7174), ucmatose's (port 7471) and perftest's -R
// (ib_write_bw -R and the others, port 18515), each as client and as
// server.
//
// Each run returns a *Result: the steps with their durations, what the
// CM chose (device, port, GID and its index, RoCE version, path MTU,
// ToS, hop limit, as verbsprobe.CMInfo), and what was exchanged. A run
// leaves nothing behind on any path: the CM IDs are destroyed, the
// memory deregistered, the queue pair and its completion queue
// destroyed, the channel closed.
//
// The peer is not trusted: its messages must have the protocol's length,
// the sizes it names must fit what this side registered (65535 bytes at
// most, rping's own limit), and what it wrote is compared, not
// interpreted; text taken from it (Result.Sample) is bounded and must be
// escaped by whoever prints it (render does).
//
// The protocols (see ../shared/reference/rdma-cm.md, §7):
//
//   - rping: each ping, the client SENDs its start buffer's address,
//     rkey and size (16 bytes, big-endian); the server RDMA READs it,
//     SENDs a 16-byte go-ahead; the client SENDs its second buffer's; the
//     server RDMA WRITEs back what it read and SENDs a go-ahead; the
//     client compares both buffers (rping -V).
//   - ucmatose: the server SENDs count messages of size bytes once the
//     connection is established, the client receives them all and SENDs
//     count replies; the server disconnects.
//   - perftest -R: a control connection whose SENDs carry the
//     parameters, one message each way at a time, the client's first
//     (the version, the cycle buffer and cache line, the MTU, then
//     pingpong_dest handshakes), and a data connection on the same port
//     made after the first handshake, on which the client runs the test
//     (bw write|read: a window of RDMA WRITEs or READs, then its bw
//     report to the server; bw send: SENDs into the server's posted
//     receives; lat send: a SEND ping-pong; lat write: an RDMA WRITE
//     ping-pong, each side polling the last byte of its buffer; lat
//     read: one RDMA READ at a time). The peer's version (5.70 or later), cycle
//     buffer (at most MaxPerftestCycleBuffer), cache line and report are
//     checked before anything is registered for them.
package cminterop
