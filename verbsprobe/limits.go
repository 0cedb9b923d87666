package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/grdma/grdma/uverbs"
)

// Limits are a listener's own policy: what it pins and how long a peer
// may hold it. A peer's hello only asks; what it asks beyond the limits is
// refused with a message naming both values.
type Limits struct {
	// MaxSize is the largest message a peer may ask for; 0 means
	// DefaultMaxSize. The memory pinned for a peer is at most four
	// messages (traffic) or two (bw, lat).
	MaxSize int
	// MaxDuration is the longest test a peer may ask for, and what the
	// time a test is allowed (see Budget) is capped at; 0 means
	// DefaultMaxDuration.
	MaxDuration time.Duration
	// MaxPinned is the most memory a peer's test may pin (Test.Pinned);
	// 0 means four messages of MaxSize, which never binds.
	MaxPinned int
}

// Defaults of Limits.
const (
	// DefaultMaxSize: 16 MiB, so a listener pins at most 64 MiB for a
	// peer, however large a message it asks for.
	DefaultMaxSize = 16 << 20
	// DefaultMaxDuration is MaxTestDuration: a listener holds a peer for
	// at most an hour and its timeout.
	DefaultMaxDuration = MaxTestDuration
)

// WithDefaults fills in the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = DefaultMaxDuration
	}
	if l.MaxPinned <= 0 {
		l.MaxPinned = regionCount * l.MaxSize
	}
	return l
}

// LimitError is a peer's request over a listener's limit: it names both
// values.
type LimitError struct {
	What    string // "size", "duration"
	Asked   string // what the peer asked for: "268435456 bytes"
	Allowed string // the listener's limit: "16777216 bytes"
	Keyword string // the listener's keyword that raises it
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the test asks for %s %s; the listener allows at most %s (its %s)", e.What, e.Asked, e.Allowed, e.Keyword)
}

// Check refuses a test over the limits.
func (l Limits) Check(t Test) error {
	l = l.WithDefaults()
	if t.Size > l.MaxSize {
		return &LimitError{What: "size", Asked: fmt.Sprintf("%d bytes", t.Size), Allowed: fmt.Sprintf("%d bytes", l.MaxSize), Keyword: "size"}
	}
	if t.Duration > l.MaxDuration {
		return &LimitError{What: "duration", Asked: t.Duration.String(), Allowed: l.MaxDuration.String(), Keyword: "duration"}
	}
	if p := t.Pinned(); p > l.MaxPinned {
		return &LimitError{What: "memory", Asked: fmt.Sprintf("%d bytes pinned", p), Allowed: fmt.Sprintf("%d bytes a peer", l.MaxPinned), Keyword: "peer-memory"}
	}
	return nil
}

// Pinned is the memory a side registers for a test: four parts of at
// least payloadSize bytes for traffic, two messages for bw, lat and
// pingpong, none for connect.
func (t Test) Pinned() int {
	switch t.Kind {
	case TestConnect, TestUDPing, "":
		return 0
	case TestTraffic:
		return max(t.Size, payloadSize) * regionCount
	case TestUDPingpong:
		return 2 * (t.Size + uverbs.GRHSize)
	}
	return 2 * t.Size
}

// The bounds a test's declared work is given by Budget: a slow link (rxe
// under emulation moves about 10 MB/s, with 50 ms round trips) stays well
// inside them; a peer that stalls or streams on does not.
const (
	minRate          = 1 << 20 // bytes a second
	maxExchangeTime  = 250 * time.Millisecond
	bandwidthStartup = time.Second
)

// Budget is how long a listener lets a peer hold it for test t, from its
// hello to its verdict: the declared duration, or the declared work at a
// slow rate, plus timeout (the set-up and the last waits), capped at the
// limit's MaxDuration plus timeout. A peer still there after it is cut
// off (*OverstayError).
func (l Limits) Budget(t Test, timeout time.Duration) time.Duration {
	l = l.WithDefaults()
	bytes := func(n float64) time.Duration { return time.Duration(n / minRate * float64(time.Second)) }
	var work time.Duration
	switch {
	case t.Duration > 0:
		work = t.Duration
	case t.Kind == TestTraffic:
		work = 3 * (maxExchangeTime + bytes(float64(max(t.Size, payloadSize))))
	case t.Kind == TestBandwidth:
		work = bandwidthStartup + bytes(float64(t.Iters)*float64(t.Size))
	case t.Kind == TestLatency || t.Kind == TestPingpong || t.Kind == TestUDPingpong:
		work = time.Duration(float64(t.Iters) * float64(maxExchangeTime+2*bytes(float64(t.Size))))
	}
	if work < 0 || work > l.MaxDuration {
		work = l.MaxDuration
	}
	return work + timeout
}

// OverstayError means a peer held the listener longer than its test's
// budget: the listener cut it off.
type OverstayError struct {
	Test    Test
	Allowed time.Duration // the budget
}

func (e *OverstayError) Error() string {
	declared := fmt.Sprintf("%d iterations", e.Test.Iters)
	switch {
	case e.Test.Duration > 0:
		declared = "duration " + e.Test.Duration.String()
	case e.Test.Kind == TestTraffic || e.Test.Kind == TestConnect:
		declared = "one exchange of each"
	}
	return fmt.Sprintf("cut off: %s ran past the %v this side allows it (declared %s of %d bytes, and the timeout)",
		e.Test, e.Allowed.Round(time.Millisecond), declared, e.Test.Size)
}

// withBudget returns ctx ended by an *OverstayError once test has had its
// budget.
func withBudget(ctx context.Context, l Limits, test Test, timeout time.Duration) (context.Context, context.CancelFunc) {
	allowed := l.Budget(test, timeout)
	return context.WithDeadlineCause(ctx, time.Now().Add(allowed), &OverstayError{Test: test, Allowed: allowed})
}

// interruption is why ctx ended, as a step reports it: the cut-off of an
// overstaying peer as it is, anything else as an interruption.
func interruption(ctx context.Context) error {
	var over *OverstayError
	if cause := context.Cause(ctx); errors.As(cause, &over) {
		return over
	}
	return fmt.Errorf("interrupted: %w", ctx.Err())
}

// ParseFrom reads one word of an allow-list: an address ("10.0.0.2",
// "fe80::1"), a network ("10.0.0.0/24") or a host name, which is returned
// as an invalid prefix for ResolveAllow to look up.
func ParseFrom(word string) (netip.Prefix, error) {
	if strings.Contains(word, "/") {
		p, err := netip.ParsePrefix(word)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not ADDR/PREFIX (10.0.0.0/24, fd00::/64)", word)
		}
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(word); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	if !validHostname(word) {
		return netip.Prefix{}, fmt.Errorf("%q is neither an address, a network nor a host name", word)
	}
	return netip.Prefix{}, nil
}

func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ResolveAllow turns the words of an allow-list into networks, looking up
// host names (each of their addresses is allowed).
func ResolveAllow(ctx context.Context, words []string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	for _, w := range words {
		p, err := ParseFrom(w)
		if err != nil {
			return nil, err
		}
		if p.IsValid() {
			allow = append(allow, p)
			continue
		}
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", w)
		if err != nil {
			return nil, fmt.Errorf("from %s: %w", w, err)
		}
		for _, a := range addrs {
			allow = append(allow, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	return allow, nil
}
