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
// This is R-Pingmesh's two-ACK exchange: the time an echo left is known
// only once it left, so it travels in a second datagram. With a device's
// completion timestamps T3 would be the echo's send completion (the time
// it went on the wire). With software timestamps on rxe, T1 and T3 are
// both read when the send's doorbell returns: rxe transmits inside the
// doorbell, while its send completions come later from its completion
// work (in the guests, milliseconds later: a T3 taken there made the
// responder's delay longer than whole round trips). A single reply could
// not carry T3 either way. The echo is as long as the probe so that both
// directions carry each size: a link that drops large packets one way
// shows as a timeout, or as an echo lost (the report came, the echo did
// not) when it is the way back. Both clocks are used only for
// differences on their own host: nothing assumes them in step; what
// still differs between the two sides' points of measure can make a
// delay exceed a round trip on a fast path, and Network is then 0.
//
// Times are software: the process's clock, read when a receive's
// completion is polled and when a send's doorbell returns
// (Result.Timestamps says so). rxe reports no completion
// timestamps, and grdma reads no other device's data path; the time a
// datagram waits until it is polled (a wake-up on the completion
// channel) is counted as network time.
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
