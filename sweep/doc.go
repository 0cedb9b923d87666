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
// A launched sweep retests when launched again: ReadConfirm takes the
// retest a JSON report asks for (Report.Confirm) and every node runs it
// with Runner.Retest set; its records, start record marked KindConfirm,
// join the first pass's, and Build judges each retested pair by its
// retest alone.
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
// fleet, and ClusterKit leans on retests to clear them. A retest is
// chosen by the same limits (and a launched sweep retests only when
// launched again), so the limit adapts instead: the fleet's
// median M (the median of each node's median, which a bad node's pairs
// move little) and the 90th percentile P of the pairs' bandwidths
// (AnchorPercentile) say how far healthy pairs spread above the median,
// and the same spread, Spread (2.5) times over, is allowed below it (B:
// the best pair):
//
//	bandwidth limit = min(0.93 B, M (M/P)^Spread), and once relaxed at most M/4
//	latency limit   = max(2.1 B, M (M/B)^Spread)
//
// P and not the best: on the emulated bed the best pair is often an
// outlier (main's CI on 6.1: 0.159 Gb/s, 3 times the median 0.0539), and
// the limit anchored on it fell to 0.0036 Gb/s, under a link limited to
// 4 Mb/s (0.00377): no verdict. Latency keeps the best: the bed plants no
// latency fault to check another anchor against. M/4 (RelaxedBWMax): the
// bed's healthy pairs spread less above the median than below it (one way
// down to M/2.8), and anchored on P alone a fleet with a short upper tail
// had its limit at M/1.75 and four healthy pairs suspect; simulated with
// the lower tail twice the upper (σ of ln 0.3 and 0.15), 55 of 400 healthy
// sweeps got a verdict without M/4, none with it. While the pairs agree
// within about 2 % (P and B within 2 % of M; 0.93^(1/3.5) ≈ 0.979) the
// first term is the smaller: ClusterKit's limit exactly. On the 8-guest
// bed (6.1; five fleets of the CI run, TestGuestTables) the limit came to
// M/4 to M/4.5: under the slowest healthy pair (M/1.4 to M/2.8) by 1.6
// to 2.8 times, and above a planted 4 Mb/s fault (M/13 to M/16) by 3.2 to
// 3.6 times. Simulated, 200 sweeps each of 8 nodes, healthy pairs spread
// log-normally as the bed's (σ of ln 0.18 to 0.48), a node or a link at
// M/14: a verdict on a healthy fleet in 1 at each σ, the bad node and the
// bad link missed in none (anchored on the best: missed in 133 and 105
// at σ 0.48); healthy pairs log-uniform ×4: 10 nodes, none, none and
// none; 6 nodes, 6, 3 and 1 (small fleets give the median and the
// percentile less to stand on). Criteria.Spread 0 keeps ClusterKit's
// limits whatever the fleet does; absolute floors (a bandwidth, a
// fraction of the port rate, a latency) hold in any case.
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
// record) and of two runs (a retest's records aside), and Report.Confirm
// says what to retest.
package sweep
