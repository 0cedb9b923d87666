package udping

import (
	"math"
	"time"
)

// Summary sums up a target's results as ping does: probes sent, replies,
// loss, and the round trips' minimum, average, maximum and mean deviation.
type Summary struct {
	Target string
	// Sent counts the probes that left; Replies those whose echo came;
	// EchoLost those whose report came but not their echo.
	Sent, Replies, EchoLost int
	// Network is the network's round trips (the responder's delay
	// removed, where known), RTT the whole ones, Delay the responder's.
	Network, RTT, Delay Spread
	Timestamps          TimestampSource
}

// Spread is min, average, max and mean deviation (as ping's mdev: the
// standard deviation) of durations.
type Spread struct {
	N                   int
	Min, Avg, Max, Mdev time.Duration
	sum, sumSq          float64
}

func (s *Spread) add(d time.Duration) {
	if s.N == 0 || d < s.Min {
		s.Min = d
	}
	if d > s.Max {
		s.Max = d
	}
	s.N++
	x := float64(d)
	s.sum += x
	s.sumSq += x * x
	mean := s.sum / float64(s.N)
	s.Avg = time.Duration(mean)
	s.Mdev = time.Duration(math.Sqrt(max(s.sumSq/float64(s.N)-mean*mean, 0)))
}

// Add counts a result of the target.
func (s *Summary) Add(r Result) {
	if r.Sent.IsZero() {
		return // none left: nothing to count
	}
	s.Timestamps = r.Timestamps
	s.Sent++
	switch r.Outcome {
	case OutcomeReply:
		s.Replies++
		s.RTT.add(r.RTT)
		s.Network.add(r.Network())
		if r.DelayKnown {
			s.Delay.add(r.Delay)
		}
	case OutcomeEchoLost:
		s.EchoLost++
	}
}

// Loss is the share of probes sent that got no reply, in percent.
func (s *Summary) Loss() float64 {
	if s.Sent == 0 {
		return 0
	}
	return 100 * float64(s.Sent-s.Replies) / float64(s.Sent)
}
