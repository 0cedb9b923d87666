// Package rdmacm talks to the kernel's RDMA connection manager through
// its character device, /dev/infiniband/rdma_cm (module rdma_ucm,
// include/uapi/rdma/rdma_user_cm.h, ABI 4), in pure Go: no cgo, no
// librdmacm. It connects queue pairs by IP address the way librdmacm
// applications do (libfabric's verbs provider, NVMe-oF, rping, perftest
// -R): the CM resolves an address to a device, port and GID, picks the
// RoCE version and ToS, and carries the queue pair numbers in its
// messages; the queue pair itself is the application's, made with
// package uverbs on the device the CM names and moved INIT→RTR→RTS with
// the attributes InitQPAttr returns.
//
// A Channel is the open device. Its IDs (one per connection end, or a
// listener) wrap the kernel's commands; the events the kernel queues for
// them are read by one goroutine per channel through Go's poller and
// handed to the ID each is for, so every wait honours its context. A
// listener's requests arrive as IDs of their own (GetRequest), bounded by
// the listen backlog.
//
// The active side: CreateID, ResolveAddr, ResolveRoute, (QueryAddr or
// QueryRoute for the device), a queue pair in INIT, Connect, RTR and RTS,
// Establish. The passive side: CreateID, Bind, Listen, GetRequest, a
// queue pair through RTS, Accept, WaitEstablished. Failures are *Errors
// that say what an operator needs: the egress netdev of an address
// without RDMA device, nothing listening (reject reason 8), a peer's
// refusal (28), an unanswered request with the RoCE version and ToS it
// was sent with; refused commands are *CommandErrors. Both match the
// errnos they stand for with errors.Is (fs.ErrNotExist, fs.ErrPermission,
// syscall.ECONNREFUSED, syscall.ETIMEDOUT, ...).
//
// Code above this package drives the CM through the interfaces CM (a
// Channel), Conn and Listener (an ID), so that its tests can use package
// rdmacmtest's fake CM instead of the kernel's.
//
// Package locator finds the device through RDMA netlink (and names
// devices in errors); package cmconfig reads and sets the per-port
// defaults the CM applies (configfs default_roce_mode and
// default_roce_tos).
package rdmacm
