// Package udping is a ping over unreliable datagram (UD) queue pairs, in
// pure Go on rxe, for a pingmesh: a Responder answers every prober on one
// UD queue pair, a Prober sends from one UD queue pair to any number of
// targets (added and removed while it runs, each at its own rate, all
// together within a bound) and streams a Result per probe. This is how
// R-Pingmesh (SIGCOMM 2024) probes: one UD queue pair per NIC serving
// every peer, where RC would need a connection per pair of hosts.
//
// # The exchange
//
// The prober sends a probe (a sequence number of its session, padded to
// the probe's size); the responder answers with two datagrams: an echo at
// once, as long as the probe, and then a report of how long it held the
// probe, from polling the probe's receive (T2) to the echo's send (T3).
// The prober takes the probe's send (T1) and the echo's arrival (T4):
//
//	RTT     = T4 − T1            what the prober saw
//	Network = RTT − (T3 − T2)    the responder's delay removed
//
// This is R-Pingmesh's two-ACK exchange: with a device's completion
// timestamps T3 is the echo's send completion, the time it went on the
// wire, known only once it left: it travels in a second datagram. With
// software timestamps T1 and T3 are both read just before the send's
// doorbell. rxe's send completions come from its completion work, in the
// guests milliseconds late, and a clock read after the doorbell may be
// read after the process was preempted by the very peer it woke (a
// datagram to itself): both made the responder's delay exceed whole round
// trips in the guests. Read before the send, [T2, T3] lies within
// [T1, T4] by causality, so Network is never negative; each side's
// doorbell (where rxe transmits) counts as network, alike on both. The
// report still follows the echo, so that hardware timestamps need no
// other format. The echo is as long as the probe so that both directions
// carry each size: a link that drops large packets one way shows as a
// timeout, or as an echo lost (the report came, the echo did not) when
// it is the way back. A probe of EchoDelayMax bytes or less asks for one
// reply instead (FlagEchoDelay, to responders whose control channel says
// they take it): its echo carries the delay, no report follows. The
// report tells nothing more there — an echo that small is lost where a
// report would be — and its send was what the responder spent most on. Both clocks are used only for differences on their
// own host: nothing assumes them in step.
//
// Times are software: the process's clock, read when a receive's
// completion is polled and before a send's doorbell (Result.Timestamps
// says so). rxe reports no completion
// timestamps, and grdma reads no other device's data path; the time a
// datagram waits until it is polled (a wake-up on the completion
// channel) is counted as network time, unless Spin polls meanwhile.
//
// Probe sizes cycle through 64, 512 and 1024 bytes and the path MTU
// (DefaultSizes), after Aegis (NSDI 2025): loss that hits only packets
// over 1 KiB passes small probes.
//
// # Addresses and trust
//
// A prober learns its target's UD address (GID, queue pair number, Q_Key,
// MTU) from the responder's TCP control channel (a Resolver; grdma's is
// verbsprobe.LookupUD against `grdma probe DEV serve`), which in turn
// registers the prober's own address with the Responder: a responder
// answers only registered probers, each with an address handle made at
// registration (not per datagram), and forgets one silent for its
// PeerTTL. Its Q_Key is random, so the kernel drops datagrams of anyone
// who did not ask the control channel. A prober whose probes go
// unanswered RefreshAfter times in a row asks again: a responder that
// restarted has a new queue pair number and Q_Key.
//
// Everything read from the wire is checked before use (ParseHeader,
// uverbs.ParseGRH): a datagram's magic, version, kind and length, a
// report's delay (at most MaxDelay), the sender's GID and queue pair
// against the probe's target, the session and sequence number against
// the probes awaited. Receive buffers hold the largest datagram any peer
// can send; everything a side keeps is bounded (registered probers,
// targets, probes awaited, answers a second), and what is dropped is
// counted (ResponderStats, ProberStats).
package udping
