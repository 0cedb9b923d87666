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
// Unreliable datagram queue pairs send to address handles (CREATE_AH and
// DESTROY_AH, with rxe's AH number; a send work request that carries only
// rxe's address vector, as for kernels before 5.10, is routed by it):
// datagrams are delivered by GID, queue pair number and Q_Key without
// acknowledgement, with the network header (the IPv4 header of RoCE v2,
// or an IPv6 header) in the receive's first 40 bytes, and dropped as rxe
// drops them (a wrong Q_Key, no receive, an unknown queue pair, a receive
// too small; or it fails that receive and the queue pair, as 6.1 does:
// Config.ShortReceiveFails); a delayed datagram may be passed by the next.
// Completions go into the client's completion queue and, when it is
// armed, an event to its completion channel, a real descriptor (a pipe)
// the client reads through Go's poller.
//
// Faults: Inject fails a command or method with an errno on its Nth call;
// Fabric.Impair drops or delays packets; Config and SetPortState set port
// states, link layers and GID tables; a Config.Driver other than rxe is a
// driver whose data the fake does not know; Remove makes the device
// vanish (EIO). Resources counts what is left, for teardown tests;
// UnreadEvents the completion events the client has not read.
//
// Extending: a command is an entry of the commands table (file.go) or of
// the ioctl methods (ioctl.go) with a handler on the file's objects; a
// queue pair type is a case of the requester's prepare and transmit and
// of the responder's respond (transport.go; UD's in ud.go). A connection
// made by the RDMA CM is a queue pair whose MODIFY_QP attributes come from
// INIT_QP_ATTR; package rdmacmtest is a fake CM whose hosts are Devices.
//
// Not emulated: shared receive queues, atomics, memory windows, alternate
// paths, multicast, asynchronous events (the event file exists but stays
// empty), mlx5's driver data, and packets: messages are not cut at the
// MTU (an MTU mismatch between the two queue pairs is still refused as
// rxe refuses it; a datagram over the port's active MTU is not sent, its
// send completing all the same, as rxe does).
// The RDMA CM is not part of uverbs; a CM-made connection is a queue pair
// whose attributes come from INIT_QP_ATTR, which MODIFY_QP here takes like
// any.
package uverbstest
