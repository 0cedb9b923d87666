package pingmesh

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// Pinger sends one probe to a target's responder and waits for its
// answer: the UD ping of package udping, one queue pair serving every
// target, or a fake in tests. Ping is called from many goroutines at
// once, for many targets.
type Pinger interface {
	// Ping sends a probe of size payload bytes (0: the path MTU) to the
	// responder at target (host:port of its TCP control channel, over
	// which the pinger learns its UD address once) and returns when the
	// answer came, ctx ended, or the probe could not be sent. A probe
	// that was sent and got no answer by ctx's deadline returns an error
	// for which errors.Is(err, ErrLost) holds, with Reply.Sent set.
	Ping(ctx context.Context, target string, size int) (Reply, error)
}

// PathMTUer is a Pinger that knows a target's path MTU once it has its
// address; sizes at or above it are then probed once, at the MTU.
type PathMTUer interface {
	PathMTU(target string) (int, bool)
}

// Reply is the outcome of one probe.
type Reply struct {
	// Size is the payload sent, in bytes (the path MTU for size 0).
	Size int
	// Sent is whether the probe left: false when it failed before
	// (no address for the target yet, a local error).
	Sent bool
	// RTT is the network round trip, the responder's own delay (from
	// receiving the probe to sending its answer) taken out.
	RTT time.Duration
	// ResponderDelay is that delay.
	ResponderDelay time.Duration
	// Hardware is whether the times come from completion timestamps of
	// the device rather than the host's clock.
	Hardware bool
}

// ErrLost means a probe was sent and no answer came in time.
var ErrLost = errors.New("no answer in time")

// ErrorKind is why a probe could not be sent or answered, other than a
// loss: the value of the kind label of grdma_pingmesh_errors_total.
type ErrorKind string

// Error kinds.
const (
	// KindResolve: the target's host name does not resolve.
	KindResolve ErrorKind = "resolve"
	// KindNoResponder: nothing answers on the target's control port
	// (refused, unreachable, no answer), so its UD address is unknown.
	KindNoResponder ErrorKind = "no_responder"
	// KindRefused: the responder answered and refused (busy, limits,
	// allow-list, authentication).
	KindRefused ErrorKind = "refused"
	// KindLocal: this node's device or queue pair failed.
	KindLocal ErrorKind = "local"
	// KindOther: anything else.
	KindOther ErrorKind = "other"
)

// ErrorKinds lists every kind, in the order they are exported.
var ErrorKinds = []ErrorKind{KindResolve, KindNoResponder, KindRefused, KindLocal, KindOther}

// KindError is an error that says its kind; a Pinger's errors should
// implement it (or wrap one that does).
type KindError interface {
	error
	PingErrorKind() ErrorKind
}

// Kind classifies an error of Ping that is not a loss: by KindError if
// the chain has one, else a DNS error is KindResolve and a refused,
// unreachable or timed-out connection KindNoResponder.
func Kind(err error) ErrorKind {
	var k KindError
	var dns *net.DNSError
	switch {
	case errors.As(err, &k):
		return k.PingErrorKind()
	case errors.As(err, &dns):
		return KindResolve
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ECONNRESET):
		return KindNoResponder
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindNoResponder
	}
	return KindOther
}
