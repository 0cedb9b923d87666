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
// probe, from polling the probe's receive (T2) to polling its echo's send
// completion (T3). The prober takes the probe's send (T1, once its
// doorbell returned: rxe transmits in it) and the echo's arrival (T4):
//
//	RTT     = T4 − T1            what the prober saw
//	Network = RTT − (T3 − T2)    the responder's delay removed
//
// This is R-Pingmesh's two-ACK exchange. A single reply carrying the
// responder's delay would have to take T3 before its own send, leaving
// the responder's send path (the doorbell, rxe's transmit) in the
// network's share; the echo's completion comes after that path, and with
// a device's completion timestamps it would be the time the echo left,
// known only once it left: hence the second datagram. Both clocks are
// used only for differences on their own host: nothing assumes them in
// step. The echo is as long as the probe so that both directions carry
// each size: a link that drops large packets one way shows as a
// timeout, or as an echo lost (the report came, the echo did not) when
// it is the way back.
//
// Times are software: the process's clock read when a completion is
// polled (Result.Timestamps says so). rxe reports no completion
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
