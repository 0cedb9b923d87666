// Package uverbstest is a fake uverbs kernel, as nltest is for netlink: it
// stands in for the kernel and rxe behind a uverbs.Context, so that code
// above package uverbs (device and port queries, queue pairs, their
// exchange between hosts, traffic) runs as ordinary unit tests without an
// RDMA kernel.
//
// A Device is a fake RDMA device; Open gives a *uverbs.Context on it,
// through uverbs.NewContext, with the same client code as on a real
// device. The fake answers GET_CONTEXT (write and ioctl), QUERY_DEVICE
// (and its extended form), QUERY_PORT (and the ioctl), QUERY_GID_TABLE,
// ALLOC/DEALLOC_PD, REG/DEREG_MR, CREATE_COMP_CHANNEL, CREATE/DESTROY_CQ,
// REQ_NOTIFY_CQ, CREATE/MODIFY/QUERY/DESTROY_QP and the POST_SEND
// doorbell, with rxe's driver data: completion and work queues in memory
// the client maps, in rxe's format. Requests are checked as the kernel
// checks them (header sizes, handles, ib_modify_qp_is_ok's state table
// and rxe's attribute checks) and fail with the kernel's errno.
//
// Devices on one Fabric reach each other, as hosts on a network: the fake
// moves the data of SEND (into posted receives), RDMA WRITE and RDMA READ
// (into and out of registered memory, by key, protection domain, address
// range and access rights) between reliable connected queue pairs,
// message by message, with PSNs, acknowledgements, retries on loss
// (timeout and retry count) and on a missing receive (RNR timer and RNR
// retry count), and rxe's completion statuses, error state and flushes.
// Completions go into the client's completion queue and, when it is
// armed, an event to its completion channel, a real descriptor (a pipe)
// the client reads through Go's poller.
//
// Faults: Inject fails a command or method with an errno on its Nth call;
// Fabric.Impair drops or delays packets; Config and SetPortState set port
// states, link layers and GID tables; a Config.Driver other than rxe is a
// driver whose data the fake does not know; Remove makes the device
// vanish (EIO). Resources counts what is left, for teardown tests.
//
// Extending: a command is an entry of the commands table (file.go) or of
// the ioctl methods (ioctl.go) with a handler on the file's objects; a
// queue pair type is a case of the requester's prepare and transmit and
// of the responder's respond (transport.go). Unreliable datagram fits
// there: CREATE_AH an object of the file, the send WQE's ud member read in
// prepare, delivery by remote QPN and Q_Key without acknowledgement, and
// the 40-byte GRH written ahead of the payload in receive. A connection
// made by the RDMA CM is a queue pair whose MODIFY_QP attributes come from
// INIT_QP_ATTR; a fake CM device would share the Device and its QPN table.
//
// Not emulated: unreliable datagram queue pairs and address handles
// (CREATE_QP of type UD fails with EOPNOTSUPP), shared receive queues,
// atomics, memory windows, alternate paths, asynchronous events (the
// event file exists but stays empty), mlx5's driver data, and packets:
// messages are not cut at the MTU (an MTU mismatch between the two queue
// pairs is still refused as rxe refuses it). The RDMA CM is not part of
// uverbs; a CM-made connection is a queue pair whose attributes come from
// INIT_QP_ATTR, which MODIFY_QP here takes like any.
package uverbstest
