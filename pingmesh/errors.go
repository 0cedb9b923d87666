package pingmesh

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/grdma/grdma/verbsprobe"
)

// ErrorKind is why a probe could not be sent: the value of the kind label
// of grdma_pingmesh_errors_total.
type ErrorKind string

// Error kinds.
const (
	// KindResolve: the target's host name does not resolve.
	KindResolve ErrorKind = "resolve"
	// KindNoResponder: nothing answers on the target's control port
	// (refused, unreachable, no answer), so its UD address is unknown.
	KindNoResponder ErrorKind = "no_responder"
	// KindRefused: the responder answered and refused (busy, limits,
	// allow-list, shared secret).
	KindRefused ErrorKind = "refused"
	// KindLocal: this node's side (its queue pair, a size over the path
	// MTU).
	KindLocal ErrorKind = "local"
	// KindOther: anything else.
	KindOther ErrorKind = "other"
)

// ErrorKinds lists every kind, in the order they are exported.
var ErrorKinds = []ErrorKind{KindResolve, KindNoResponder, KindRefused, KindLocal, KindOther}

// KindError is an error that says its kind.
type KindError interface {
	error
	PingErrorKind() ErrorKind
}

// Kind classifies the error of a target's lookup (its control channel):
// by a KindError in the chain (DialError), a busy or refusing responder
// (verbsprobe's errors), a DNS error, a refused, unreachable or timed-out
// connection.
func Kind(err error) ErrorKind {
	var k KindError
	var dns *net.DNSError
	var remote *verbsprobe.RemoteFailure
	var ne net.Error
	switch {
	case err == nil:
		return KindOther
	case errors.As(err, &k):
		return k.PingErrorKind()
	case verbsprobe.IsBusy(err), errors.As(err, &remote), strings.Contains(err.Error(), "shared secret"):
		return KindRefused
	case errors.As(err, &dns):
		return KindResolve
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return KindNoResponder
	}
	return KindOther
}

// DialError is a connection to a responder's control channel that
// failed, with its kind. It does not unwrap: verbsprobe retries a refused
// connection until its timeout (a listener about to start), but a probe
// reports at once that nothing listens.
type DialError struct {
	Kind ErrorKind
	Err  error
}

func (e *DialError) Error() string { return e.Err.Error() }

// PingErrorKind is the kind.
func (e *DialError) PingErrorKind() ErrorKind { return e.Kind }

// Dial returns dial (nil: a net.Dialer's) with its errors made
// *DialErrors: a name that does not resolve KindResolve, anything else
// KindNoResponder. Give it to verbsprobe.ConnectConfig.Dial.
func Dial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			return c, nil
		}
		var dns *net.DNSError
		if errors.As(err, &dns) {
			return nil, &DialError{KindResolve, err}
		}
		return nil, &DialError{KindNoResponder, err}
	}
}
