// Package nldev is a pure-Go client of the kernel's RDMA netlink device API
// (NETLINK_RDMA, the RDMA_NLDEV_CMD_* commands of rdma_netlink.h) — what
// iproute2's rdma speaks, without libmnl or cgo.
//
// A Client, from Dial (or NewClient over any *netlink.Conn, such as an
// nltest fake), reuses one socket for every request:
//
//   - devices and ports: Devices, Device, DeviceByName, Ports, Port
//     (rdma dev, rdma link);
//   - changes: AddLink and DeleteLink (rxe, siw), RenameDevice,
//     SetDeviceNetNS and MoveDeviceToNetNS, SetAdaptiveModeration;
//   - the subsystem: System, SetNetNSMode, SetPrivilegedQKey (rdma system);
//   - hardware counters and QP counter binding: PortCounters,
//     CounterStatus, SetOptionalCounters, QPCounterMode, SetQPCounterAuto,
//     BindQPCounter, UnbindQPCounter, QPCounters (rdma statistic);
//   - resources: ResSummaries, ResSummary, ResDump, ResGet, ResDumpRaw,
//     ResGetRaw, decoding QPs, CM IDs, CQs, MRs, PDs, contexts and SRQs
//     as they arrive (rdma resource);
//   - events: Monitor and DecodeEvents (rdma monitor; Linux 6.13+, or a
//     backport such as Debian's 6.12).
//
// DialNetNS (or Config.NetNS) points a client at the RDMA netlink of another
// network namespace, named as rdma -n names it (OpenNetNS). Dumps interrupted by concurrent changes are retried. A failed
// request is an *Error that says what went wrong in words, with the
// kernel's extended-ack message when it sent one, and unwraps to the errno
// (errors.Is(err, unix.EPERM)); a device name that matches nothing is a
// *ib.NotFoundError listing the devices there are; ErrNoRDMANetlink tells a
// kernel without RDMA from other failures.
//
// Decoding is tested on replies recorded from Debian's 6.1 and 6.12
// kernels (testdata/nldev) and fuzzed; attributes a kernel does not send
// are reported as absent (Has), not as zero.
package nldev
