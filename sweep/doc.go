// Package sweep tests every pair of a fleet's nodes, bandwidth each way
// and latency, and names the bad node, the bad link, or the node that
// never answered: the library of `grdma sweep`.
//
// # Schedules
//
// AllPairs is the round-robin of the circle method: N-1 rounds of N/2
// disjoint pairs (N odd: N rounds, a node sitting each one out), every
// pair exactly once. Quick is a ring in two rounds (three for N odd),
// enough to tell a node from a link. Confirm retests flagged pairs and
// each suspect node against nodes that passed. Plan is what one pair
// runs: each bw test once each way, each lat test once.
//
// # Launched mode
//
// Every node runs a Runner (`grdma sweep run`, started by srun, a
// Kubernetes Indexed Job, pdsh or mpirun). The hosts come from a file or
// Slurm's SLURM_JOB_NODELIST (ExpandHostlist reads Slurm's syntax), the
// rank from the launcher (Rank). Each node computes the schedule and, in
// each round, meets its partner on the partner's TCP port: the control
// protocol (ProtocolVersion) checks that both run the same Params, then
// the pair runs its Plan through a PairTester (verbsprobe's Connect and
// Serve on the node's device). No MPI keeps the rounds in step: a node
// waits for a partner that shows signs of life however far behind it is
// (it answers status questions while busy), and gives up on one that
// shows none for Timeout; nodes tell each other which ranks did not
// answer, so that one dead node costs a timeout to a few of its partners
// and not to every one in turn. Each node writes JSON lines (Record):
// what it ran, and each test it took part in with its figures or why it
// failed.
//
// A coordinated sweep (one host driving the nodes' responders) reuses
// the schedules, Plan, the records and the report: only the Runner is
// launched mode's.
//
// # Verdicts
//
// Build reads every node's records and judges each pair. ClusterKit's
// limits are the defaults: a pair is bad below 93 % of the fleet's best
// bandwidth or above 2.1 times its best latency. Those assume healthy
// pairs that agree within a few per cent, as on a fabric of identical
// hardware. Where they do not — an emulated bed, whose concurrent
// healthy pairs get 0.043 to 0.166 Gb/s (×4) from two shared cores, or an
// oversubscribed fabric — ClusterKit's limit flags half the healthy
// fleet, and ClusterKit leans on retests to clear them. A launched sweep
// has no one to order retests, so the limit adapts instead: the fleet's
// median M (the median of each node's median, which a bad node's pairs
// move little) and its best B say how far healthy pairs spread above the
// median, and the same spread, Spread (2.5) times over, is allowed below
// it:
//
//	bandwidth limit = min(0.93 B, M (M/B)^Spread)
//	latency limit   = max(2.1 B, M (M/B)^Spread)
//
// While B is within about 2 % of M (0.93^(1/3.5) ≈ 0.979), the first term
// is the smaller: ClusterKit's limit exactly. On the emulated bed (B/M
// about 1.7 to 2) the limit drops to M/4 to M/6, below the slowest
// healthy pair (about M/2) and far above a planted fault (a node rate
// limited to 4 Mb/s measures 0.004 Gb/s, M/20). Simulated with healthy
// pairs log-uniformly spread ×4 and one node at 0.004 Gb/s, 200 sweeps
// each: 8 nodes, a verdict on a healthy fleet in 1 and the bad node
// missed in 1; 10 nodes, none and none; 6 nodes, 13 and 14 (small fleets
// give the median and the best less to stand on). Criteria.Spread 0
// keeps ClusterKit's limits whatever the fleet does; absolute floors (a
// bandwidth, a fraction of the port rate, a latency) hold in any case.
//
// A pair with a bad or failed test is bad — except that one test beyond a
// limit the spread relaxed, while the pair's other tests passed and no
// retest ran, makes it only suspect: on a fleet noisy enough to relax the
// limit one such reading is weak evidence (main's make e2e on 6.1 saw a
// healthy pair at a fifth of the median one way and normal the other).
// A suspect pair counts against its nodes and is retested, but makes no
// verdict of its own; a retest that fails again makes it bad. On a fleet
// that does not relax (hardware), one bad test is a verdict, as in
// ClusterKit. Attribution then works on the pairs: a node is unreachable
// when it took part in no test; a node is bad (VerdictNode) when most of
// its pairs are bad or suspect and most of the
// partners of those are fine with the other nodes; a bad pair of two
// nodes both fine with the others is a bad link (VerdictLink); bad pairs
// neither explains are reported together (VerdictPairs: a switch, several
// bad nodes, or a fleet of two). A report with no verdict is OK. Build
// refuses records of different parameters (the Params ID in every
// record) and of two runs, and Report.Confirm says what to retest.
package sweep
